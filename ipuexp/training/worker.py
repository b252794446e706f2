"""One instance of a functional run: its model copy, its data shard and its host calls.

A run with ``options.num_instances`` instances has one worker per instance (in this process for one instance,
in Ray actors for more, see ``instances.py``). Workers return plain numbers; the run loop combines them.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ipuexp.config.schema import ExperimentConfig
from ipuexp.training.batching import BatchLayout, epoch_order, host_calls, instance_indices


@dataclass
class CallResult:
    """One instance's share of a host call."""

    loss_sum: float
    """Sum of the returned losses."""
    loss_count: int
    """Micro-batch losses they stand for."""
    correct: int
    """Correct predictions among the returned labelled rows."""
    rows: int
    """Returned labelled rows."""
    samples: int
    """Samples this instance consumed."""
    seconds: float
    """Wall time of the host call on this instance (batch gather, pipeline, update)."""
    updates: int
    """Weight updates applied."""
    loss_scale: float
    """Loss scale after the call."""


def resolve_device(name: str) -> str:
    """``engine.device``: cpu, cuda, or auto (cuda when present)."""
    import torch

    name = str(name)
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise ValueError(f"engine.device: {name!r} is not allowed; allowed: cpu, cuda, auto")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("engine.device: 'cuda' is not allowed here: torch sees no CUDA device; allowed: cpu, auto")
    return name


def inference_settings(exp: ExperimentConfig) -> Tuple[int, int]:
    """(micro-batch size, device iterations) of the evaluation; the training ones unless the configuration
    names inference values (``data.test_micro_batch_size``, ``options.inference_device_iterations``)."""
    mbs = getattr(exp.data, "test_micro_batch_size", None) or exp.data.micro_batch_size
    iters = getattr(exp.options, "inference_device_iterations", None) or exp.options.device_iterations
    return int(mbs), int(iters)


