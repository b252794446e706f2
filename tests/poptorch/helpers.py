"""Running a PopTorch script in this process, as ``python -m ipuexp.poptorch`` does its job."""
from __future__ import annotations

from pathlib import Path
from typing import Any, List

SCRIPTS = Path(__file__).resolve().parent / "scripts"
MNIST = SCRIPTS / "mnist_pipelining.py"


def run_script(script: Path, args: List[str], overrides: List[str], out_dir: Path, predict_only: bool = False
               ) -> Any:
    """The script's session after running it (its ``result`` and ``cfg``)."""
    from ipuexp.poptorch.run_script import run
    from ipuexp.poptorch.session import Session

    job = Session(None, overrides, out_dir, predict_only)
    run(str(script), args, job)
    return job


def without_label_cast(graph: Any) -> Any:
    """The zoo MNIST graph less the op of its ``labels.long()`` (block B4 casts the int32 labels it is fed to int64 for
    torch's loss; a PopTorch script's labels reach the loss as they are)."""
    import dataclasses

    blocks = []
    for block in graph.blocks:
        casts = [op for op in block.ops if op.op == "aten._to_copy" and op.phase == "fwd" and op.elements_read
                 == graph.micro_batch_size]
        if block.name == "B4" and casts:
            block = dataclasses.replace(block, ops=[op for op in block.ops if op not in casts],
                                        op_count_fwd=block.op_count_fwd - sum(op.count for op in casts))
        blocks.append(block)
    return dataclasses.replace(graph, blocks=blocks)


def recipe_prediction(*overrides: str) -> Any:
    """The analytic result of the ``mnist_pipeline`` recipe with ``overrides``, its capture less the label cast."""
    from ipuexp.runner.evaluation import evaluate
    from ipuexp.config.compose import load_experiment
    from ipuexp.graph.capture import capture
    from ipuexp.runner.captures import capture_key, seed

    exp = load_experiment("+recipe=mnist_pipeline", "engine.mode=analytic", *overrides)
    graph = capture(exp.model, exp.data.micro_batch_size, use_cache=False)
    seed(capture_key(exp.model, exp.data.micro_batch_size, exp.engine.cache_dir), without_label_cast(graph))
    return evaluate(exp).result
