"""Rules on the model and its pipeline: the model's fields (a zoo look-up or a meta-device build), the stages of
``options.pipeline`` and the blocks in each, replicas x IPUs per replica, PopTorch's pipeline-depth rule and
``options.available_memory_proportion`` per IPU. Sources are the public documents of ``docs/sources.md``.
"""
from __future__ import annotations

import importlib.util
import re
from typing import Any, List

from ipuexp.config.checks import Warnings, int_at_least, is_int, is_number, is_power_of_two, one_of, value_at
from ipuexp.config import ipu_config_releases as releases
from ipuexp.config.errors import ConfigError
from ipuexp.models.hf_source import HF, INSTALL_HINT, TASKS
from ipuexp.models.variants import VARIANTS
from ipuexp.config.types import ConfigNode

# PopLibs MatMul.hpp/Convolution.hpp: "values below 0.05 often create a large amount of code".
AMP_CODE_WARNING_BELOW = 0.05


def check_model(cfg: ConfigNode, w: Warnings) -> None:
    release = value_at(cfg, releases.KEY)
    if release is not None:
        releases.parse(release)
        if not value_at(cfg, "model.hf.ipu_config"):
            w.append(f"{releases.KEY}={release!r} has no effect without model.hf.ipu_config (the release's IPUConfig "
                     "defaults fill the fields that file leaves out)")
    for key in ("model.sequence_length", "model.image_size"):
        int_at_least(cfg, key, 1)
    for key in ("model.num_layers", "model.num_classes", "model.vocab_size"):
        if value_at(cfg, key) is not None:
            int_at_least(cfg, key, 1)
    target, name = value_at(cfg, "model.target"), value_at(cfg, "model.name")
    if target and name != "custom":  # it would be ignored: the zoo's or Transformers' model would be predicted
        raise ConfigError("model.target", target, f"allowed: null with model.name={name}; add model.name=custom to "
                          "build the model it names")
    if value_at(cfg, "model.name") == HF:
        one_of(cfg, "model.hf.task", TASKS)
        if importlib.util.find_spec("transformers") is None:
            raise ConfigError("model.name", HF, f"allowed: {', '.join([*VARIANTS, 'custom'])}; {INSTALL_HINT}")
        _model_layers(cfg)  # builds it on the meta device: a file, task or architecture that does not work
    elif value_at(cfg, "model.name") == "custom":
        if not value_at(cfg, "model.target"):
            raise ConfigError("model.target", None, "allowed: the dotted path of a callable returning an "
                              "ipuexp.PipelinedModel (required when model.name=custom)")
        _model_layers(cfg)  # imports and builds it on the meta device: a module or factory that does not work
    else:
        _model_layers(cfg)  # a table look-up for zoo models: checks name, size and overrides