class InstanceWorker:
    """Builds and runs one instance. ``init_method`` (a ``tcp://`` address) joins a gloo group of all instances."""

    def __init__(self, exp: ExperimentConfig, instance: int = 0, base_dir: Optional[str] = None,
                 init_method: Optional[str] = None, threads: Optional[int] = None) -> None:
        self.exp = exp
        self.instance = int(instance)
        self.instances = int(exp.options.num_instances)
        self.base_dir = Path(base_dir) if base_dir else None
        self.init_method = init_method
        self.threads = threads
        self._orders: Dict[int, Any] = {}

    # ---- set-up --------------------------------------------------------------------------------------------
    def setup(self) -> Dict[str, Any]:
        import torch

        from ipuexp.data import load_dataset
        from ipuexp.models import build_model
        from ipuexp.training.executor import Executor
        from ipuexp.training.plan import make_plan

        if self.threads:
            torch.set_num_threads(int(self.threads))
        exp = self.exp
        seed = int(exp.options.random_seed)
        self.device = resolve_device(exp.engine.device)
        allreduce = None
        if self.instances > 1:
            import torch.distributed as dist

            dist.init_process_group("gloo", init_method=self.init_method, rank=self.instance,
                                    world_size=self.instances)
            allreduce = _gloo_allreduce
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = build_model(exp.model)
        if self.instances > 1:
            _broadcast_from_first(model)
        plan = make_plan(exp, list(model.blocks))
        self.layout = plan.layout
        spec = list(getattr(model, "input_spec", []))
        data = load_dataset(exp.data, spec, self.layout.samples_per_call, seed, self.base_dir)
        self.train = self._prepare(data.train, spec)
        self.test = self._prepare(data.test, spec) if data.test is not None else None
        self.executor = Executor(model, plan, exp.optimizer, allreduce, self.device)
        # dropout and other draws of this instance: its own stream, kept apart from the caller's
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + self.instance)
            self._rng = torch.get_rng_state()
        test_mbs, test_iters = inference_settings(exp)
        self.test_layout = BatchLayout(test_mbs, 1, test_iters, self.layout.replicas, self.instances)
        return {
            "device": self.device,
            "stages": [[model.blocks[i].name for i in s] for s in plan.stages],
            "train_samples": int(self.train[0].shape[0]),
            "test_samples": int(self.test[0].shape[0]) if self.test is not None else 0,
            "calls_per_epoch": len(host_calls(int(self.train[0].shape[0]), self.layout)),
            "samples_per_call": self.layout.samples_per_call,
            "dataset": data.description,
        }

    def _prepare(self, tensors: Tuple[Any, ...], spec: List[Any]) -> Tuple[Any, ...]:
        """Tensors in the model's input types (labels int32 as on the IPU), on the run's device."""
        import torch

        out = []
        for i, t in enumerate(tensors):
            dtype = getattr(torch, spec[i].dtype) if i < len(spec) else t.dtype
            out.append(t.to(device=self.device, dtype=dtype))
        return tuple(out)

    # ---- training and evaluation -----------------------------------------------------------------------------
    def _order(self, epoch: int) -> Any:
        if epoch not in self._orders:
            self._orders = {epoch: epoch_order(int(self.train[0].shape[0]), int(self.exp.options.random_seed),
                                               epoch).to(self.device)}
        return self._orders[epoch]

    def _timed(self, fn: Any) -> Tuple[Any, float]:
        import torch

        t0 = time.perf_counter()
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self._rng)
            out = fn()
            self._rng = torch.get_rng_state()
        if self.device == "cuda":
            torch.cuda.synchronize()
        return out, time.perf_counter() - t0

    def train_call(self, epoch: int, call: int) -> CallResult:
        start, iters = host_calls(int(self.train[0].shape[0]), self.layout)[call]

        def run() -> Any:
            idx = instance_indices(self._order(epoch), start, iters, self.layout, self.instance)
            return self.executor.train_call([t[idx] for t in self.train])

        out, seconds = self._timed(run)
        correct, rows = out.correct()
        return CallResult(float(out.losses.float().sum()), out.loss_count, correct, rows,
                          int(idx_count(self.layout, iters)), seconds, out.updates, self.executor.scaler.scale)

    def evaluate(self, split: str = "test") -> CallResult:
        """Score this instance's shard of ``split`` (test or train) in inference host calls: every sample of a
        complete micro-batch on every replica."""
        import torch

        tensors = self.test if split == "test" else self.train
        total = CallResult(0.0, 0, 0, 0, 0, 0.0, 0, self.executor.scaler.scale)
        if tensors is None:
            return total
        n = int(tensors[0].shape[0])
        order = torch.arange(n, device=self.device)
        for start, iters in host_calls(n, self.test_layout, drop_last=False):
            idx = instance_indices(order, start, iters, self.test_layout, self.instance)
            out, seconds = self._timed(lambda: self.executor.infer_call([t[idx] for t in tensors]))
            correct, rows = out.correct()
            total.loss_sum += float(out.losses.float().sum())
            total.loss_count += out.loss_count
            total.correct += correct
            total.rows += rows
            total.samples += int(idx.numel())
            total.seconds += seconds
        return total

    def weights(self) -> List[Any]:
        """This instance's weights as CPU tensors (master weights where the run keeps them)."""
        return [m.detach().float().cpu().clone() for m in self.executor.master]

    # ---- checkpoints -----------------------------------------------------------------------------------------
    def save_checkpoint(self, run_dir: str, epoch: int, meta: Dict[str, Any]) -> Optional[str]:
        """Instance 0 writes the checkpoint (every instance holds the same weights); returns its path."""
        if self.instance != 0:
            return None
        from ipuexp.training import checkpoint

        payload = {"epoch": epoch, "meta": dict(meta), "model_name": _model_id(self.exp),
                   "executor": self.executor.state_dict(), "rng": self._rng}
        return str(checkpoint.save(run_dir, epoch, payload))

    def load_checkpoint(self, path: str) -> Dict[str, Any]:
        """Restore weights, optimizer, loss scale and random streams; returns the checkpoint's epoch and meta."""
        from ipuexp.training import checkpoint

        payload = checkpoint.load(path)
        if payload.get("model_name") != _model_id(self.exp):
            raise ValueError(f"engine.resume: checkpoint {path} holds model {payload.get('model_name')!r}, "
                             f"the run is for {_model_id(self.exp)!r}; allowed: a checkpoint of the same model")
        self.executor.load_state_dict(payload["executor"])
        self._rng = payload["rng"]
        return {"epoch": int(payload["epoch"]), "meta": payload["meta"]}

    def close(self) -> None:
        if self.instances > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


def idx_count(layout: BatchLayout, iters: int) -> int:
    """Samples one instance consumes in a call of ``iters`` device iterations."""
    return iters * layout.local_replicas * layout.gradient_accumulation * layout.micro_batch_size


def _model_id(exp: ExperimentConfig) -> str:
    m = exp.model
    return f"{m.name}:{m.size}" + (f":{m.target}" if getattr(m, "target", None) else "")


def _gloo_allreduce(tensors: List[Any]) -> None:
    """Sum ``tensors`` over all instances in place, in one fp32 message."""
    import torch
    import torch.distributed as dist

    if not tensors:
        return
    flat = torch.cat([t.reshape(-1).float().cpu() for t in tensors])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[offset:offset + n].view_as(t))
        offset += n


def _broadcast_from_first(model: Any) -> None:
    """Every instance starts from instance 0's weights and buffers (PopDist broadcasts initial weights: the IPU-POD
    scaling talk)."""
    import torch
    import torch.distributed as dist

    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            buf = t.detach().cpu().contiguous()
            dist.broadcast(buf, src=0)
            t.copy_(buf)


def default_threads(instances: int) -> int:
    """Torch threads per instance so that the instances share the host's cores."""
    return max(1, (os.cpu_count() or 1) // max(1, instances))
