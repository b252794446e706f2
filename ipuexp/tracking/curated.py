"""What a run shows in MLflow: the options a person compares configurations by, and the figures they rank them by.

MLflow's compare view lists every parameter and metric of the runs it compares, so a run logs a short, fixed set:
the swept keys and the key options as parameters, the headline figures as metrics. The whole configuration and
every figure of the result stay in the run's ``config.yaml`` and ``result.json`` artifacts.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, Iterable, Mapping, Optional

from ipuexp.models.spec import model_label
from ipuexp.result import Result

MAX_PARAM_VALUE = 6000
"""MLflow's ``MAX_PARAM_VAL_LENGTH`` (mlflow/utils/validation.py); longer values are rejected by the store."""
MAX_KEY = 250
"""MLflow's ``MAX_ENTITY_KEY_LENGTH``."""
KEY_OPTIONS = ("model", "system", "ipu", "options.replication_factor", "options.gradient_accumulation",
               "options.device_iterations", "data.micro_batch_size", "options.available_memory_proportion",
               "options.io.num_io_tiles", "options.pipeline.schedule", "options.recomputation.mode")
"""Parameters of every run, whether swept or not: what a configuration is, in the config's own key names."""
GROUP_NAMES: Dict[str, Callable[[Mapping[str, Any]], str]] = {
    "model": model_label,
    "system": lambda node: str(node["name"]),
    "ipu": lambda node: str(node["name"]),
}
"""Config groups logged by name (``ipu=mk2``) rather than by their many fields."""
METRICS = {
    "throughput_samples_per_s": "predicted samples per second of the whole system (packs, for packed sequences)",
    "throughput_sequences_per_s": "packed sequences: predicted sequences per second (packs/s x the average "
                                  "sequences per pack)",
    "step_time_s": "predicted time of one weight update",
    "mfu": "model FLOPs utilisation: throughput over what the IPUs' peak FLOPs allow",
    "error_band_pct": "prediction error band of the throughput, +- percent of predicted/measured - 1 (from the "
                      "calibration's leave-one-out residuals of the most similar runs)",
    "peak_ipu_memory_bytes": "memory of the fullest IPU of a replica",
    "ipu_headroom_bytes": "free memory of the fullest IPU (capacity minus its peak)",
    "peak_tile_memory_bytes": "memory of the fullest tile",
    "tile_headroom_bytes": "free memory of the fullest tile; negative when it overflows",
    "fits": "1 when every tile of every IPU holds its data (also the run's ``fits`` tag)",
    "measured_samples_per_s": "measured samples per second: given as measured.samples_per_s (a real IPU system), "
                              "or, for a functional run, measured on the host",
    "measured_over_predicted": "measured over predicted throughput (1 is a perfect prediction)",
    "measured_ipu_memory_bytes": "measured memory of the fullest IPU (measured.ipu_memory_bytes)",
    "measured_over_predicted_memory": "measured over predicted memory of the fullest IPU",
    "host_samples_per_s": "functional runs given measured.samples_per_s: samples per second measured on the host",
    "final_loss": "functional runs: training loss at the last step",
    "test_accuracy": "functional runs: accuracy on the held-out split",
}
"""Every metric a run's result may give, what it means, and the order it is logged in: the store keeps that order,
and MLflow's run comparison plots the first metric the runs share against their swept parameters (throughput).
A figure the result lacks is not logged: analytic runs have no ``measured_samples_per_s``."""


def params(data: Mapping[str, Any], swept_keys: Iterable[str] = (), overrides: Iterable[str] = ()) -> Dict[str, str]:
    """The key options and the swept keys of a resolved config (``resolved(cfg)``) as MLflow parameters.

    A swept key that names a whole config group takes its value from the job's overrides (``system=pod64``).
    """
    given = {o.split("=", 1)[0].lstrip("+~"): o.split("=", 1)[1] for o in overrides if "=" in o}
    out: Dict[str, str] = {}
    for key in (*KEY_OPTIONS, *swept_keys):
        value = option_value(data, key)
        if value is None:
            value = given.get(key)
        if value is not None:
            out[key[:MAX_KEY]] = value if len(value) <= MAX_PARAM_VALUE else value[:MAX_PARAM_VALUE - 3] + "..."
    return out


def option_value(data: Mapping[str, Any], key: str) -> Optional[str]:
    """The value at dotted ``key`` as a parameter string (lists as JSON), or None when it is absent or a group."""
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    if key in GROUP_NAMES and isinstance(node, Mapping):
        return GROUP_NAMES[key](node)
    if isinstance(node, Mapping):
        return None
    return json.dumps(node) if isinstance(node, list) else str(node)


def metrics(result: Result, tile_memory_bytes: Optional[int] = None) -> Dict[str, float]:
    """The result's headline figures; ``tile_memory_bytes`` (the ``ipu.memory_per_tile_bytes`` option) gives the
    tile headroom."""
    out: Dict[str, float] = {}
    for group in (_throughput, _memory, _outcome, _measured, _functional):
        out.update(group(result, tile_memory_bytes))
    return out


def _outcome(result: Result, _: Optional[int]) -> Dict[str, float]:
    return {} if result.fits is None else {"fits": float(result.fits)}


def _throughput(result: Result, _: Optional[int]) -> Dict[str, float]:
    t = result.throughput
    if t is None:
        return {}
    out = {"throughput_samples_per_s": t.samples_per_s, "step_time_s": t.step_time_s}
    if t.sequences_per_s is not None:
        out["throughput_sequences_per_s"] = t.sequences_per_s
    if 0 < t.peak_flops_bound_samples_per_s < float("inf"):
        out["mfu"] = t.samples_per_s / t.peak_flops_bound_samples_per_s
    if t.error_band_pct is not None:
        out["error_band_pct"] = t.error_band_pct
    return out


def _memory(result: Result, tile_memory_bytes: Optional[int]) -> Dict[str, float]:
    ipus = result.memory.ipus if result.memory is not None else []
    if not ipus:
        return {}
    fullest = max(ipus, key=lambda m: m.total_bytes)
    tile = max(m.max_tile_bytes for m in ipus)
    out = {"peak_ipu_memory_bytes": float(fullest.total_bytes),
           "ipu_headroom_bytes": float(fullest.capacity_bytes - fullest.total_bytes),
           "peak_tile_memory_bytes": float(tile)}
    if tile_memory_bytes:
        out["tile_headroom_bytes"] = float(tile_memory_bytes - tile)
    return out


def _measured(result: Result, _: Optional[int]) -> Dict[str, float]:
    m = result.measured
    if m is None:
        return {}
    names = {"measured_samples_per_s": m.samples_per_s, "measured_over_predicted": m.over_predicted,
             "measured_ipu_memory_bytes": m.ipu_memory_bytes, "measured_over_predicted_memory": m.memory_over_predicted}
    return {k: float(v) for k, v in names.items() if v is not None}


def _functional(result: Result, _: Optional[int]) -> Dict[str, float]:
    f = result.functional
    if f is None:
        return {}
    # An IPU measurement given with the run (measured.samples_per_s) is the run's measured figure; the host's then
    # has a name of its own.
    given = result.measured is not None and result.measured.samples_per_s is not None
    out = {"host_samples_per_s" if given else "measured_samples_per_s": f.samples_per_s, "final_loss": f.final_loss}
    t = result.throughput
    if not given and t is not None and t.samples_per_s > 0:
        out["measured_over_predicted"] = f.samples_per_s / t.samples_per_s
    if f.test_accuracy is not None:
        out["test_accuracy"] = f.test_accuracy
    return out
