"""PopTorch's options, optimizer and split as ipuexp's configuration keys; the options that change nothing ipuexp
predicts are listed for one warning line."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ipuexp.poptorch.enums import OutputMode, ReductionType
from ipuexp.poptorch.errors import UnsupportedError
from ipuexp.poptorch.options import Options
from ipuexp.poptorch.strategy import PipelinedExecution, ShardedExecution

RECOMPUTATION = {0: "none", 1: "pipeline", 3: "pipeline", 4: "all"}
"""PopART ``autoRecomputation`` (RecomputationType: None 0, Standard 1, NormOnly 2, Pipeline 3, RecomputeAll 4) as
``options.recomputation.mode``; Standard recomputes at the pipeline stages' boundaries as Pipeline does."""

LOCATIONS = ("weights", "activations", "optimizer_state", "accumulators")


@dataclass
class Mapped:
    """The configuration values a script's setup gives, and what ipuexp does not model."""

    values: Dict[str, Any] = field(default_factory=dict)
    """Configuration keys and their values."""
    no_effect: List[str] = field(default_factory=list)
    """What the script set that changes nothing ipuexp predicts."""


def text(value: Any) -> str:
    """A value as an override writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(text(v) for v in value) + "]"
    if value is None:
        return "null"
    return str(value)


def stages_of(names: List[str], ipu_ids: List[Optional[int]], strategy: Optional[PipelinedExecution]
              ) -> Tuple[List[int], List[int]]:
    """(blocks per stage, IPU of each stage) for the blocks in execution order, by PopTorch's rules: explicit
    stages in the strategy's order, or AutoStage (SameAsIpu: the stage of a block is its ``ipu_id``;
    AutoIncrement: each block a new stage); a stage's IPU is ``Stage.ipu(n)``, else its blocks' ``ipu_id``, else
    its index."""
    from ipuexp.poptorch.enums import AutoStage

    strategy = strategy or PipelinedExecution()
    keys: List[Any] = []
    ipus: List[Optional[int]] = []
    for i, (name, ipu) in enumerate(zip(names, ipu_ids)):
        index = strategy.stage_of(name)
        if index is not None:
            stage = strategy.stages[index]
            keys.append(("stage", index))
            ipus.append(stage._ipu if stage._ipu is not None else ipu)
        elif strategy.auto_stage == AutoStage.SameAsIpu and len(names) > 1:
            if ipu is None:
                raise UnsupportedError(f"block {name!r} without an ipu_id under AutoStage.SameAsIpu",
                                       "Block(..., ipu_id=N) on every block, or stages given to the execution "
                                       "strategy (PipelinedExecution(Stage('B1').ipu(0), ...))")
            keys.append(("ipu", ipu))
            ipus.append(ipu)
        else:
            keys.append(("block", i))
            ipus.append(ipu)
    counts: List[int] = []
    stage_ipus: List[int] = []
    for i, key in enumerate(keys):
        if i and key == keys[i - 1]:
            counts[-1] += 1
            continue
        if key[0] == "stage" and stage_ipus and key[1] < keys[i - 1][1]:
            raise UnsupportedError(f"block {names[i]!r} in stage {key[1]} after a block of stage {keys[i - 1][1]}",
                                   "stages whose blocks run in the stages' order")
        counts.append(1)
        stage_ipus.append(ipus[i] if ipus[i] is not None else len(stage_ipus))
    return counts, stage_ipus


def options_values(opts: Options, training: bool) -> Mapped:
    """``options.*`` and ``training`` for ``opts``."""
    out = Mapped()
    v = out.values
    v["training"] = bool(training)
    instances = opts.Distributed.numProcesses
    v["options.replication_factor"] = opts.replication_factor * instances  # PopTorch's is each process's own
    if instances > 1:
        v["options.num_instances"] = instances
    v["options.device_iterations"] = opts.device_iterations
    v["options.gradient_accumulation"] = opts.Training.gradient_accumulation if training else 1
    mode = opts.output_mode
    v["options.output_mode"] = {OutputMode.Final: "final", OutputMode.All: "all", OutputMode.Sum: "sum",
                                OutputMode.Default: "default", OutputMode.EveryN: "all"}[mode]
    if mode == OutputMode.EveryN:  # the prediction does not cost what a call returns
        out.no_effect.append(f"outputMode(EveryN, output_return_period={opts.output_return_period})")
    reduction = opts.Training.accumulation_and_replication_reduction_type
    v["options.reduction_type"] = "sum" if reduction == ReductionType.Sum else "mean"
    if opts.Training.auto_loss_scaling:
        v["options.auto_loss_scaling"] = True
    if opts.random_seed is not None:
        v["options.random_seed"] = opts.random_seed
    amp = opts.available_memory_proportion
    if amp:
        values = sorted(amp.items(), key=lambda kv: int(kv[0].lstrip("IPU") or 0))
        same = len({x for _, x in values}) == 1
        v["options.available_memory_proportion"] = values[0][1] if same else [x for _, x in values]
    if opts.Precision.partials_type is not None:
        v["options.partials_type"] = opts.Precision.partials_type
    if opts.Precision.stochastic_rounding is not None:
        v["options.stochastic_rounding"] = opts.Precision.stochastic_rounding
    for kind, loc in opts.TensorLocations.locations.items():
        base = f"options.tensor_locations.{kind}"
        for key in ("on_chip", "replicated_tensor_sharding", "min_elements_for_off_chip",
                    "min_elements_for_replicated_tensor_sharding"):
            if getattr(loc, key) is not None:
                v[f"{base}.{key}"] = getattr(loc, key)
    if opts.auto_round_num_ipus:
        v["options.auto_round_num_ipus"] = True
    if opts.TensorLocations.num_io_tiles is not None:
        v["options.io.num_io_tiles"] = opts.TensorLocations.num_io_tiles
    recompute = opts._Popart.options.get("autoRecomputation")
    if recompute is not None:
        if int(recompute) not in RECOMPUTATION:
            raise UnsupportedError(f"_Popart.set('autoRecomputation', {recompute})",
                                   "0 (none), 1 (standard), 3 (pipeline), 4 (recompute all)")
        v["options.recomputation.mode"] = RECOMPUTATION[int(recompute)]
    for key, attr in (("executable_cache_dir", "executable_cache_dir"), ("enable_stable_norm", "enable_stable_norm"),
                      ("synthetic_data", "synthetic_data")):
        if getattr(opts, attr) is not None:
            v[f"options.{key}"] = getattr(opts, attr)
    for part in opts.parts():
        out.no_effect += [name for name in part.calls]
    return out


def optimizer_values(optimizer: Any) -> Mapped:
    """``optimizer.*`` and the optimizer's loss scaling for a ``poptorch.optim`` or ``torch.optim`` optimizer."""
    out = Mapped()
    if optimizer is None:
        return out
    import torch

    group = optimizer.param_groups[0]
    kind = type(optimizer).__name__.lower()
    v = out.values
    if kind == "sgd":
        v["optimizer.name"] = "sgd_momentum" if group.get("momentum", 0.0) else "sgd"
        v["optimizer.momentum"] = float(group.get("momentum", 0.0))
    elif kind in ("adam", "adamw", "lamb"):
        v["optimizer.name"] = kind
        v["optimizer.momentum"] = float(group["betas"][0])
    elif kind == "rmsprop":
        v["optimizer.name"] = "sgd_momentum"
        out.no_effect.append("RMSprop (predicted as sgd_momentum: one state tensor per weight)")
    else:
        raise UnsupportedError(f"optimizer {type(optimizer).__name__}",
                               "poptorch.optim SGD, Adam, AdamW, LAMB, RMSprop (or the torch.optim ones)")
    v["optimizer.learning_rate"] = float(group["lr"])
    v["optimizer.weight_decay"] = float(group.get("weight_decay", 0.0))
    extras = getattr(optimizer, "poptorch_args", {})
    state_type = extras.get("first_order_momentum_accum_type")
    if state_type is not None:
        v["optimizer.state_precision"] = "half" if state_type == torch.half else "float"
    if extras.get("loss_scaling") is not None:
        v["options.loss_scaling"] = float(extras["loss_scaling"])
    out.no_effect += [f"{type(optimizer).__name__}({k}=...)" for k in extras
                      if k not in ("first_order_momentum_accum_type", "loss_scaling")]
    return out


def split_values(counts: List[int], ipus: List[int], strategy: Optional[PipelinedExecution],
                 micro_batch_size: int, precision: str) -> Dict[str, Any]:
    """``options.pipeline.*``, ``data.micro_batch_size`` and ``options.precision`` of a captured split."""
    schedule = "sequential" if isinstance(strategy, ShardedExecution) else "grouped"
    in_order = ipus == list(range(len(ipus)))
    return {"data.micro_batch_size": micro_batch_size, "options.precision": precision,
            "options.pipeline.schedule": schedule, "options.pipeline.layers_per_ipu": counts,
            "options.pipeline.device_mapping": None if in_order else ipus}
