"""The ``ipu_config.json`` fields of Optimum Graphcore's encoder-decoder and speech models, as ipuexp options.

- ``inference_*`` (``IPUConfig``'s inference fields): with ``training=false`` the run takes
  ``inference_layers_per_ipu``, ``inference_ipus_per_replica``, ``inference_matmul_proportion`` and
  ``inference_replication_factor`` where the file gives them, falling back as ``IPUConfig`` does (to the
  training value; ``inference_matmul_proportion`` to 0.2 when a per-IPU list no longer matches the IPUs), and
  runs the IPUs one after another: ``IPUConfig.to_options(for_inference=True)`` sets ``ShardedExecution``.
- ``projection_serialization_factor`` (Optimum's ``SerializedLinear``: ``poptorch.serializedMatMul`` of the LM
  head along its output channels, Whisper's ``proj_out``, mT5's head) is the serialisation ipuexp models for the
  tied vocabulary product: ``options.embedding_serialization_factor``, the larger of the two when both are given
  (for T5 and BART Optimum's ``embedding_serialization_factor`` serialises the same product).
- A speech model's flat ``layers_per_ipu`` (Optimum's wav2vec2 ``*ForCTC`` and ``*ForPreTraining`` count the
  feature encoder's convolutions and the positional convolution before the encoder layers, and the heads after
  them: ``[9, 4, 4, 4]`` is 7 + 1 + 12 + 1 items) becomes the encoder layers per IPU, the items counted as
  Optimum places them; ipuexp keeps the whole feature encoder on the first layer's stage.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from ipuexp.config.file_values import as_int, as_int_list, refuse

INFERENCE = {"layers_per_ipu": "inference_layers_per_ipu", "ipus_per_replica": "inference_ipus_per_replica",
             "matmul_proportion": "inference_matmul_proportion", "replication_factor": "inference_replication_factor"}
"""Training field -> the field that replaces it for inference (IPUConfig's ``_get_managed_attr_mode_name``)."""
HANDLED = set(INFERENCE.values()) | {"projection_serialization_factor", "inference_projection_serialization_factor",
                                     "inference_embedding_serialization_factor"}
"""Fields this module maps."""


def for_mode(given: Mapping[str, Any], training: bool) -> Dict[str, Any]:
    """The file's fields with the inference fields in place of the training ones when ``training`` is False."""
    out = {k: v for k, v in given.items() if v is not None}  # IPUConfig: a null field takes its default
    if training:
        return out
    for field, inference in INFERENCE.items():
        if inference in given:
            out[field] = given[inference]
    if "inference_layers_per_ipu" in given and "inference_ipus_per_replica" not in given:
        out.pop("ipus_per_replica", None)  # IPUConfig: inference_ipus_per_replica = len(inference_layers_per_ipu)
    amp = out.get("matmul_proportion")
    if "inference_matmul_proportion" not in given and isinstance(amp, list) and len(amp) > 1:
        ipus = out.get("ipus_per_replica") or len(as_int_list("layers_per_ipu", out.get("layers_per_ipu") or []))
        if ipus and len(amp) != ipus:
            out["matmul_proportion"] = 0.2  # IPUConfig: the inference default when the list does not match
    for field in ("embedding_serialization_factor", "projection_serialization_factor"):
        if f"inference_{field}" in given:
            out[field] = given[f"inference_{field}"]
    return out


def serialisation(given: Mapping[str, Any], embedding: int) -> int:
    """``options.embedding_serialization_factor``: the larger of the embedding and projection factors (0, which
    files written before Optimum Graphcore required a factor of at least 1 use, is no serialisation: 1)."""
    embedding = max(embedding, 1)
    projection = given.get("projection_serialization_factor")
    if projection is None:
        return embedding
    return max(embedding, as_int("projection_serialization_factor", projection))


def speech_layers(lpi: List[int], num_layers: Optional[int], feature_layers: int) -> List[int]:
    """Encoder layers per IPU from Optimum's flat speech list (convolutions, positional convolution, layers,
    heads); ``lpi`` unchanged when it counts the encoder layers alone."""
    if num_layers is None or not feature_layers or sum(lpi) == num_layers:
        return lpi
    lead = feature_layers + 1
    heads = sum(lpi) - num_layers - lead
    if not 0 <= heads <= 3:
        raise refuse("layers_per_ipu", lpi, f"allowed: counts summing to the model's {num_layers} layers, or "
                     f"Optimum's flat list of its {feature_layers} convolutions, the positional convolution, "
                     f"its {num_layers} layers and up to 3 heads")
    ipu_of = [ipu for ipu, n in enumerate(lpi) for _ in range(n)]
    encoder = ipu_of[lead:lead + num_layers]
    return [encoder.count(ipu) for ipu in range(len(lpi))]


def feature_layers(model_config: Optional[Mapping[str, Any]]) -> int:
    """The feature encoder's convolutions of a speech model's config.json (0 for other models)."""
    if not model_config:
        return 0
    value = model_config.get("num_feat_extract_layers")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0
