"""PopTorch's own checks of a compiled model, raised as ``poptorch.Error`` with PopTorch's messages: the inputs of a
later call against the compiled ones (``ArgsParser.validateInputs``), an op that runs after a ``with Block`` ended
outside any other block (PopART's "No active Block"), and gradient accumulation against the pipeline's stages."""
from __future__ import annotations

import inspect
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from ipuexp.poptorch.errors import Error

_RECOMPILE = ("\nThis error occurred because the inputs passed at runtime don't match the inputs used to compile the "
              "model.\nTo recompile the model for the new inputs create a new inferenceModel / trainingModel wrapper "
              "or call destroy() on the curent one and try again.")


def signature(model: torch.nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> List[Tuple[str, Any]]:
    """(name, value) of each input leaf, named as PopTorch names them: the forward's parameter names (``*c[i]``
    for a variadic one), a dict's keys, a sequence's positions (``name[i]``); a parameter the call leaves out is its
    default value, as PopTorch's ``ArgsParser`` fills it in."""
    from torch.utils._pytree import MappingKey, SequenceKey, tree_flatten_with_path

    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params]
    variadic = next((i for i, p in enumerate(params) if p.kind == p.VAR_POSITIONAL), len(params))
    kwargs = dict(kwargs)
    for i, p in enumerate(params):
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is not p.empty \
                and (p.kind == p.KEYWORD_ONLY or i >= len(args)) and p.name not in kwargs:
            kwargs[p.name] = p.default
    out: List[Tuple[str, Any]] = []
    for (path, value) in tree_flatten_with_path((args, kwargs), is_leaf=lambda v: v is None)[0]:
        top, *rest = path[1:]
        if path[0].idx == 0:  # a positional argument
            i = top.idx if isinstance(top, SequenceKey) else len(names)
            name = (names[i] if i < variadic else f"*{names[variadic]}[{i - variadic}]" if variadic < len(names)
                    else f"args[{top}]")
        else:
            name = str(getattr(top, "key", top))
        for key in rest:
            name = str(key.key) if isinstance(key, MappingKey) else f"{name}[{getattr(key, 'idx', key)}]"
        out.append((name, value))
    return out


class _Constant:
    """A non-tensor input of the compiled model: PopTorch compiles its value into the graph."""

    def __init__(self, value: Any) -> None:
        self.value = value


