"""``poptorch.Options``: the top-level setters (each returns the object, for chaining), the sub-objects
``Training``, ``Precision``, ``TensorLocations``, ``Distributed``, ``Jit`` and ``_Popart``, and ``clone()``."""
from __future__ import annotations

import copy
import os
from typing import Any, Dict, Optional

from ipuexp.poptorch.enums import OutputMode
from ipuexp.poptorch.errors import UnsupportedError
from ipuexp.poptorch.option_files import ConfigFileError, apply_defaults, load_file  # noqa: F401 (poptorch.options.ConfigFileError)
from ipuexp.poptorch.strategy import PipelinedExecution
from ipuexp.poptorch.suboptions import (TensorLocationSettings, _DistributedOptions, _JitOptions, _PopartOptions,
                                        _PrecisionOptions, _Recorded, _TensorLocationOptions, _TrainingOptions)
from ipuexp.poptorch.values import member, positive_int

__all__ = ["Options", "TensorLocationSettings"]


class Options(_Recorded):
    """The options a model is compiled and run with (PopTorch 3.x names and defaults)."""

    def __init__(self) -> None:
        super().__init__()
        self.replication_factor = 1
        self.input_group_size = 1
        self.device_iterations = 1
        self.output_mode = OutputMode.Default
        self.output_return_period = 1
        self.random_seed: Optional[int] = None
        self.auto_round_num_ipus = False
        self.available_memory_proportion: Dict[str, float] = {}
        self.execution_strategy: Optional[PipelinedExecution] = None
        self.executable_cache_dir: Optional[str] = None
        self.enable_stable_norm: Optional[bool] = None
        self.synthetic_data: Optional[bool] = None
        self.anchored_tensors: Dict[str, str] = {}
        self._training = _TrainingOptions()
        self._precision = _PrecisionOptions()
        self._tensor_locations = _TensorLocationOptions()
        self._distributed = _DistributedOptions()
        self._jit = _JitOptions()
        self._Popart = _PopartOptions()
        defaults = os.environ.get("POPTORCH_DEFAULT_OPTIONS")
        if defaults:
            apply_defaults(self, defaults)

    @property
    def _execution_strategy(self) -> PipelinedExecution:
        """The strategy a model is compiled with (PopTorch's default: pipelined, a stage per IPU)."""
        return self.execution_strategy or PipelinedExecution()

    # ---- sub-objects -----------------------------------------------------------------------------------------
    @property
    def Training(self) -> _TrainingOptions:
        return self._training

    @property
    def Precision(self) -> _PrecisionOptions:
        return self._precision

    @property
    def TensorLocations(self) -> _TensorLocationOptions:
        return self._tensor_locations

    @property
    def Distributed(self) -> _DistributedOptions:
        return self._distributed

    @property
    def Jit(self) -> _JitOptions:
        return self._jit

    def parts(self) -> tuple:
        """The objects whose ``calls`` record setters that change no prediction."""
        locations = tuple(self._tensor_locations.locations.values())
        return (self, self._training, self._precision, self._tensor_locations, self._distributed, self._jit,
                self._Popart) + locations

    # ---- batching --------------------------------------------------------------------------------------------
    def deviceIterations(self, device_iterations: int) -> "Options":
        self.device_iterations = positive_int("Options.deviceIterations", device_iterations,
                                              "options.device_iterations")
        return self

    def replicationFactor(self, replication_factor: int) -> "Options":
        self.replication_factor = positive_int("Options.replicationFactor", replication_factor,
                                               "options.replication_factor")
        return self

    def inputReplicaGrouping(self, input_group_size: int, input_group_type: Any = None) -> "Options":
        raise UnsupportedError("Options.inputReplicaGrouping", "every replica reads its own data (the default)")

    def outputMode(self, output_mode: OutputMode, output_return_period: Optional[int] = None) -> "Options":
        mode = member("Options.outputMode", output_mode, OutputMode, "OutputMode.Final, EveryN, All, Sum, Default")
        if mode == OutputMode.EveryN:
            self.output_return_period = positive_int("Options.outputMode's output_return_period",
                                                     output_return_period, "options.output_return_period")
        self.output_mode = mode
        return self

    def anchorMode(self, anchor_mode: OutputMode, anchor_return_period: Optional[int] = None) -> "Options":
        return self.outputMode(anchor_mode, anchor_return_period)

    def defaultOutputMode(self) -> bool:
        return self.output_mode == OutputMode.Default

    # ---- placement, memory, strategy -------------------------------------------------------------------------
    def setExecutionStrategy(self, strategy: PipelinedExecution) -> "Options":
        if not isinstance(strategy, PipelinedExecution):
            raise UnsupportedError(f"setExecutionStrategy({type(strategy).__name__})",
                                   "PipelinedExecution, ShardedExecution")
        self.execution_strategy = strategy
        return self

    def setAvailableMemoryProportion(self, available_memory_proportion: Dict[str, float]) -> "Options":
        self.available_memory_proportion = {str(k): float(v) for k, v in available_memory_proportion.items()}
        return self

    def autoRoundNumIPUs(self, auto_round_num_ipus: bool) -> "Options":
        """Reserve the next power of two of IPUs for a model on 3, 5, ... (``options.auto_round_num_ipus``)."""
        self.auto_round_num_ipus = bool(auto_round_num_ipus)
        return self

    def randomSeed(self, random_seed: int) -> "Options":
        self.random_seed = int(random_seed)
        return self

    def enableExecutableCaching(self, path: str) -> "Options":
        self.executable_cache_dir = str(path)
        return self

    def enableStableNorm(self, enabled: bool) -> "Options":
        self.enable_stable_norm = bool(enabled)
        return self

    def enableSyntheticData(self, enabled: bool) -> "Options":
        self.synthetic_data = bool(enabled)
        return self

    def anchorTensor(self, short_name: str, long_name: str, output_mode: Any = None, output_return_period: int = 1
                     ) -> "Options":
        """Return PopART tensor ``long_name`` as ``short_name`` (``PoplarExecutor.getAnchoredTensor``; the names
        ipuexp holds: ``ipuexp.poptorch.anchors``)."""
        self._check_unfrozen()
        self.anchored_tensors[short_name] = long_name
        return self

    def loadFromFile(self, filepath: str) -> "Options":
        """Call the setters a file lists, one a line (``deviceIterations(4)``; ``#`` starts a comment)."""
        load_file(self, filepath)
        return self

    # ---- setters that change nothing ipuexp predicts ---------------------------------------------------------
    def _noted(name: str) -> Any:  # noqa: N805  (builds methods)
        def setter(self: "Options", *args: Any, **kwargs: Any) -> "Options":
            self._called(name, *(args or (True,)))
            return self

        setter.__name__ = name
        setter.__doc__ = f"PopTorch's ``Options.{name}``: accepted; it changes nothing ipuexp predicts."
        return setter

    broadcastBuffers = _noted("broadcastBuffers")
    logDir = _noted("logDir")
    maxRepeatLogs = _noted("maxRepeatLogs")
    modelName = _noted("modelName")
    useIpuModel = _noted("useIpuModel")
    connectionType = _noted("connectionType")
    syncPattern = _noted("syncPattern")
    useIpuId = _noted("useIpuId")
    useOfflineIpuTarget = _noted("useOfflineIpuTarget")
    logCycleCount = _noted("logCycleCount")
    enableProfiling = _noted("enableProfiling")
    disableModuleNamescope = _noted("disableModuleNamescope")
    updatableNamedBuffers = _noted("updatableNamedBuffers")
    showCompilationProgressBar = _noted("showCompilationProgressBar")
    relaxOptimizerAttributesChecks = _noted("relaxOptimizerAttributesChecks")
    sourceLocationExcludes = _noted("sourceLocationExcludes")
    appendToLocationExcludes = _noted("appendToLocationExcludes")
    del _noted

    # ---- copies ----------------------------------------------------------------------------------------------
    def clone(self) -> "Options":
        """An independent copy (PopTorch: ``Options.clone``)."""
        return copy.deepcopy(self)

    def toDict(self) -> Dict[str, Any]:
        return {"replication_factor": self.replication_factor, "device_iterations": self.device_iterations,
                "gradient_accumulation": self._training.gradient_accumulation,
                "output_mode": self.output_mode.name, "random_seed": self.random_seed}

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v}" for k, v in {**self.toDict(), **self.state()}.items())
        return f"Options({items})"
