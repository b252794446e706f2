"""PopTorch's enumerations, with PopTorch's names and values (``poptorch.enums``)."""
from __future__ import annotations

import enum


class OutputMode(enum.IntEnum):
    """What a host call returns: the last micro-batch's outputs (Final), every Nth (EveryN), all of them (All),
    their sum (Sum), or Final for training and All for inference (Default)."""

    Final = 0
    EveryN = 1
    All = 2
    Sum = 3
    Default = 4


class DataLoaderMode(enum.IntEnum):
    """How ``poptorch.DataLoader`` reads the dataset: synchronously, or from worker processes (Async)."""

    Sync = 0
    Async = 1
    AsyncRebatched = 2


class ReductionType(enum.IntEnum):
    """How gradients are reduced over accumulated micro-batches and replicas."""

    Sum = 0
    Mean = 1
    NoReduction = 2


class MeanReductionStrategy(enum.IntEnum):
    """When the mean reduction divides: Running (per micro-batch), Post (once, after accumulating)."""

    Running = 0
    Post = 1
    PostAndLoss = 2


class AutoStage(enum.IntEnum):
    """Stages from the blocks' ``ipu_id`` (SameAsIpu) or one new stage per block (AutoIncrement)."""

    SameAsIpu = 0
    AutoIncrement = 1


class ConnectionType(enum.IntEnum):
    Always = 0
    OnDemand = 1
    Never = 2


class SyncPattern(enum.IntEnum):
    Full = 0
    SinglePipeline = 1
    ReplicaAndLadder = 2


class HalfFloatCastingBehavior(enum.IntEnum):
    FloatDowncastToHalf = 0
    HalfUpcastToFloat = 1
    Default = 2


class MatMulSerializationMode(enum.Enum):
    InputChannels = "input_channels"
    ReducingDim = "reducing_dim"
    OutputChannels = "output_channels"
    Disabled = "none"


class Liveness(enum.IntEnum):
    AlwaysLive = 0
    OffChipAfterFwd = 1
    OffChipAfterFwdNoOverlap = 2
    OffChipAfterEachPhase = 3


class SharingStrategy(enum.IntEnum):
    SharedMemory = 0
    FileSystem = 1
    Fork = 2
    ForkServer = 3


class OverlapMode(enum.Enum):
    """How far host IO of an input or output overlaps compute (``set_overlap_for_input``)."""

    NoOverlap = "no_overlap"
    OverlapAccumulationLoop = "overlap_accumulation_loop"
    OverlapDeviceIterationLoop = "overlap_device_iteration_loop"