class Inputs:
    """The tensor inputs a model was compiled with."""

    def __init__(self, model: torch.nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        self.compiled = [(n, (t.dtype, tuple(t.shape)) if isinstance(t, torch.Tensor) else _Constant(t))
                         for n, t in signature(model, args, kwargs)]
        empty = next((shape for _, shape in self.compiled if isinstance(shape, tuple) and 0 in shape[1]), None)
        if empty is not None:  # the IPU has no zero-sized tensors
            raise Error(f"Zero-sized tensors are unsupported (Got shape {list(empty[1])})")
        self.positional = len(args)
        from ipuexp.poptorch.buffer_checks import tensors

        self.bound = tensors(model)
        """The buffers and parameters the model was compiled with."""

    def validate(self, model: torch.nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                 shorter_batch: int = 0) -> None:
        """Raise PopTorch's error for an input whose type, dtype or shape differs from the compiled one; an
        inference call's batch may be shorter by a multiple of ``shorter_batch`` (a DataLoader's last batch)."""
        given = signature(model, args, kwargs)
        # a variadic positional argument (``*args[i]``) that is missing or extra is a count mismatch
        missing = [n for n, _ in self.compiled if n not in {g for g, _ in given} and not n.startswith("*")]
        if missing and len(given) <= len(self.compiled):
            raise Error(f"Missing arguments: {', '.join(missing)}.{_RECOMPILE}")
        extra = [g for g, _ in given if g not in {n for n, _ in self.compiled} and not g.startswith("*")]
        if extra and len(given) >= len(self.compiled):
            raise Error(f"Unexpected arguments: {', '.join(extra)}.{_RECOMPILE}")
        variadic = any(n.startswith("*") for n, _ in [*self.compiled, *given])
        if (variadic and len(args) != self.positional) or len(given) != len(self.compiled):
            expected, got = (self.positional, len(args)) if variadic else (len(self.compiled), len(given))
            raise Error(f"Number of positional arguments mismatch: expected {expected} arguments but got {got}."
                        f"{_RECOMPILE}")
        by_name = dict(given)
        for name, compiled in self.compiled:
            value = by_name[name]
            if isinstance(compiled, _Constant):
                if isinstance(value, torch.Tensor):
                    raise Error(f"Type mismatch for {name}: expected {type(compiled.value)} but got {type(value)}."
                                f"{_RECOMPILE}")
                if isinstance(compiled.value, (bool, int, float, str)) and (
                        type(value) is not type(compiled.value) or value != compiled.value):
                    raise Error(f"Value mismatch for {name}: expected {compiled.value} but got {value}.{_RECOMPILE}")
                continue
            if not isinstance(value, torch.Tensor):
                raise Error(f"Type mismatch for {name}: expected {torch.Tensor} but got {type(value)}.{_RECOMPILE}")
            dtype, shape = compiled
            if value.dtype != dtype:
                raise Error(f"Data type mismatch for {name}: expected {dtype} but got {value.dtype}.{_RECOMPILE}")
            same = tuple(value.shape) == shape
            shorter = (shorter_batch and value.dim() == len(shape) and value.dim() > 0
                       and tuple(value.shape[1:]) == shape[1:] and value.shape[0] < shape[0]
                       and value.shape[0] % shorter_batch == 0)
            if not same and not shorter:
                raise Error(f"Shape mismatch for {name}: expected {torch.Size(shape)} but got {value.shape}."
                            f"{_RECOMPILE}")


class BlockCheck(TorchFunctionMode):
    """Counts the ops that produce a tensor after a ``with Block`` ended outside any other block: PopTorch fails to
    compile such a model ("No active Block, all the ops must belong to a Block")."""

    def __init__(self) -> None:
        super().__init__()
        self.open = 0
        self.closed = False
        self.outside = 0
        self.auto_id = 0
        self.blocks: Dict[str, Optional[int]] = {}
        """The blocks met, in order, and their ``ipu_id``."""

    def begin(self, user_id: Optional[str], ipu_id: Optional[int], scoped: bool = False) -> None:
        if user_id is None:
            user_id, self.auto_id = str(self.auto_id), self.auto_id + 1
        self.blocks.setdefault(str(user_id), ipu_id)
        self.closed = False
        self.open += int(scoped)

    def end(self) -> None:
        self.open = max(self.open - 1, 0)
        self.closed = self.open == 0

    def reset_auto_id(self) -> None:
        self.auto_id = 0

    def __torch_function__(self, func: Any, types_: Any, args: Tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if self.closed and any(isinstance(t, torch.Tensor) for t in tree_flatten(out)[0]):
            self.outside += 1
        return out

    def raise_if_outside(self) -> None:
        if self.outside:
            raise Error("No active Block, all the ops must belong to a Block")


def batches_for_stages(training: bool, accumulation: int, device_iterations: int, stages: int) -> None:
    """PopTorch's rule for a pipeline of ``stages`` forward stages: a training model accumulates at least one
    micro-batch per stage, backward stages included (2 x stages - 1); an inference model runs at least one device
    iteration per stage."""
    if stages < 2:
        return
    if not training and device_iterations < stages:
        raise Error(f"poptorch.Options().deviceIterations must be greater than or equal to the number of pipeline "
                    f"stages ({stages}) when using PopTorch.PipelinedExecution.")
    needed = 2 * stages - 1
    if training and accumulation < needed:
        raise Error(f"poptorch.Options().Training.gradientAccumulation must be greater than or equal to the number "
                    f"of pipeline stages ({needed}) when using poptorch.PipelinedExecution. Please note that a model "
                    f"with {stages} pipeline stages in PopTorch will have an additional {stages - 1} stages when "
                    "training.")


def checked_forward(model: torch.nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any], options: Any,
                    training: bool, inputs: Optional["Inputs"] = None) -> Any:
    """``model`` on one micro-batch under the compile-time checks of its blocks (an op outside any block, too few
    micro-batches (or device iterations) for the pipeline's stages) and of its buffers (``buffer_checks``, against
    those it was compiled with)."""
    from ipuexp.poptorch import buffer_checks, ops
    from ipuexp.poptorch.blocks import listening
    from ipuexp.poptorch.errors import UnsupportedError
    from ipuexp.poptorch.mapping import stages_of
    from ipuexp.poptorch.strategy import ShardedExecution

    from ipuexp.poptorch.overlap_checks import OverlapCheck, _active

    too_many(options.replication_factor)  # each replica takes an IPU at least
    check = BlockCheck()
    values = {name: b.detach().clone() for name, b in buffer_checks.tensors(model)[0].items()}
    overlap = OverlapCheck([t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)])
    _active.append(overlap)
    try:
        with listening(check), check, overlap, ops.on_ipu():
            out = model(*args, **kwargs)
    finally:
        _active.remove(overlap)
    overlap.check(out, options)
    buffer_checks.check_bindings(inputs.bound if inputs is not None else buffer_checks.tensors(model), model)
    buffer_checks.check_broadcast(values, model, options, training)
    if not check.blocks:
        return out
    check.raise_if_outside()
    strategy = options.execution_strategy
    if isinstance(strategy, ShardedExecution):
        return out
    try:
        counts, _ = stages_of(list(check.blocks), list(check.blocks.values()), strategy)
    except (UnsupportedError, ValueError):  # the capture reports these
        return out
    batches_for_stages(training, options.Training.gradient_accumulation, options.device_iterations, len(counts))
    return out


