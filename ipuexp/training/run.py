"""A functional run: train for ``engine.epochs`` epochs, checkpoint each, then score the held-out split.

This is the engine's edge: it starts the instances, shows a progress bar, sends per-step metrics to the tracker
and writes checkpoints; the numerics live in ``executor.py``.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from ipuexp.config.schema import ExperimentConfig
from ipuexp.result import FunctionalFigures

log = logging.getLogger("ipuexp")

STEP_METRICS = ("train_loss", "train_accuracy", "host_samples_per_s", "loss_scale")
"""Names of the per-step metrics (step = weight updates so far): mean returned loss, accuracy of the returned
predictions (percent), samples per second of the host call, loss scale."""


def _combine(results: List[Any]) -> Dict[str, float]:
    """One host call over all instances: instances run in parallel, so the call lasts as long as the slowest."""
    seconds = max(r.seconds for r in results)
    samples = sum(r.samples for r in results)
    count = sum(r.loss_count for r in results)
    rows = sum(r.rows for r in results)
    out = {
        "loss": sum(r.loss_sum for r in results) / count if count else float("nan"),
        "seconds": seconds,
        "samples": samples,
        "updates": results[0].updates,
        "loss_scale": results[0].loss_scale,
    }
    if rows:
        out["accuracy"] = 100.0 * sum(r.correct for r in results) / rows
    return out


def run_functional(exp: ExperimentConfig, tracker: Any = None, out_dir: Union[str, Path] = ".",
                   predicted_samples_per_s: Optional[float] = None, progress: bool = True) -> FunctionalFigures:
    """Train and evaluate ``exp`` (an ``ExperimentConfig``) with real numerics.

    ``tracker`` receives ``log_step_metrics(step, values)`` per host call; checkpoints go to
    ``out_dir/checkpoints``; ``predicted_samples_per_s`` (the analytic engine's figure for the same
    configuration) is reported beside the measured host throughput.
    """
    from tqdm.auto import tqdm

    from ipuexp.training import checkpoint
    from ipuexp.training.instances import start_instances

    out = Path(out_dir).resolve()
    epochs = int(exp.engine.epochs)
    assert epochs >= 1, epochs  # validated with the config: engine.epochs >= 1
    pool = start_instances(exp)
    try:
        info = pool.info
        log.info("functional run on %s: stages %s; %s; %d host calls of %d samples per epoch", info["device"],
                 info["stages"], info["dataset"], info["calls_per_epoch"], info["samples_per_call"])
        if info["calls_per_epoch"] == 0 and epochs and exp.training:
            raise ValueError(f"data: {info['train_samples']} training samples are fewer than one host call "
                             f"({info['samples_per_call']} samples = micro-batch x device iterations x gradient "
                             "accumulation x replicas); allowed: a host call no larger than the training split")
        start_epoch, step, last_loss = 0, 0, float("nan")
        if exp.engine.resume:
            path = checkpoint.latest(out)
            if path is None:
                log.warning("engine.resume: no checkpoint in %s; starting from the beginning", checkpoint.folder(out))
            else:
                state = pool.map("load_checkpoint", str(path))[0]
                start_epoch, step = state["epoch"], int(state["meta"]["step"])
                last_loss = float(state["meta"]["loss"])
                log.info("resuming from %s (epoch %d, step %d)", path, start_epoch, step)
        samples = 0
        seconds = 0.0
        for epoch in range(start_epoch, epochs if exp.training else 0):
            bar = tqdm(range(info["calls_per_epoch"]), desc=f"Epoch {epoch + 1}/{epochs}", disable=not progress,
                       leave=True, dynamic_ncols=True)
            for call in bar:
                c = _combine(pool.map("train_call", epoch, call))
                step += c["updates"]
                samples += c["samples"]
                seconds += c["seconds"]
                last_loss = c["loss"]
                metrics = {"train_loss": c["loss"], "host_samples_per_s": c["samples"] / c["seconds"],
                           "loss_scale": c["loss_scale"]}
                if "accuracy" in c:
                    metrics["train_accuracy"] = c["accuracy"]
                if tracker is not None:
                    tracker.log_step_metrics(step, metrics)
                bar.set_postfix_str(f"Loss:{c['loss']:0.4f}"
                                    + (f" | Accuracy:{c['accuracy']:0.2f}%" if "accuracy" in c else ""))
            path = pool.map("save_checkpoint", str(out), epoch + 1, {"step": step, "loss": last_loss})[0]
            log.info("checkpoint %s", path)
        test_accuracy = None
        if not exp.training:
            # inference only: the held-out split if there is one, else every sample, at the inference settings
            ev = _combine(pool.map("evaluate", "test" if info["test_samples"] else "train"))
            samples, seconds, last_loss = ev["samples"], ev["seconds"], ev["loss"]
            test_accuracy = ev.get("accuracy")
        elif info["test_samples"]:
            ev = _combine(pool.map("evaluate", "test"))
            test_accuracy = ev.get("accuracy")
            if test_accuracy is not None:
                log.info("accuracy on %d held-out samples: %.2f%% (%.1f samples/s inference)", ev["samples"],
                         test_accuracy, ev["samples"] / ev["seconds"] if ev["seconds"] else 0.0)
    finally:
        pool.close()
    measured = samples / seconds if seconds else 0.0
    if predicted_samples_per_s:
        log.info("host throughput %.1f samples/s measured, %.1f predicted for the IPU system",
                 measured, predicted_samples_per_s)
    return FunctionalFigures(final_loss=last_loss, samples_per_s=measured, test_accuracy=test_accuracy,
                             steps=step, predicted_samples_per_s=predicted_samples_per_s)