def check_pipeline(cfg: ConfigNode, w: Warnings) -> None:
    from ipuexp.config.pipeline import forward_stages, ipus_per_replica

    lpi = value_at(cfg, "options.pipeline.layers_per_ipu") or []
    if not isinstance(lpi, list) or any(not is_int(n) or n < 0 for n in lpi):
        raise ConfigError("options.pipeline.layers_per_ipu", lpi, "allowed: a list of integers >= 0")
    dm = value_at(cfg, "options.pipeline.device_mapping") or None
    if dm is not None:
        _check_device_mapping(lpi, dm)
    if lpi:
        layers = _model_layers(cfg)
        if sum(lpi) != layers and value_at(cfg, "model.name") in ("custom", HF):
            layers = _model_layers(cfg, fresh=True)  # the count may be a stale cache entry: the model decides
        if sum(lpi) != layers:
            what = (f"{layers} layer halves (options.pipeline.split_layers: attention and feed-forward blocks)"
                    if value_at(cfg, "options.pipeline.split_layers") else f"{layers} layers")
            raise ConfigError("options.pipeline.layers_per_ipu", lpi,
                              f"allowed: counts summing to the model's {what} (sum is {sum(lpi)})")
        _check_stages_have_blocks(cfg, lpi, dm)

    ipr = ipus_per_replica(lpi, dm)
    replicas = value_at(cfg, "options.replication_factor")
    total, num_ipus = replicas * ipr, value_at(cfg, "system.num_ipus")
    if total > num_ipus:
        raise ConfigError("options.replication_factor", replicas,
                          f"allowed: replicas x {ipr} IPUs per replica <= system.num_ipus={num_ipus} "
                          f"({value_at(cfg, 'system.name')}); {replicas} x {ipr} = {total}")
    if not is_power_of_two(total):
        reserved = 1 << (total - 1).bit_length()
        if not value_at(cfg, "options.auto_round_num_ipus"):
            raise ConfigError("options.replication_factor", replicas,
                              f"allowed: replicas x IPUs per replica a power of two (PopART acquires 2^n IPUs; "
                              f"options.auto_round_num_ipus=true reserves {reserved}); {replicas} x {ipr} = {total}")
        if reserved > num_ipus:
            raise ConfigError("options.auto_round_num_ipus", True,
                              f"allowed: with {replicas} x {ipr} = {total} IPUs, a system of at least {reserved} "
                              f"(system.num_ipus={num_ipus})")

    _check_schedule(cfg)
    # PopTorch CompilerImpl.cpp (poptorch.Options, PopTorch user guide): a pipelined training graph needs
    # gradientAccumulation >= 2F - 1; inference pipelining needs deviceIterations >= F. The sequential schedule
    # (sharded execution) does not pipeline.
    f = forward_stages(lpi, dm)
    if f > 1 and value_at(cfg, "options.pipeline.schedule") != "sequential":
        if value_at(cfg, "training"):
            ga = value_at(cfg, "options.gradient_accumulation")
            if ga < 2 * f - 1:
                raise ConfigError("options.gradient_accumulation", ga,
                                  f"allowed: >= 2*F - 1 = {2 * f - 1} for a pipelined training run with F={f} "
                                  "forward stages (PopTorch's rule)")
        else:
            di = value_at(cfg, "options.device_iterations")
            if di < f:
                raise ConfigError("options.device_iterations", di,
                                  f"allowed: >= F = {f} forward stages for pipelined inference (PopTorch's rule)")
    _check_amp(cfg, w, ipr)


def _check_schedule(cfg: ConfigNode) -> None:
    """The schedule is one the host framework runs: interleaved is TensorFlow's alone (PopTorch and PopART pipeline
    with ``PipelinedExecution``, grouped, or shard with ``ShardedExecution``, sequential)."""
    from ipuexp.config.options import option_value, schedules_for

    schedule, framework = (option_value(value_at(cfg, k)) for k in ("options.pipeline.schedule", "host.framework"))
    allowed = schedules_for(framework)
    if schedule not in allowed:
        raise ConfigError("options.pipeline.schedule", schedule,
                          f"allowed with host.framework={framework}: {', '.join(allowed)} (pipelined and sharded "
                          "execution); interleaved is TensorFlow's (host.framework=tensorflow)")


def _check_stages_have_blocks(cfg: ConfigNode, lpi: List[int], dm: Any) -> None:
    """Every pipeline stage holds a block. PopTorch builds a stage from the blocks placed in it (PopTorch user
    guide, multi-IPU execution strategies: ``poptorch.Stage`` is made of blocks), so a stage without one is not
    a stage; Graphcore's BERT puts 0 layers on IPU 0 only because the embeddings fill it. A stage of no layers
    is filled by the blocks before the first layer (first stage) or after the last (last stage of layers, when
    no separate stage takes the heads)."""
    from ipuexp.config.pipeline import stage_mapping

    has_stem, has_heads = _model_ends(cfg)
    mapping = stage_mapping(lpi, dm)
    head_stage = len(mapping) > len(lpi)
    last = len(lpi) - 1
    for i, n in enumerate(lpi):
        if n == 0 and not ((i == 0 and has_stem) or (i == last and has_heads and not head_stage)):
            what = "no layer" + ("" if i not in (0, last) else
                                 " and the model has no blocks before its first layer" if i == 0 else
                                 " and the heads go to the separate head stage" if head_stage else
                                 " and the model has no blocks after its last layer")
            raise ConfigError("options.pipeline.layers_per_ipu", lpi,
                              f"allowed: at least one block in every pipeline stage; stage {i} (IPU "
                              f"{mapping[i]}) gets {what} (PopTorch builds a stage only from the blocks placed "
                              "in it)")
    if head_stage and not has_heads:
        raise ConfigError("options.pipeline.device_mapping", dm,
                          f"allowed: {len(lpi)} entries, one per stage of layers_per_ipu: the model has no blocks "
                          "after its last layer to fill a separate head stage")


