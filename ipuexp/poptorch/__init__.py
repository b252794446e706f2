"""PopTorch's public API on ipuexp: ``import ipuexp.poptorch as poptorch`` (or ``python -m ipuexp.poptorch
SCRIPT``, which binds ``import poptorch`` to this module) runs a PopTorch script unchanged. The first model a
script calls or compiles is captured as PopTorch splits it and predicted on the IPU system ipuexp emulates (the
report of ``python -m ipuexp``, an MLflow run); every call then computes real numerics on the host."""
from __future__ import annotations

import sys as _sys


def _run_as_command() -> bool:
    """Whether this import is ``python -m ipuexp.poptorch`` locating its ``__main__`` (``sys.argv[0]`` is ``-m``
    until then)."""
    argv = getattr(_sys, "orig_argv", [])
    return _sys.argv[:1] == ["-m"] and "-m" in argv[:-1] and argv[argv.index("-m") + 1] == __name__


if _run_as_command():
    from ipuexp.poptorch.command_line import answer_early

    answer_early(_sys.argv[1:])

from ipuexp.poptorch import _impl, optim  # noqa: E402  (torch: after the command line's early answers)
from ipuexp.poptorch.arg_parsers import ICustomArgParser, registerCustomArgParser
from ipuexp.poptorch.blocks import Block, BeginBlock, BlockFunction, module_repr, removeBlocks
from ipuexp.poptorch.dataloader import AsynchronousDataAccessor, DataLoader
from ipuexp.poptorch.enums import (AutoStage, ConnectionType, DataLoaderMode, HalfFloatCastingBehavior, Liveness,
                                   MatMulSerializationMode, MeanReductionStrategy, OutputMode, OverlapMode,
                                   ReductionType, SharingStrategy, SyncPattern)
from ipuexp.poptorch.errors import Error, UnsupportedError
from ipuexp.poptorch.executable_load import load
from ipuexp.poptorch.executor import (PoplarExecutor, inferenceModel, registerPostCompileHook,
                                      registerPreCompileHook, trainingModel)
from ipuexp.poptorch.ops import (identity_loss, ipu_print_tensor, isRunningOnIpu, nop, recomputationCheckpoint,
                                 set_available_memory, set_overlap_for_input, set_overlap_for_output)
from ipuexp.poptorch.options import Options, TensorLocationSettings
from ipuexp.poptorch.strategy import (ParallelPhasedExecution, PipelinedExecution, SerialPhasedExecution,
                                      ShardedExecution, Stage)

__version__ = "3.3.0+ipuexp"
"""The PopTorch API version this module follows."""

AnchorMode = OutputMode


def ipuHardwareIsAvailable(num_ipus: int = 1) -> bool:
    """True: the script runs on the IPU system ipuexp emulates."""
    return True


def ipuHardwareVersion() -> int:
    """2 (Mk2 and Bow IPUs)."""
    return 2


def setLogLevel(level: object) -> None:
    """PopTorch's log level (TRACE, DEBUG, INFO, WARN, ERR, OFF or its number): what ``ipuexp.poptorch`` shows;
    ipuexp's own logging is unaffected."""
    from ipuexp.poptorch.logs import set_level

    set_level(level)


__all__ = [
    "AnchorMode", "AsynchronousDataAccessor", "AutoStage", "BeginBlock", "Block", "BlockFunction", "ConnectionType",
    "DataLoader", "DataLoaderMode", "Error", "HalfFloatCastingBehavior", "ICustomArgParser", "Liveness",
    "MatMulSerializationMode", "MeanReductionStrategy", "Options", "OutputMode", "OverlapMode",
    "ParallelPhasedExecution", "PipelinedExecution", "PoplarExecutor", "ReductionType", "SerialPhasedExecution", "ShardedExecution", "SharingStrategy", "Stage",
    "SyncPattern", "TensorLocationSettings", "UnsupportedError", "identity_loss", "inferenceModel",
    "ipuHardwareIsAvailable", "ipuHardwareVersion", "ipu_print_tensor", "isRunningOnIpu", "load", "module_repr", "nop",
    "optim",
    "recomputationCheckpoint", "registerCustomArgParser", "registerPostCompileHook", "registerPreCompileHook",
    "removeBlocks", "setLogLevel", "set_available_memory", "set_overlap_for_input", "set_overlap_for_output",
    "trainingModel",
]
