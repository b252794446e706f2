"""Real training numerics under the execution plan: stages, schedule, accumulation, replicas and the update.

Each pipeline stage runs as its own autograd graph: a stage's inputs are the previous stage's outputs cut from
their graph (the tensors an IPU receives over IPU-Links), and its backward pass receives the gradients of its
outputs from the next stage. Events run in the schedule's order, so activations sit in each stage's stash as
long as the schedule keeps them (or only the stage inputs do, with recomputation).

Local replicas hold identical weights (broadcast at the start, identical updates after), so one copy of the
weights serves all of them: each replica accumulates its own micro-batches' gradients, the replicas' sums are
added (the cross-replica all-reduce, extended over instances by ``allreduce``), divided by GA x replicas for
the mean reduction (PopTorch's default ``ReductionType.Mean`` with the ``Post`` strategy: accumulate, then
divide once) and by the loss scale, and the optimizer updates the weights once per device iteration.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.utils.checkpoint import checkpoint

from ipuexp.execution.schedule import BWD, Event, events
from ipuexp.training.gradients import GradientReduction, take_grads
from ipuexp.training.optim import build_optimizer, round_state_to_half
from ipuexp.training.plan import TrainingPlan
from ipuexp.training.precision import LossScaler, to_half

if TYPE_CHECKING:
    from ipuexp.config.schema import OptimizerConfig

AllReduce = Callable[[List[torch.Tensor]], None]
"""Sums a list of tensors in place over all instances."""


@dataclass
class HostOutput:
    """What one host call returns to the host (``options.output_mode``) and what it did."""

    losses: torch.Tensor
    """Returned losses: every micro-batch's (all), the last micro-batch's per replica (final), or each
    replica's sum over the call (sum)."""
    loss_count: int
    """Micro-batch losses the returned values stand for (for the mean loss: sum(losses) / loss_count)."""
    logits: Optional[torch.Tensor]
    """Returned model outputs, rows matching ``labels``; summed over the call in sum mode."""
    labels: Optional[torch.Tensor]
    """Labels of the returned rows; None in sum mode."""
    iterations: int
    """Device iterations run."""
    updates: int
    """Weight updates applied (skipped ones, after an overflow with automatic loss scaling, excluded)."""

    @property
    def mean_loss(self) -> float:
        return float(self.losses.float().sum()) / max(self.loss_count, 1)

    def correct(self) -> Tuple[int, int]:
        """(correct predictions, rows) over the returned rows; (0, 0) when no labelled rows came back."""
        if self.logits is None or self.labels is None:
            return 0, 0
        pred = self.logits.argmax(dim=-1)
        return int((pred == self.labels.to(pred.device)).sum()), int(self.labels.numel())