def _model_ends(cfg: ConfigNode) -> tuple:
    from ipuexp.models import zoo_ends

    try:
        return zoo_ends(getattr(cfg, "model"))
    except ConfigError:
        raise
    except ValueError as exc:
        raise _model_error(cfg, str(exc)) from None


def _check_device_mapping(lpi: List[int], dm: Any) -> None:
    key = "options.pipeline.device_mapping"
    if not isinstance(dm, list) or any(not is_int(i) or i < 0 for i in dm):
        raise ConfigError(key, dm, "allowed: null or a list of IPU indices >= 0, one per stage")
    lengths = (len(lpi), len(lpi) + 1) if lpi else (1,)
    if len(dm) not in lengths:
        allowed = " or ".join(str(n) for n in lengths)
        raise ConfigError(key, dm, f"allowed: {allowed} entries (one per stage of layers_per_ipu, plus one "
                          f"for a separate head stage); got {len(dm)}")
    used = sorted(set(dm))
    if used != list(range(len(used))):
        raise ConfigError(key, dm, f"allowed: IPU indices covering 0..{len(used) - 1} without gaps")


def _model_layers(cfg: ConfigNode, fresh: bool = False) -> int:
    from ipuexp.models import zoo_layers

    model = getattr(cfg, "model")
    try:
        return int(zoo_layers(model, fresh=True) if fresh else zoo_layers(model))
    except ConfigError:
        raise
    except ValueError as exc:
        raise _model_error(cfg, str(exc)) from None


def _model_error(cfg: ConfigNode, message: str) -> ConfigError:
    """Turn the zoo's ``"model.size: 'x' is not allowed; allowed: ..."`` into a ConfigError."""
    match = re.match(r"^(model\.[\w.]+):\s*(.*)$", message.splitlines()[0] if message else "")
    if not match:
        return ConfigError("model.name", value_at(cfg, "model.name"), message)
    key, rest = match.groups()
    value = value_at(cfg, key)
    allowed = rest.split("allowed:", 1)[1].strip() if "allowed:" in rest else rest
    # What the model found wrong, less the value's own repr (the error names it) and the generic phrases.
    reason = rest.split("allowed:", 1)[0].strip().rstrip(";").strip() if "allowed:" in rest else ""
    for prefix in (f"{value!r}:", repr(value)):
        reason = reason[len(prefix):].strip() if reason.startswith(prefix) else reason
    if not reason or reason.startswith("is "):  # "'x' is not allowed; ...": the error's own wording says it
        return ConfigError(key, value, f"allowed: {allowed}")
    return ConfigError(key, value, f"{reason}; allowed: {allowed}")


def _check_amp(cfg: ConfigNode, w: Warnings, ipr: int) -> None:
    key = "options.available_memory_proportion"
    amp = value_at(cfg, key)
    values = amp if isinstance(amp, list) else [amp]
    if isinstance(amp, list) and len(amp) != ipr:
        raise ConfigError(key, amp, f"allowed: a number, or a list with one value per IPU ({ipr} IPUs per "
                          f"replica); got {len(amp)} values")
    for v in values:
        if not is_number(v) or not 0 < v <= 1:
            raise ConfigError(key, amp, "allowed: a number in (0, 1], or a list of them with one per IPU")
    low = [v for v in values if v < AMP_CODE_WARNING_BELOW]
    if low:
        w.append(f"{key}={amp!r}: values below {AMP_CODE_WARNING_BELOW} often create a large amount of code "
                 "(PopLibs availableMemoryProportion)")