def too_many(num: int) -> None:
    """One process drives 64 IPUs at most (more take PopRun instances: ``Distributed.configureProcessId``)."""
    if num > 64:
        raise Error(f"Too many IPUs requested ({num}). Experiments that need more than 64 IPUs require distributed "
                    "execution.")


def ipus_to_reserve(ipus_per_replica: int, replicas: int, auto_round: bool) -> None:
    """PopTorch reserves a power of two of IPUs: a model on another number fails to compile unless
    ``Options.autoRoundNumIPUs(True)``, which reserves the next power of two and leaves the extra IPUs idle
    (``options.auto_round_num_ipus``); and no more than 64 (``too_many``)."""
    num = ipus_per_replica * replicas
    too_many(num)
    rounded = 1 << (num - 1).bit_length()
    if num == rounded or auto_round:
        return
    raise Error(f"Reserving IPUs: The model specifies the use of {num} IPUs, however PopTorch must reserve a minimum of {rounded} "
                "in order to allow the model to run, because PopTorch must reserve a power of 2 or maximum of 64 "
                "IPUs per process. Please reconfigure your model to use a different number of IPUs or set "
                "poptorch.Options().autoRoundNumIPUs(True).")


class InferenceAccumulationError(Error, ValueError):
    """Gradient accumulation set for an inference model (PopTorch's error; a ValueError too, as ipuexp raised it)."""


def inference_accumulation_error(strategy: Any) -> Error:
    from ipuexp.poptorch.strategy import ShardedExecution

    message = ("You must set poptorch.Options().Training.gradientAccumulation to 1 or leave it as its default value "
               "(1) when running a poptorch.inferenceModel().")
    if not isinstance(strategy, ShardedExecution):  # PopTorch's default strategy pipelines
        message += (" Use poptorch.Options().deviceIterations to process a sufficient number of batches each run "
                    "for pipelined execution instead.")
    return InferenceAccumulationError(message)
