"""Where a Transformers model's ``config.json`` comes from, and what a ``ModelConfig`` changes in it.

Kept free of torch and Transformers, so that config validation can check the file and the sequence length, and the
capture cache can key on the configuration, without importing either. Nothing here touches the network: a ``model.hf.config`` is a local
file or folder, a model already in the local Hugging Face cache, or one of the configurations shipped in
``hf_configs/`` (each copied from its model's public Hugging Face repository, listed in docs/sources.md).
"""
from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional
from ipuexp.models.spec import ModelNode

HF = "hf"
TASKS = ("pretraining", "masked-lm", "causal-lm", "classification", "question-answering", "seq2seq-lm",
         "token-classification", "audio-classification", "ctc", "image-classification")
"""``model.hf.task``: the architecture's pre-training objective (BERT: masked LM + next-sentence prediction;
RoBERTa: masked LM; GPT-2: causal LM), a masked or causal language model, a sequence/image classifier, span
question answering, or one of Transformers' task classes of the same name (AutoModelForSeq2SeqLM,
...ForTokenClassification, ...ForAudioClassification, ...ForCTC, ...ForImageClassification)."""
INSTALL_HINT = ('model.name=hf needs Transformers, the hf extra: pip install -e ".[hf]" in a clone of ipuexp, or '
                "pip install 'ipuexp[hf]' where ipuexp comes from a package index")
SHIPPED_DIR = Path(__file__).resolve().parent / "hf_configs"
# Shipped file stem -> the Hugging Face repository it was copied from (both names select it).
SHIPPED = {
    "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-large-uncased": "google-bert/bert-large-uncased",
    "roberta-base": "FacebookAI/roberta-base",
    "roberta-large": "FacebookAI/roberta-large",
    "gpt2-medium": "openai-community/gpt2-medium",
    "gpt2-large": "openai-community/gpt2-large",
    "vit-base-patch16-224": "google/vit-base-patch16-224",
    "TinyLlama-1.1B-Chat-v1.0": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    # Transformers' configuration defaults for the model type, with the sizes of the named repository's config.json
    "t5-small": "google-t5/t5-small",
    "mt5-small": "google/mt5-small",
    "bart-base": "facebook/bart-base",
    "whisper-tiny": "openai/whisper-tiny",
    "wav2vec2-base": "facebook/wav2vec2-base",
    "hubert-base-ls960": "facebook/hubert-base-ls960",
    "distilbert-base-uncased": "distilbert/distilbert-base-uncased",
    "convnext-base-224": "facebook/convnext-base-224",
    "deberta-base": "microsoft/deberta-base",
    "mpnet-base": "microsoft/mpnet-base",
    "lxmert-base-uncased": "unc-nlp/lxmert-base-uncased",
}
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
"""Names Transformers configurations give the layer count (BERT/Llama/ViT, GPT-2, others)."""
POSITION_KEYS = ("max_position_embeddings", "n_positions")
# RoBERTa-style embeddings number positions from padding_idx + 1 (Transformers' RobertaEmbeddings), so
# max_position_embeddings 514 holds 512 tokens.
_PADDING_OFFSET_TYPES = ("roberta", "xlm-roberta", "camembert")


@dataclass(frozen=True)
class HFSource:
    """A resolved ``model.hf.config``: a short label and the configuration dict after the ModelConfig's changes."""

    label: str
    """Name for the captured graph and its cache file (the repository's or folder's name)."""
    origin: str
    """Where the file was read: a path."""
    config: Dict[str, Any]
    """``config.json`` content with ``model.num_layers``, ``vocab_size``, ``num_classes``, ``image_size`` and
    ``model.hf.config_overrides`` applied."""

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type", ""))

    @property
    def is_vision(self) -> bool:
        return "image_size" in self.config and "patch_size" in self.config


def _bad(key: str, value: Any, allowed: str) -> ValueError:
    return ValueError(f"{key}: {value!r} is not allowed; allowed: {allowed}")


def shipped_names() -> str:
    return ", ".join(sorted(SHIPPED, key=str.lower))


def _from_hub_cache(repo_id: str) -> Optional[Path]:
    """``config.json`` of ``repo_id`` in the local Hugging Face cache, never downloading."""
    if importlib.util.find_spec("huggingface_hub") is None:
        return None
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:  # not a valid repository id
        return None
    return Path(found) if isinstance(found, str) and Path(found).is_file() else None


