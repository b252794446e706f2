"""The Transformers task model of a ``model.hf`` configuration: its config.json read by Transformers and the task
class of ``model.hf.task`` built from it (its own modelling code, nothing written per architecture)."""
from __future__ import annotations

from typing import Dict, Tuple

import torch
from torch import nn

from ipuexp.models.hf_attention import ATTENTION
from ipuexp.models.hf_source import HFSource

AUTO: Dict[str, Tuple[str, ...]] = {
    "pretraining": ("AutoModelForPreTraining",),
    "masked-lm": ("AutoModelForMaskedLM",),
    "causal-lm": ("AutoModelForCausalLM",),
    "classification": ("AutoModelForSequenceClassification", "AutoModelForImageClassification",
                       "AutoModelForAudioClassification"),
    "question-answering": ("AutoModelForQuestionAnswering",),
    "seq2seq-lm": ("AutoModelForSeq2SeqLM", "AutoModelForSpeechSeq2Seq"),
    "token-classification": ("AutoModelForTokenClassification",),
    "audio-classification": ("AutoModelForAudioClassification",),
    "ctc": ("AutoModelForCTC",),
    "image-classification": ("AutoModelForImageClassification",),
}
"""``model.hf.task`` -> Transformers' Auto classes that build it (the first that knows the model type)."""
_MAPPINGS = {
    "AutoModelForPreTraining": "MODEL_FOR_PRETRAINING_MAPPING_NAMES",
    "AutoModelForMaskedLM": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "AutoModelForCausalLM": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "AutoModelForSequenceClassification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "AutoModelForImageClassification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "AutoModelForAudioClassification": "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
    "AutoModelForQuestionAnswering": "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES",
    "AutoModelForSeq2SeqLM": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "AutoModelForSpeechSeq2Seq": "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "AutoModelForTokenClassification": "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES",
    "AutoModelForCTC": "MODEL_FOR_CTC_MAPPING_NAMES",
}
SUPPORTED_EXAMPLES = ("bert", "roberta", "gpt2", "vit", "llama", "t5", "bart", "whisper", "wav2vec2")
"""Model types named when a config.json's type is unknown."""


def _auto_for(task: str, model_type: str) -> str:
    """The Auto class that builds ``task`` for ``model_type``, or None."""
    from transformers.models.auto import modeling_auto

    return next((a for a in AUTO[task] if model_type in getattr(modeling_auto, _MAPPINGS[a])), None)


def tasks_of(model_type: str) -> list:
    """The tasks Transformers has a class for, for ``model_type``."""
    return [t for t in AUTO if _auto_for(t, model_type) is not None]


def task_model(source: HFSource, task: str) -> nn.Module:
    """The task model of ``source`` for ``task``, in fp32 with ipuexp's attention; one line for what cannot be."""
    import transformers
    from transformers import CONFIG_MAPPING, AutoConfig

    model_type = source.config.get("model_type")
    if model_type not in CONFIG_MAPPING:
        known = list(CONFIG_MAPPING.keys())
        raise ValueError(f"model.hf.config: {source.label!r}: its model_type {model_type!r} is unknown to "
                         f"Transformers {transformers.__version__}; allowed: a config.json whose model_type is one of "
                         f"its {len(known)} types, such as {', '.join(SUPPORTED_EXAMPLES)} (the full list: "
                         "python -c 'import transformers; print(sorted(transformers.CONFIG_MAPPING))')") from None
    try:
        config = AutoConfig.for_model(**source.config)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"model.hf.config: {source.label!r} cannot be read by Transformers "
                         f"{transformers.__version__} ({str(exc).splitlines()[0].split('. Should contain')[0][:160]}); "
                         "allowed: a config.json of a model type Transformers knows") from None
    for key in ("layerdrop", "encoder_layerdrop", "decoder_layerdrop"):
        # every layer runs on every step: a pipelined model on the IPU has a static graph (Optimum Graphcore's
        # speech models compute a dropped layer all the same), and a draw per layer cannot run on meta tensors
        if getattr(config, key, None):
            setattr(config, key, 0.0)
    if getattr(config, "apply_spec_augment", False):
        # SpecAugment masks frames with a data-dependent scatter that meta tensors cannot run (a few elementwise
        # ops per frame); the capture leaves it out
        config.apply_spec_augment = False
    layer_types = set(getattr(config, "layer_types", None) or ())
    if len(layer_types) > 1:
        raise ValueError(f"model.hf.config: {source.label!r} mixes attention layer types {sorted(layer_types)}; "
                         "allowed: models whose layers share one attention pattern")
    auto = _auto_for(task, source.model_type)
    if auto is None:
        tasks = tasks_of(source.model_type)
        raise ValueError(f"model.hf.task: {task!r} is not allowed; allowed: {' | '.join(sorted(tasks)) or 'none'} "
                         f"for {source.label} (model_type {source.model_type}: Transformers has no "
                         f"{' or '.join(AUTO[task])} for it)")
    return getattr(transformers, auto).from_config(config, attn_implementation=ATTENTION, dtype=torch.float32)
