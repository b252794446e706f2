"""The sub-objects of ``poptorch.Options`` (``Training``, ``Precision``, ``TensorLocations``, ``Distributed``, ``Jit``,
``_Popart``) and ``TensorLocationSettings``: PopTorch's setters (each returns its object, for chaining), the values they
set, and which setters that change no prediction a script called (``calls``)."""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional

from ipuexp.poptorch.enums import MeanReductionStrategy, OutputMode, ReductionType
from ipuexp.poptorch.errors import Error, UnsupportedError
from ipuexp.poptorch.values import positive_int


class _Recorded:
    """Remembers the setters called on it, by their PopTorch name. Frozen once a model or DataLoader uses it, as
    PopTorch's options are: a setter then raises; a copy (``copy.deepcopy``, ``clone``) is not frozen."""

    _prefix = ""

    def __init__(self) -> None:
        self.calls: Dict[str, Any] = {}

    def _called(self, name: str, *value: Any) -> None:
        self._check_unfrozen()
        self.calls[self._prefix + name] = value[0] if len(value) == 1 else value

    def _check_unfrozen(self) -> None:
        if self.__dict__.get("_frozen"):
            raise Error("Can't modify frozen Options")

    def __setattr__(self, name: str, value: Any) -> None:
        self._check_unfrozen()
        super().__setattr__(name, value)

    def _freeze(self) -> None:
        for value in list(vars(self).values()) + list(getattr(self, "locations", {}).values()):
            if isinstance(value, _Recorded):
                value._freeze()
        self.__dict__["_frozen"] = True

    def __getstate__(self) -> Dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_frozen"}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)

    def state(self) -> Dict[str, Any]:
        """Every value set on it and its sub-objects, by attribute name (``Options.__repr__``)."""
        out: Dict[str, Any] = {}
        for key, value in sorted(self.__getstate__().items()):
            if isinstance(value, _Recorded):
                out.update({f"{key.strip('_')}.{k}": v for k, v in value.state().items()})
            elif isinstance(value, dict) and any(isinstance(v, _Recorded) for v in value.values()):
                out.update({f"{key}.{name}.{k}": v for name, part in value.items() for k, v in part.state().items()})
            elif key != "calls" and value not in (None, {}, []):
                out[key] = value
        out.update(self.calls)
        return out


class TensorLocationSettings(_Recorded):
    """Where one kind of tensor lives: on chip, in streaming memory, sharded over replicas."""

    def __init__(self) -> None:
        super().__init__()
        self.on_chip: Optional[bool] = None
        self.replicated_tensor_sharding: Optional[bool] = None
        self.min_elements_for_off_chip: Optional[int] = None
        self.min_elements_for_replicated_tensor_sharding: Optional[int] = None

    def useOnChipStorage(self, use: bool = True) -> "TensorLocationSettings":
        self.on_chip = bool(use)
        return self

    def useReplicatedTensorSharding(self, use: bool = True) -> "TensorLocationSettings":
        self.replicated_tensor_sharding = bool(use)
        return self

    def minElementsForOffChip(self, min_elements: int) -> "TensorLocationSettings":
        self.min_elements_for_off_chip = int(min_elements)
        return self

    def minElementsForReplicatedTensorSharding(self, min_elements: int) -> "TensorLocationSettings":
        self.min_elements_for_replicated_tensor_sharding = int(min_elements)
        return self

    def useIOTilesToLoad(self, use: bool = True) -> "TensorLocationSettings":
        self._called("TensorLocationSettings.useIOTilesToLoad", use)
        return self

    def useIOTilesToStore(self, use: bool = True) -> "TensorLocationSettings":
        self._called("TensorLocationSettings.useIOTilesToStore", use)
        return self


class _TensorLocationOptions(_Recorded):
    _prefix = "TensorLocations."

    def __init__(self) -> None:
        super().__init__()
        self.locations: Dict[str, TensorLocationSettings] = {}
        self.num_io_tiles: Optional[int] = None

    def _set(self, kind: str, location: TensorLocationSettings) -> "_TensorLocationOptions":
        if not isinstance(location, TensorLocationSettings):
            raise UnsupportedError(f"TensorLocations: a location of type {type(location).__name__}",
                                   "poptorch.TensorLocationSettings()")
        self._check_unfrozen()
        self.locations[kind] = location
        return self

    def setActivationLocation(self, location: TensorLocationSettings) -> "_TensorLocationOptions":
        return self._set("activations", location)

    def setWeightLocation(self, location: TensorLocationSettings) -> "_TensorLocationOptions":
        return self._set("weights", location)

    def setOptimizerLocation(self, location: TensorLocationSettings) -> "_TensorLocationOptions":
        return self._set("optimizer_state", location)

    def setAccumulatorLocation(self, location: TensorLocationSettings) -> "_TensorLocationOptions":
        return self._set("accumulators", location)

    def numIOTiles(self, num_tiles: int) -> "_TensorLocationOptions":
        # PopTorch's own check (an assertion, as PopTorch raises it)
        assert 32 <= num_tiles <= 192 and num_tiles % 2 == 0, "numIOTiles must be an even number between 32 and 192."
        self.num_io_tiles = int(num_tiles)
        return self


