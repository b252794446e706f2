"""The README's table of Optimum Graphcore's 16 model families: each predicted on a POD16 with its Optimum
``ipu_config.json`` (``examples/optimum-graphcore/``), as markdown rows (``tests/test_readme_families.py`` checks
that the README's rows are what this prints).

    python benchmarks/family_table.py
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List, Tuple

OPTIMUM = "examples/optimum-graphcore"
# family -> (task as the README shows it, overrides after `python -m ipuexp`)
FAMILIES: Dict[str, Tuple[str, List[str]]] = {
    "BART": ("seq2seq-lm", ["model=hf", "model.hf.config=bart-base", "model.hf.task=seq2seq-lm",
                            f"model.hf.ipu_config={OPTIMUM}/bart-base-ipu.json", "options.gradient_accumulation=128",
                            "data.micro_batch_size=2"]),
    "BERT": ("pretraining", ["model=hf", "model.hf.config=bert-base-uncased", "model.hf.task=pretraining",
                             f"model.hf.ipu_config={OPTIMUM}/bert-base-uncased-ipu.json", "data.micro_batch_size=8"]),
    "ConvNeXt": ("image-classification", ["model=hf", "model.hf.config=convnext-base-224",
                                          "model.hf.task=image-classification",
                                          f"model.hf.ipu_config={OPTIMUM}/convnext-base-ipu.json",
                                          "data.micro_batch_size=2"]),
    "DeBERTa": ("question-answering", ["model=hf", "model.hf.config=deberta-base", "model.hf.task=question-answering",
                                       "model.sequence_length=384",
                                       f"model.hf.ipu_config={OPTIMUM}/bert-base-uncased-ipu.json",
                                       "options.gradient_accumulation=64", "data.micro_batch_size=2"]),
    "DistilBERT": ("question-answering", ["model=hf", "model.hf.config=distilbert-base-uncased",
                                          "model.hf.task=question-answering", "model.sequence_length=384",
                                          f"model.hf.ipu_config={OPTIMUM}/distilbert-base-ipu.json",
                                          "data.micro_batch_size=2"]),
    "GPT-2": ("causal-lm", ["model=hf", "model.hf.config=gpt2-medium", "model.hf.task=causal-lm",
                            "model.sequence_length=1024", "model.vocab_size=50260",
                            f"model.hf.ipu_config={OPTIMUM}/gpt2-medium-ipu.json",
                            "options.pipeline.device_mapping=[0,1,2,3,4,5,6,7,0]", "data.micro_batch_size=1"]),
    "GroupBERT": ("masked-lm (model.target)", ["model.name=custom", "model.target=examples.groupbert:build",
                                               f"model.hf.ipu_config={OPTIMUM}/bert-base-uncased-ipu.json",
                                               "data.micro_batch_size=4"]),
    "HuBERT": ("audio-classification", ["model=hf", "model.hf.config=hubert-base-ls960",
                                        "model.hf.task=audio-classification", "model.sequence_length=16000",
                                        f"model.hf.ipu_config={OPTIMUM}/hubert-base-ipu.json",
                                        "data.micro_batch_size=2"]),
    "LXMERT": ("question-answering", ["model=hf", "model.hf.config=lxmert-base-uncased",
                                      "model.hf.task=question-answering", "options.pipeline.layers_per_ipu=[0,9,5,5]",
                                      f"model.hf.ipu_config={OPTIMUM}/lxmert-base-ipu.json", "data.micro_batch_size=4"]),
    "MPNet": ("masked-lm", ["model=hf", "model.hf.config=mpnet-base", "model.hf.task=masked-lm",
                            f"model.hf.ipu_config={OPTIMUM}/mpnet-base-ipu.json", "data.micro_batch_size=8"]),
    "MT5": ("seq2seq-lm", ["model=hf", "model.hf.config=mt5-small", "model.hf.task=seq2seq-lm",
                           f"model.hf.ipu_config={OPTIMUM}/mt5-small-ipu.json", "model.hf.optimum_graphcore=0.7.1",
                           "data.micro_batch_size=1"]),
    "RoBERTa": ("question-answering", ["model=hf", "model.hf.config=roberta-base", "model.hf.task=question-answering",
                                       "model.sequence_length=384",
                                       f"model.hf.ipu_config={OPTIMUM}/roberta-base-squad2-ipu.json",
                                       "data.micro_batch_size=2"]),
    "T5": ("seq2seq-lm", ["model=hf", "model.hf.config=t5-small", "model.hf.task=seq2seq-lm",
                          f"model.hf.ipu_config={OPTIMUM}/t5-small-ipu.json", "model.hf.optimum_graphcore=0.6.0",
                          "options.gradient_accumulation=16",
                          "data.micro_batch_size=4"]),
    "ViT": ("image-classification", ["model=hf", "model.hf.config=vit-base-patch16-224",
                                     "model.hf.task=image-classification",
                                     f"model.hf.ipu_config={OPTIMUM}/vit-base-ipu.json", "data.micro_batch_size=1"]),
    "Wav2Vec2": ("ctc", ["model=hf", "model.hf.config=wav2vec2-base", "model.hf.task=ctc",
                         "model.sequence_length=160000", "model.hf.target_length=200",
                         f"model.hf.ipu_config={OPTIMUM}/wav2vec2-ctc-base-ipu.json", "data.micro_batch_size=1"]),
    "Whisper": ("seq2seq-lm", ["model=hf", "model.hf.config=whisper-tiny", "model.hf.task=seq2seq-lm",
                               "model.sequence_length=3000", "model.hf.target_length=448",
                               f"model.hf.ipu_config={OPTIMUM}/whisper-tiny-ipu.json", "model.hf.optimum_graphcore=0.6.1",
                               "data.micro_batch_size=1"]),
}


def row(family: str) -> str:
    """The family's README row: family, task, the overrides, the IPUs used, throughput and its band, fits."""
    from ipuexp.config.compose import load_experiment
    from ipuexp.runner.evaluation import evaluate

    task, overrides = FAMILIES[family]
    result = evaluate(load_experiment(*overrides, "system=pod16")).result
    t = result.throughput
    band = f" (±{t.error_band_pct:.0f}%)" if t.error_band_pct is not None else ""
    run = result.run
    ipus = f"{run.replicas} x {run.ipus_per_replica}" if run is not None else ""
    return (f"| {family} | {task} | `{' '.join(o for o in overrides if o != 'model=hf')}` | {ipus} | "
            f"{t.samples_per_s:,.0f}{band} | {'yes' if result.fits else 'no'} |")


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples.groupbert from the repository
    print("| family | task | overrides (`python -m ipuexp model=hf ...`) | replicas x IPUs | samples/s (band) | fits |")
    print("|---|---|---|---|---|---|")
    for family in FAMILIES:
        print(row(family))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
