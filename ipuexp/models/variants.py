"""Zoo variants as plain data, and the checks on a ``ModelConfig`` that need no model code.

Kept free of torch so that config validation can count layers before anything heavy is imported.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from ipuexp.models.hf_source import HF
from ipuexp.models.spec import ModelNode

# BERT: Devlin et al. 2019, "BERT", section 3 (L/H/A and 4H feed-forward); vocabulary 30522, 512 positions and
# 2 token types from Graphcore's configs_pretraining.yml (vocab_size) and the Google checkpoints.
# GPT-2: Radford et al. 2019, table 2 (layers, d_model); vocabulary 50257 and 1024 positions from the same paper.
# ViT: Dosovitskiy et al. 2021, table 1 (ViT-Base/Large: layers, hidden, MLP, heads); patch 16 for */16.
# ResNet-50: He et al. 2016, table 1 ([3, 4, 6, 3] bottleneck blocks: 16 layers).
# MNIST network: the PopTorch pipelining tutorial ("Model definition"): blocks B1 to B4.
VARIANTS: Dict[str, Dict[str, Dict[str, Any]]] = {
    "bert": {
        "base": dict(layers=12, hidden=768, heads=12, ffn=3072, vocab=30522, max_positions=512),
        "large": dict(layers=24, hidden=1024, heads=16, ffn=4096, vocab=30522, max_positions=512),
    },
    "gpt2": {
        "small": dict(layers=12, hidden=768, heads=12, ffn=3072, vocab=50257, max_positions=1024),
        "medium": dict(layers=24, hidden=1024, heads=16, ffn=4096, vocab=50257, max_positions=1024),
        "large": dict(layers=36, hidden=1280, heads=20, ffn=5120, vocab=50257, max_positions=1024),
    },
    "vit": {
        "b16": dict(layers=12, hidden=768, heads=12, ffn=3072, patch=16, classes=1000),
        "l16": dict(layers=24, hidden=1024, heads=16, ffn=4096, patch=16, classes=1000),
    },
    "resnet50": {
        "50": dict(layers=16, stages=(3, 4, 6, 3), classes=1000),
    },
    "mnist_cnn": {
        "tutorial": dict(layers=4, classes=10, image_size=28),
    },
}

CUSTOM = "custom"

# Which ModelConfig overrides each family accepts (the others are fixed by its architecture).
_OVERRIDES = {
    "bert": {"num_layers", "vocab_size"},
    "gpt2": {"num_layers", "vocab_size"},
    "vit": {"num_layers", "num_classes"},
    "resnet50": {"num_classes"},
    "mnist_cnn": {"num_classes"},
}


@dataclass
class Variant:
    """A resolved zoo model: family, size and hyper-parameters after the config's overrides."""

    family: str
    """Zoo family name (``model.name``)."""
    size: str
    """Variant name (``model.size``)."""
    hp: Dict[str, Any] = field(default_factory=dict)
    """Hyper-parameters (layers, hidden, heads, ...), overrides applied."""

    @property
    def id(self) -> str:
        return f"{self.family}-{self.size}"


def _bad(key: str, value: Any, allowed: str) -> ValueError:
    return ValueError(f"{key}: {value!r} is not allowed; allowed: {allowed}")


def _positive(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad(key, value, "a positive integer")
    return value


def resolve(model_cfg: ModelNode) -> Variant:
    """Check ``model_cfg`` against the zoo and return its hyper-parameters (no torch import)."""
    name = str(getattr(model_cfg, "name", ""))
    if name in (CUSTOM, HF):
        raise ValueError(f"model.name: {name!r} has no zoo variant; build it with ipuexp.models.build_model")
    if name not in VARIANTS:
        raise _bad("model.name", name, ", ".join([*VARIANTS, HF, CUSTOM]))
    size = str(getattr(model_cfg, "size", ""))
    if size not in VARIANTS[name]:
        raise _bad("model.size", size, f"{', '.join(VARIANTS[name])} (for model.name={name})")
    hp = dict(VARIANTS[name][size])
    overrides = {
        "num_layers": getattr(model_cfg, "num_layers", None),
        "num_classes": getattr(model_cfg, "num_classes", None),
        "vocab_size": getattr(model_cfg, "vocab_size", None),
    }
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in _OVERRIDES[name]:
            allowed = ", ".join(sorted(_OVERRIDES[name]))
            raise ValueError(f"model.{key}: {value!r} cannot be set for model.name={name}; "
                             f"allowed overrides: {allowed} (or null)")
        hp[{"num_layers": "layers", "num_classes": "classes", "vocab_size": "vocab"}[key]] = \
            _positive(f"model.{key}", value)
    masked = getattr(model_cfg, "mask_tokens", None)
    if masked is not None:
        if name != "bert":
            raise ValueError(f"model.mask_tokens: {masked!r} cannot be set for model.name={name}; allowed: null "
                             "(only BERT pre-training has a masked-LM head)")
        hp["mask_tokens"] = _positive("model.mask_tokens", masked)
    packed = getattr(model_cfg, "sequences_per_pack", 1)
    if packed != 1:
        if name != "bert":
            raise ValueError(f"data.packing.max_sequences_per_pack: {packed!r} cannot be set for model.name={name}; "
                             "allowed: 1 (packed sequences are modelled for BERT pre-training)")
        hp["sequences_per_pack"] = _positive("data.packing.max_sequences_per_pack", packed)
    if getattr(model_cfg, "split_layers", False):
        if name != "bert":
            raise ValueError(f"options.pipeline.split_layers: true cannot be set for model.name={name}; allowed: "
                             "false (layers split into attention and feed-forward blocks for the zoo's BERT)")
        hp["split_layers"] = True
    if "max_positions" in hp:
        seq = getattr(model_cfg, "sequence_length", None)
        if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= hp["max_positions"]:
            raise _bad("model.sequence_length", seq, f"an integer in [1, {hp['max_positions']}] for {name}-{size}")
        hp["sequence_length"] = seq
    if name in ("vit", "resnet50", "mnist_cnn"):
        image = getattr(model_cfg, "image_size", None)
        if name == "mnist_cnn" and image != hp["image_size"]:
            raise _bad("model.image_size", image, "28 (the tutorial network flattens a 20x4x4 feature map)")
        if name == "vit" and (not isinstance(image, int) or image < hp["patch"] or image % hp["patch"]):
            raise _bad("model.image_size", image, f"a positive multiple of the patch size {hp['patch']}")
        if name == "resnet50" and (not isinstance(image, int) or image < 32):
            raise _bad("model.image_size", image, "an integer >= 32 (five stride-2 reductions)")
        hp["image_size"] = image
    return Variant(family=name, size=size, hp=hp)


def published_mask_tokens(sequence_length: int) -> Optional[int]:
    """Graphcore's ``mask_tokens`` for a sequence length, if a published config sets one.

    128 -> 20 and 512 -> 76: graphcore/examples@3cc8f81 nlp/bert/pytorch/configs_pretraining.yml
    (pretrain_large_128, pretrain_large_512); 384 -> 56: graphcore/examples@187775b
    applications/pytorch/bert/configs.yml pretrain_large_384 (line 322) and graphcore/examples@9b61ab6
    applications/popart/bert/configs/mk2/pretrain_large_384.json.
    """
    return {128: 20, 384: 56, 512: 76}.get(sequence_length)