def locate(spec: Any) -> Path:
    """The ``config.json`` file ``model.hf.config`` names: a path, the local Hugging Face cache, or a shipped one."""
    allowed = (f"a config.json file or a folder holding one, a model in the local Hugging Face cache, or a shipped "
               f"configuration ({shipped_names()})")
    if not isinstance(spec, str) or not spec.strip():
        raise _bad("model.hf.config", spec, allowed)
    path = Path(spec).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return path / "config.json"
    if path.is_file():
        return path
    cached = _from_hub_cache(spec)
    if cached is not None:
        return cached
    for stem, repo in SHIPPED.items():
        if spec.lower() in (stem.lower(), repo.lower()):
            return SHIPPED_DIR / f"{stem}.json"
    raise ValueError(f"model.hf.config: {spec!r} is not a local file or folder, not in the local Hugging Face "
                     f"cache and not shipped (no network is used); allowed: {allowed}")


def _label(spec: str, path: Path) -> str:
    if path.parent == SHIPPED_DIR:
        return path.stem
    if path.name == "config.json":
        # a cache snapshot folder is named by its commit: use the repository's name instead
        repo = next((p.name for p in path.parents if p.name.startswith("models--")), None)
        return repo.split("--")[-1] if repo else path.parent.name
    return path.stem


def resolve(model_cfg: ModelNode) -> HFSource:
    """Read and adjust the configuration of ``model_cfg`` (a ModelConfig with ``name=hf``); no torch import."""
    hf = getattr(model_cfg, "hf", None)
    spec = getattr(hf, "config", None)
    task = getattr(hf, "task", None)
    if task not in TASKS:
        raise _bad("model.hf.task", task, " | ".join(TASKS))
    path = locate(spec)
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise _bad("model.hf.config", spec, f"a readable JSON config.json ({path}: {exc})") from None
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        raise _bad("model.hf.config", spec, f"a Transformers config.json with a model_type ({path} has none)")
    overrides = getattr(hf, "config_overrides", None) or {}
    config.update({str(k): _plain(v) for k, v in dict(overrides).items()})
    num_layers = getattr(model_cfg, "num_layers", None)
    if num_layers is not None:
        config[next((k for k in LAYER_KEYS if k in config), "num_hidden_layers")] = num_layers
    if getattr(model_cfg, "vocab_size", None) is not None:
        config["vocab_size"] = model_cfg.vocab_size
    if getattr(model_cfg, "num_classes", None) is not None:
        config["num_labels"] = model_cfg.num_classes
        config.pop("id2label", None)
        config.pop("label2id", None)
    source = HFSource(label=_label(spec, path), origin=str(path), config=config)
    if source.is_vision:
        config["image_size"] = getattr(model_cfg, "image_size", config["image_size"])
    else:
        _check_sequence(source, getattr(model_cfg, "sequence_length", None))
    return source


def _plain(value: Any) -> Any:
    """OmegaConf containers as plain Python values (a DictConfig/ListConfig from ``config_overrides``)."""
    if hasattr(value, "items") and not isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_plain(v) for v in value]
    return value


def _check_sequence(source: HFSource, seq: Any) -> None:
    cfg = source.config
    if isinstance(cfg.get("num_mel_bins"), int) and isinstance(cfg.get("max_source_positions"), int):
        frames = 2 * int(cfg["max_source_positions"])  # Whisper: its convolutions halve the frames to its positions
        if seq != frames:
            raise _bad("model.sequence_length", seq, f"{frames} for {source.label} (log-mel frames: its encoder "
                       f"takes {frames} frames, 2 x max_source_positions)")
        return
    if isinstance(cfg.get("conv_kernel"), list) and isinstance(cfg.get("conv_stride"), list):
        frames = seq if isinstance(seq, int) and not isinstance(seq, bool) else 0
        for kernel, stride in zip(cfg["conv_kernel"], cfg["conv_stride"]):
            frames = (frames - int(kernel)) // int(stride) + 1
        if frames < 1:
            raise _bad("model.sequence_length", seq, f"audio samples giving at least one frame for {source.label} "
                       "(16,000 per second at 16 kHz; at least 400)")
        return
    limit = next((int(source.config[k]) for k in POSITION_KEYS if isinstance(source.config.get(k), int)), None)
    if limit is not None and source.model_type in _PADDING_OFFSET_TYPES:
        limit -= int(source.config.get("pad_token_id") or 0) + 1
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1 or (limit is not None and seq > limit):
        bound = f"[1, {limit}]" if limit is not None else ">= 1"
        raise _bad("model.sequence_length", seq, f"an integer in {bound} for {source.label} (its positions)")


def fingerprint(model_cfg: ModelNode) -> Dict[str, Any]:
    """What a capture of an ``hf`` model depends on beyond the ModelConfig fields: the configuration's content
    (after the changes), the task and the Transformers version."""
    from importlib.metadata import PackageNotFoundError, version

    source = resolve(model_cfg)
    try:
        transformers_version = version("transformers")
    except PackageNotFoundError:
        transformers_version = None
    return {"config": source.config, "task": getattr(model_cfg.hf, "task", None), "transformers": transformers_version}