def _float(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point()


class Executor:
    """Runs one instance's host calls with real numerics."""

    def __init__(self, model: torch.nn.Module, plan: TrainingPlan, optimizer_cfg: OptimizerConfig,
                 allreduce: Optional[AllReduce] = None, device: Any = "cpu") -> None:
        self.plan = plan
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.allreduce = allreduce
        blocks = list(model.blocks)
        self.stage_blocks = [[blocks[i] for i in stage] for stage in plan.stages]
        marked = set(plan.checkpoint_blocks)
        self.stage_checkpointed = [[i in marked for i in stage] for stage in plan.stages]
        self.labels_index = model.labels_index() if hasattr(model, "labels_index") else -1
        prec = plan.precision
        self.params = [p for p in model.parameters() if p.requires_grad]
        if prec.half_compute:
            # fp32 master copy for the optimizer; in 16.16 it is re-rounded to fp16 after every update
            init = [p.detach().float() for p in self.params]
            self.master = [(i.half().float() if prec.half_weights else i.clone()).requires_grad_(False)
                           for i in init]
            model.half()
            self.params = [p for p in model.parameters() if p.requires_grad]
        else:
            self.master = self.params
        self.optimizer = build_optimizer(optimizer_cfg, self.master)
        self.state_half = str(getattr(optimizer_cfg, "state_precision", "float")) == "half"
        self.scaler = LossScaler(plan.loss_scaling, auto=plan.auto_loss_scaling and prec.half_compute)
        self.rounding = torch.Generator(device=self.device).manual_seed(plan.seed)
        # 16.32 accumulates fp16 gradients into fp32 accumulators (the weights' type); 16.16 and 32.32 in .grad
        self._acc: Optional[List[torch.Tensor]] = None
        if prec.half_compute and not prec.half_weights:
            for i, p in enumerate(self.params):
                p.register_post_accumulate_grad_hook(self._accumulate_hook(i))
        self._stage_fns = [self._make_stage_fn(s) for s in range(plan.num_stages)]
        self.train_order = events(plan.schedule, plan.num_stages, plan.layout.gradient_accumulation, True)
        self._infer_orders: Dict[int, List[Event]] = {}
        self.updates = 0
        self.stash_peak = [0] * plan.num_stages
        """Most micro-batches each stage has held from its forward to its backward, as measured while training."""

    # ---- stages ----------------------------------------------------------------------------------------------
    def _make_stage_fn(self, s: int) -> Callable[..., Tuple[Any, ...]]:
        blocks, marks = self.stage_blocks[s], self.stage_checkpointed[s]

        def run(*xs: Any) -> Tuple[Any, ...]:
            for block, mark in zip(blocks, marks):
                if mark and torch.is_grad_enabled():
                    xs = checkpoint(block, *xs, use_reentrant=False)
                else:
                    xs = block(*xs)
            return xs

        return run

    def _forward(self, s: int, xs: Tuple[Any, ...]) -> Tuple[Any, ...]:
        if self.plan.checkpoint_stages and torch.is_grad_enabled():
            # only the stage inputs stay stashed; the stage's forward runs again in its backward pass
            return checkpoint(self._stage_fns[s], *xs, use_reentrant=False)
        return self._stage_fns[s](*xs)

    @staticmethod
    def _receive(outputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
        """A boundary crossing: float tensors leave the sender's graph and become the receiver's leaves."""
        return tuple(t.detach().requires_grad_(t.requires_grad) if _float(t) else t for t in outputs)

    def _accumulate_hook(self, i: int) -> Callable[[torch.Tensor], None]:
        def hook(p: torch.Tensor) -> None:
            if self._acc is None:
                self._acc = [torch.zeros_like(q, dtype=torch.float32) for q in self.params]
            self._acc[i].add_(p.grad)
            p.grad = None

        return hook

    def _cast_inputs(self, xs: Tuple[Any, ...]) -> Tuple[Any, ...]:
        if not self.plan.precision.half_compute:
            return xs
        return tuple(t.half() if _float(t) else t for t in xs)

    def _run_pipeline(self, micro_batches: Sequence[Tuple[Any, ...]], order: List[Event],
                      training: bool) -> List[Tuple[torch.Tensor, torch.Tensor]]:
        """Run one replica's events; returns the detached (loss, logits) of every micro-batch."""
        last = self.plan.num_stages - 1
        received: Dict[Tuple[int, int], Tuple[Any, ...]] = {}  # stage inputs: leaves whose .grad goes back
        produced: Dict[Tuple[int, int], Tuple[Any, ...]] = {}  # stage outputs, kept until their backward
        outputs: List[Any] = [None] * len(micro_batches)
        held = [0] * self.plan.num_stages
        scale = self.scaler.scale
        for ev in order:
            s, m = ev.stage, ev.micro_batch
            if ev.phase == BWD:
                held[s] -= 1
                outs = produced.pop((s, m))
                if s == last:
                    loss = outs[0].float()
                    torch.autograd.backward(loss * scale if scale != 1.0 else loss)
                else:
                    pairs = [(o, x.grad) for o, x in zip(outs, received.pop((s + 1, m)))
                             if _float(o) and o.requires_grad and x.grad is not None]
                    if pairs:
                        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
                continue
            if s == 0:
                xs = self._cast_inputs(micro_batches[m])
            elif training:
                xs = self._receive(produced[(s - 1, m)])
                received[(s, m)] = xs
            else:
                xs = produced.pop((s - 1, m))
            outs = self._forward(s, xs)
            if s == last:
                outputs[m] = (outs[0].detach(), outs[1].detach())
            if training or s < last:
                produced[(s, m)] = outs
            if training:
                held[s] += 1
                self.stash_peak[s] = max(self.stash_peak[s], held[s])
        return outputs

    # ---- host calls ------------------------------------------------------------------------------------------
    @staticmethod
    def _micro_batches(batch: Sequence[torch.Tensor], d: int, r: int) -> List[Tuple[Any, ...]]:
        return [tuple(t[d, r, m] for t in batch) for m in range(batch[0].shape[2])]

    def train_call(self, batch: Sequence[torch.Tensor]) -> HostOutput:
        """One training host call; ``batch`` tensors are shaped [iterations, local replicas, GA, micro-batch, ...]."""
        self.model.train()
        iters, replicas = batch[0].shape[0], batch[0].shape[1]
        results = []
        updates = 0
        ga, all_replicas, mean = self.plan.layout.gradient_accumulation, self.plan.layout.replicas, self.plan.reduction
        for d in range(iters):
            per_replica = []
            reduction = GradientReduction(ga, all_replicas, mean == "mean", self.scaler.scale)
            for r in range(replicas):
                per_replica.append(self._run_pipeline(self._micro_batches(batch, d, r), self.train_order, True))
                reduction.add(self._take_grads())
            results.append(per_replica)
            updates += self._update(reduction)
        self.updates += updates
        return self._host_output(results, batch[self.labels_index], updates)

    def infer_call(self, batch: Sequence[torch.Tensor]) -> HostOutput:
        """One inference host call, every output returned (PopTorch's inference default, output mode all)."""
        self.model.eval()
        iters, replicas, ga = batch[0].shape[0], batch[0].shape[1], batch[0].shape[2]
        order = self._infer_orders.get(ga)
        if order is None:
            order = self._infer_orders[ga] = events(self.plan.schedule, self.plan.num_stages, ga, False)
        with torch.no_grad():
            results = [[self._run_pipeline(self._micro_batches(batch, d, r), order, False)
                        for r in range(replicas)] for d in range(iters)]
        flat = [o for per_replica in results for mbs in per_replica for o in mbs]
        losses = torch.stack([o[0] for o in flat])
        logits = torch.cat([o[1] for o in flat])
        return HostOutput(losses, losses.numel(), logits, batch[self.labels_index].reshape(-1), iters, 0)

    def _take_grads(self) -> List[torch.Tensor]:
        """This replica's accumulated gradients; the accumulators start empty for the next replica."""
        if self.plan.precision.half_compute and not self.plan.precision.half_weights:
            grads = self._acc or [torch.zeros_like(p, dtype=torch.float32) for p in self.params]
            self._acc = None
            return grads
        return take_grads(self.params)

    def _update(self, reduction: GradientReduction) -> int:
        """Reduce over instances, normalise, update; returns 1, or 0 for an update skipped on overflow."""
        summed = reduction.sums
        if self.allreduce is not None:
            self.allreduce(summed)
        finite = self.scaler.update(summed)
        prec = self.plan.precision
        with torch.no_grad():
            if not finite:
                return 0
            for master, g in zip(self.master, summed):
                master.grad = reduction.normalised(g.float())
            self.optimizer.step()
            if self.state_half:
                round_state_to_half(self.optimizer)
            for master in self.master:
                master.grad = None
            if prec.half_compute:
                for p, master in zip(self.params, self.master):
                    h = to_half(master, prec.stochastic_rounding, self.rounding)
                    p.copy_(h)
                    if prec.half_weights:
                        master.copy_(h)
        return 1

    def _host_output(self, results: List[List[List[Tuple[torch.Tensor, torch.Tensor]]]], labels: torch.Tensor,
                     updates: int) -> HostOutput:
        iters, replicas, ga = len(results), len(results[0]), len(results[0][0])
        mode = self.plan.output_mode
        if mode == "all":
            flat = [o for per_replica in results for mbs in per_replica for o in mbs]
            return HostOutput(torch.stack([o[0] for o in flat]), len(flat), torch.cat([o[1] for o in flat]),
                              labels.reshape(-1), iters, updates)
        if mode == "final":
            final = [results[-1][r][-1] for r in range(replicas)]
            return HostOutput(torch.stack([o[0] for o in final]), replicas, torch.cat([o[1] for o in final]),
                              labels[-1, :, -1].reshape(-1), iters, updates)
        sums = [[sum(results[d][r][m][k].float() for d in range(iters) for m in range(ga)) for r in range(replicas)]
                for k in (0, 1)]
        return HostOutput(torch.stack(sums[0]), iters * ga * replicas, torch.cat(sums[1]), None, iters, updates)

    # ---- checkpoints -----------------------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """A snapshot (no tensor shared with the live run) of the weights, master weights, optimizer and
        loss-scale state and the rounding generator."""
        import copy

        return {
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "master": [m.detach().clone() for m in self.master] if self.plan.precision.half_compute else None,
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
            "scaler": self.scaler.state_dict(),
            "rounding": self.rounding.get_state(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        if state.get("master") is not None:
            with torch.no_grad():
                for m, saved in zip(self.master, state["master"]):
                    m.copy_(saved)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        self.rounding.set_state(state["rounding"])
        self.updates = int(state["updates"])