class _TrainingOptions(_Recorded):
    _prefix = "Training."

    def __init__(self) -> None:
        super().__init__()
        self.gradient_accumulation = 1
        self.accumulation_and_replication_reduction_type = ReductionType.Mean
        self.meanAccumulationAndReplicationReductionStrategy = MeanReductionStrategy.Post
        self.auto_loss_scaling = False

    def gradientAccumulation(self, gradient_accumulation: int) -> "_TrainingOptions":
        self.gradient_accumulation = positive_int("Training.gradientAccumulation", gradient_accumulation,
                                                  "options.gradient_accumulation")
        return self

    def accumulationAndReplicationReductionType(self, reduction_type: ReductionType) -> "_TrainingOptions":
        if ReductionType(reduction_type) == ReductionType.NoReduction:
            raise UnsupportedError("Training.accumulationAndReplicationReductionType(NoReduction)",
                                   "ReductionType.Mean, ReductionType.Sum")
        self.accumulation_and_replication_reduction_type = ReductionType(reduction_type)
        return self

    def setMeanAccumulationAndReplicationReductionStrategy(self, strategy: MeanReductionStrategy
                                                           ) -> "_TrainingOptions":
        self.meanAccumulationAndReplicationReductionStrategy = MeanReductionStrategy(strategy)
        if self.meanAccumulationAndReplicationReductionStrategy != MeanReductionStrategy.Post:
            self._called("setMeanAccumulationAndReplicationReductionStrategy", strategy)
        return self

    def setAutomaticLossScaling(self, enabled: bool) -> "_TrainingOptions":
        self.auto_loss_scaling = bool(enabled)
        return self

    def setConvolutionDithering(self, enabled: bool) -> "_TrainingOptions":
        self._called("setConvolutionDithering", enabled)
        return self


class _PrecisionOptions(_Recorded):
    _prefix = "Precision."

    def __init__(self) -> None:
        super().__init__()
        self.partials_type: Optional[str] = None
        self.stochastic_rounding: Optional[bool] = None

    def setPartialsType(self, dtype: Any) -> "_PrecisionOptions":
        import torch

        if dtype not in (torch.half, torch.float):
            raise UnsupportedError(f"Precision.setPartialsType({dtype})", "torch.half, torch.float")
        self.partials_type = "half" if dtype == torch.half else "float"
        return self

    def enableStochasticRounding(self, enabled: bool) -> "_PrecisionOptions":
        self.stochastic_rounding = bool(enabled)
        return self

    def halfFloatCasting(self, behavior: Any) -> "_PrecisionOptions":
        self._called("halfFloatCasting", behavior)
        return self

    def runningStatisticsAlwaysFloat(self, value: bool) -> "_PrecisionOptions":
        self._called("runningStatisticsAlwaysFloat", value)
        return self

    def enableFloatingPointExceptions(self, enabled: bool) -> "_PrecisionOptions":
        self._called("enableFloatingPointExceptions", enabled)
        return self


class _DistributedOptions(_Recorded):
    _prefix = "Distributed."

    def __init__(self) -> None:
        super().__init__()
        self.numProcesses = 1
        self.processId = 0

    def configureProcessId(self, process_id: int, num_processes: int) -> "_DistributedOptions":
        """This process's place among ``num_processes`` (PopRun instances): its DataLoader reads its share of the
        dataset (``ipuexp.poptorch.distributed``) and the prediction is of all instances' replicas."""
        self._check_unfrozen()
        if not 0 <= int(process_id) < int(num_processes):
            raise Error(f"Distributed.configureProcessId({process_id}, {num_processes}): the process id must be in "
                        f"[0, {num_processes})")
        self.processId, self.numProcesses = int(process_id), int(num_processes)
        return self

    def setEnvVarNames(self, var_num_processes: str, var_process_id: str) -> "_DistributedOptions":
        self._called("setEnvVarNames", var_num_processes, var_process_id)
        return self

    def disable(self) -> "_DistributedOptions":
        return self


class _JitOptions(_Recorded):
    _prefix = "Jit."

    def traceModel(self, trace_model: bool) -> "_JitOptions":
        self._called("traceModel", trace_model)
        return self


class _PopartOptions(_Recorded):
    """``Options._Popart.set(key, value)``: PopART session options; ``autoRecomputation`` is mapped."""

    _prefix = "_Popart."

    def __init__(self) -> None:
        super().__init__()
        self.options: Dict[str, Any] = {}

    def set(self, key: str, value: Any) -> "_PopartOptions":
        self._check_unfrozen()
        self.options[key] = value
        if key != "autoRecomputation":
            self._called(f"set({key!r})", value)
        return self

    def setEngineOptions(self, engine_options: Dict[str, str]) -> "_PopartOptions":
        self._called("setEngineOptions", engine_options)
        return self

    def setPatterns(self, patterns: Dict[str, bool], level: int = 2) -> "_PopartOptions":
        self._called("setPatterns", patterns)
        return self


