"""``trainingModel`` and ``inferenceModel``: the returned ``PoplarExecutor`` predicts at its first call (or
``compile``) and computes every call with real numerics, as ipuexp's functional engine does: the call's batch laid
out as [device iteration, replica, micro-batch, sample], each replica's gradients accumulated over its micro-batches,
the replicas' sums added, divided by accumulation x replicas (mean reduction) and the loss scale, one update per
device iteration; the outputs returned as the output mode asks."""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.utils._pytree import tree_flatten, tree_map

from ipuexp.poptorch import anchors, blocks, compile_hooks, executables, fp_exceptions, ops, optim, optim_state
from ipuexp.poptorch.casting import casting, weights_of
from ipuexp.poptorch.constants import as_compiled
from ipuexp.poptorch.device_rng import DeviceRng
from ipuexp.poptorch.compile_hooks import registerPostCompileHook, registerPreCompileHook
from ipuexp.poptorch.enums import ConnectionType, OutputMode, ReductionType
from ipuexp.poptorch.errors import Error
from ipuexp.poptorch.options import Options
from ipuexp.poptorch.layout import (batches_per_call, call_layout, combine as _combine, first_dim, micro_batches,
                                   precision_of, script_name)
from ipuexp.training.half_kernels import half_products


class PoplarExecutor:
    """A model wrapped for the IPU (PopTorch's ``PoplarExecutor``)."""

    def __init__(self, model: torch.nn.Module, options: Optional[Options], training: bool,
                 optimizer: Any = None) -> None:
        self.model = model
        if options is not None:
            options._freeze()  # PopTorch's options are frozen once a model uses them
        self.options = (options or Options()).clone()
        self._default_output = self.options.output_mode == OutputMode.Default
        if self._default_output:  # PopTorch resolves the default mode for the model it compiles
            self.options.output_mode = OutputMode.Final if training else OutputMode.All
        self.options._freeze()
        self.training = training
        if training and optimizer is None:
            from ipuexp.poptorch.optim import SGD

            optimizer = SGD(model.parameters(), lr=0.01)
        self.optimizer = optim.warn_if_subclassed(optimizer) if training else optimizer
        if not training and self.options.Training.gradient_accumulation != 1:
            from ipuexp.poptorch.checks import inference_accumulation_error

            raise inference_accumulation_error(self.options.execution_strategy)
        self._compiled = False
        self._attached = True
        self._micro_batch_size = 0
        self._scaler: Any = None
        self._inputs: Any = None
        self._half: Any = None
        self._anchors: Any = None
        self._constants: Dict[Tuple[int, str], torch.Tensor] = {}
        self._checked = False

    # ---- PopTorch's methods ----------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        calls = self.options.calls
        offline = calls.get("useOfflineIpuTarget") or calls.get("connectionType") == ConnectionType.Never
        assert not offline, ("Trying to run a model on an offline device (ConnectionType.Never): use "
                             "model.compile(inputs) instead of model(inputs)")  # PopTorch's assertion
        if not self._compiled:
            self.compile(*args, **kwargs)
        elif self._inputs is not None:
            replicas = self.options.replication_factor
            self._inputs.validate(self.model, args, kwargs, 0 if self.training else replicas * self._micro_batch_size)
        self._attached = True
        tensors = [*self.model.parameters(), *tree_flatten((args, kwargs))[0]]
        with as_compiled(self.model, self._constants), half_products(tensors), self._rng.active():
            return self._train(args, kwargs) if self.training else self._infer(args, kwargs)

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """Capture the model as PopTorch splits it; the first model a job compiles is predicted and reported."""
        compile_hooks.run(compile_hooks.pre_compile)
        with ops.on_ipu():
            self._compile(args, kwargs)
        compile_hooks.run(compile_hooks.post_compile)

    def _compile(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        from ipuexp.poptorch.session import current

        from ipuexp.poptorch.checks import Inputs
        from ipuexp.poptorch.constants import snapshot

        self._compiled = True
        self._checked = False
        batch = first_dim(args, kwargs)
        self._micro_batch_size = batch // self._batches_per_call() if batch else 1  # no batched input: one sample
        self._inputs = Inputs(self.model, args, kwargs)
        self._constants, self._rng = snapshot(self.model), DeviceRng(self.options.random_seed)
        self._anchors = anchors.for_model(self.options.anchored_tensors, self.model, self.training)
        optim_state.follow(self, compiling=True)
        session = current()
        if session.predicted:
            return
        from ipuexp.poptorch.capture import split_model

        split = split_model(self.model, args, kwargs, self._micro_batch_size, self.training,
                            type(self.model).__name__)
        values, no_effect = self._configuration(split)
        session.predict(split.graph, values, no_effect)

    def _configuration(self, split: Any) -> Tuple[Dict[str, Any], List[str]]:
        """The configuration keys of this model's options, optimizer and split, and what changes nothing."""
        import dataclasses

        from ipuexp.poptorch.checks import ipus_to_reserve
        from ipuexp.poptorch.mapping import options_values, optimizer_values, split_values, stages_of
        from ipuexp.poptorch.registry import register

        strategy = self.options.execution_strategy
        counts, ipus = stages_of(split.names, split.ipu_ids, strategy)
        ipus_to_reserve(len(set(ipus)), self.options.replication_factor,
                        self.options.auto_round_num_ipus)
        mapped = options_values(self.options, self.training)
        if self._default_output:
            mapped.values["options.output_mode"] = "default"
        opt = optimizer_values(self.optimizer if self.training else None)
        values = {**mapped.values, **opt.values,
                  **split_values(counts, ipus, strategy, self._micro_batch_size, precision_of(self.model))}
        if split.checkpoints:
            values["options.recomputation.checkpoint_every_layer"] = True
        graph = {k: v for k, v in dataclasses.asdict(split.graph).items() if k != "capture_seconds"}
        values.update({"model.name": "custom", "model.target": register(split.names, graph),
                       "tracking.experiment": script_name()})
        return values, mapped.no_effect + opt.no_effect

    def compileAndExport(self, filename: str, *args: Any, export_model: bool = True, **kwargs: Any) -> None:
        self.compile(*args, **kwargs)
        executables.save(self, filename, export_model)

    def save(self, filename: str, export_model: bool = True) -> None:
        executables.save(self, filename, export_model)

    def loadExecutable(self, filename: str) -> None:
        executables.check(self, filename)

    def getTensorNames(self) -> List[str]:
        return anchors.tensor_names(self.model, self.training)

    def getAnchoredTensor(self, short_name: str) -> torch.Tensor:
        return anchors.get(self._anchors, short_name)

    def setOptimizer(self, optimizer: Any) -> None:
        """Take ``optimizer``'s hyper-parameters (learning rate, ...), keeping the optimizer state."""
        optim.warn_if_subclassed(optimizer)
        if optimizer is not self.optimizer:
            self.optimizer = optim_state.adopt(self.optimizer, optimizer)
        optim_state.follow(self)

    def copyWeightsToHost(self) -> None:
        """The weights live on the host already."""

    def copyWeightsToDevice(self) -> None:
        """The weights live on the host already."""

    def detachFromDevice(self) -> None:
        if not self._compiled:
            raise RuntimeError("Cannot detach a model that is not attached to a device (call it or compile it first)")
        if not self._attached:
            raise Error("Device is not attached")
        self._attached = False

    def attachToDevice(self) -> None:
        if self._compiled and self._attached:
            raise Error("Device is already attached")
        self._attached = True

    def isAttachedToDevice(self) -> bool:
        return self._compiled and self._attached

    def isCompiled(self) -> bool:
        return self._compiled

    def destroy(self) -> None:
        self._compiled = False
        self._attached = False

    def __getattr__(self, name: str) -> Any:
        """The wrapped model's attributes, as PopTorch's executor gives them."""
        model = self.__dict__.get("model")
        if model is None:
            raise AttributeError(name)
        return getattr(model, name)

    def __repr__(self) -> str:  # PopTorch's: the model's, with its BeginBlocks
        return blocks.module_repr(self.model)

    # ---- the numerics ----------------------------------------------------------------------------------------
    def _forward(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        """The model on one micro-batch; the first after a compile runs under PopTorch's compile-time checks."""
        from ipuexp.poptorch.checks import checked_forward

        with fp_exceptions.traps(self.options), casting(weights_of(self.model, self.training),
                                                        tree_flatten((args, kwargs))[0]):
            if self._checked:
                with ops.on_ipu():
                    return self.model(*args, **kwargs)
            out = checked_forward(self.model, args, kwargs, self.options, self.training, self._inputs)
        self._checked = True
        return out

    def _batches_per_call(self) -> int:
        return batches_per_call(self.options, self.training)

    def _layout(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[int, int, int, int]:
        return call_layout(self.options, self.training, self._micro_batch_size, first_dim(args, kwargs))

    def _train(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        from ipuexp.poptorch.session import current
        from ipuexp.training.gradients import GradientReduction, take_grads

        start = time.perf_counter()
        layout = self._layout(args, kwargs)
        iterations, replicas, ga, _ = layout
        params = [p for g in self.optimizer.param_groups for p in g["params"] if p.requires_grad]
        for p in params:  # gradients a host backward pass left are not the device's
            p.grad = None
        from ipuexp.poptorch.half_update import loss_scaler

        scaler = self._scaler = loss_scaler(self._scaler, self.optimizer, self.options, precision_of(self.model))
        anchored = self._anchors
        mean = self.options.Training.accumulation_and_replication_reduction_type == ReductionType.Mean
        self.model.train()
        outputs: List[List[List[Any]]] = []
        step_losses: List[float] = []
        for per_iteration in micro_batches(args, kwargs, layout):
            results = []
            scale = scaler.scale
            reduction = GradientReduction(ga, replicas, mean, scale)
            for per_replica in per_iteration:
                replica = []
                for a, k in per_replica:
                    out = self._forward(a, k)
                    loss = ops.loss_of(out)
                    (loss * scale if scale != 1.0 else loss).backward()
                    replica.append(tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, out))
                    step_losses.append(float(loss.detach()))
                reduction.add(take_grads(params))
                results.append(replica)
            summed, divisor = reduction.sums, reduction.divisor
            if anchored is not None:
                anchored.gradients(params, summed, divisor)
            finite = scaler.update(summed)  # False: a gradient overflowed under automatic loss scaling
            if finite and any(p.dtype == torch.float16 for p in params):
                from ipuexp.poptorch.half_update import HalfUpdate

                self._half = self._half or HalfUpdate(self.options)
                self._half.step(self.optimizer, params, summed, divisor)
            elif finite:
                with torch.no_grad():
                    for p, g in zip(params, summed):
                        p.grad = reduction.normalised(g)
                optim.device_step(self.optimizer)
            for p in params:
                p.grad = None
            outputs.append(results)
        if anchored is not None:
            anchored.after_call()
        per_update = ga * replicas
        means = [sum(step_losses[i:i + per_update]) / per_update for i in range(0, len(step_losses), per_update)]
        current().log_call(means, first_dim(args, kwargs), time.perf_counter() - start)
        mode = self.options.output_mode
        return _combine(outputs, OutputMode.Final if mode == OutputMode.Default else mode, self.options)

    def _infer(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        layout = self._layout(args, kwargs)
        self.model.eval()
        with torch.no_grad():
            outputs = [[[self._forward(a, k) for a, k in per_replica] for per_replica in per_iteration]
                       for per_iteration in micro_batches(args, kwargs, layout)]
        mode = self.options.output_mode
        return _combine(outputs, OutputMode.All if mode == OutputMode.Default else mode, self.options)


__all__ = ["PoplarExecutor", "inferenceModel", "registerPostCompileHook", "registerPreCompileHook", "trainingModel"]


def trainingModel(model: torch.nn.Module, options: Optional[Options] = None, optimizer: Any = None) -> PoplarExecutor:
    """``model`` (returning its loss, alone or with other outputs) wrapped for training; an executor's own model."""
    return PoplarExecutor(model.model if isinstance(model, PoplarExecutor) else model, options, True, optimizer)


def inferenceModel(model: torch.nn.Module, options: Optional[Options] = None) -> PoplarExecutor:
    """``model`` (an executor's own model) wrapped for inference (its weights are the module's own, so training
    shows through)."""
    return PoplarExecutor(model.model if isinstance(model, PoplarExecutor) else model, options, False)
