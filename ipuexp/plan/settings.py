"""The planner's settings (``plan.*`` on the command line), typed and documented like the experiment schema."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from ipuexp.config.errors import ConfigError

SEARCHES = ("auto", "exhaustive", "optuna")
SAMPLERS = ("nsga2", "tpe", "random")
RANKS = ("lower", "point")


@dataclass
class PlanConfig:
    """``python -m ipuexp.plan`` settings: what is fixed, what must hold, how hard to search."""

    global_batch: Optional[int] = None
    """Samples per weight update (micro-batch x replicas x gradient accumulation); None: the recipe's."""
    batch_tolerance: float = 0.0
    """Relative distance from ``global_batch`` a candidate's global batch may have (0.05: within 5%)."""
    fix: List[str] = field(default_factory=list)
    """Config keys that keep the recipe's value (e.g. ``[options.precision, data.micro_batch_size]``)."""
    headroom: float = 0.05
    """Share of tile memory that must stay free on the fullest tile of every IPU (0.05: use at most 95%). It is
    at least the memory model's known error: its largest wrong verdict on a published configuration was 3% of a
    tile (Graphcore's PyTorch ResNet-50 configurations, docs/emulator.md), and published configurations that ran
    are predicted at up to 96.7% of the fullest tile (ResNet-50 on a Bow POD16)."""
    rank: str = "lower"
    """What the search maximises and the table ranks by: ``lower``, the lower end of the throughput's error band,
    samples/s / (1 + band) (what can be trusted: a candidate far from every calibration row has a wide band and
    ranks by its worst case), or ``point``, the predicted throughput itself."""
    top_k: int = 5
    """Candidates in the ranked table, in ``plan.json`` and as MLflow child runs."""
    search: str = "auto"
    """auto (exhaustive up to ``exhaustive_limit`` candidates, else Optuna), exhaustive or optuna."""
    exhaustive_limit: int = 20000
    """Largest space ``search=auto`` enumerates in full."""
    trials: int = 4000
    """Distinct candidates Optuna evaluates after the seeds and their climbs (its sampler may propose one twice; a
    repeat is not counted). The command says when the best was still improving at the end of this budget."""
    sampler: str = "nsga2"
    """Optuna sampler: nsga2 (multi-objective: throughput up, fullest tile down), tpe (throughput) or random."""
    seed: int = 0
    """Seed of the Optuna sampler (the seeds and climbs do not depend on it; the README measures how little the
    answer does)."""
    workers: int = 1
    """Processes evaluating candidates (1: in this process; 0: one per CPU core). Each process warms its own engine
    caches, so on two cores a second process did not pay (bench_plan.py: 22.9 s with one, 26.0 s with two)."""
    refine: bool = True
    """After the search, raise each IPU's available memory proportion of the best candidates while it fits."""
    out_dir: Optional[str] = None
    """Folder for ``plan.json`` and ``pareto.png`` (relative to the launch directory); None: a new run folder
    per plan, ``outputs/YYYY-MM-DD/HH-MM-SS`` as Hydra names a run's (``-1``, ``-2``... when taken)."""


def check(cfg: PlanConfig) -> PlanConfig:
    """One-line errors for settings no search can use."""
    if cfg.global_batch is not None and (not isinstance(cfg.global_batch, int) or cfg.global_batch < 1):
        raise ConfigError("plan.global_batch", cfg.global_batch, "allowed: null (the recipe's) or an integer >= 1")
    if not 0 <= cfg.batch_tolerance < 1:
        raise ConfigError("plan.batch_tolerance", cfg.batch_tolerance, "allowed: a number in [0, 1)")
    if not 0 <= cfg.headroom < 1:
        raise ConfigError("plan.headroom", cfg.headroom, "allowed: a number in [0, 1) (share of tile memory)")
    if cfg.search not in SEARCHES:
        raise ConfigError("plan.search", cfg.search, f"allowed: {' | '.join(SEARCHES)}")
    if cfg.rank not in RANKS:
        raise ConfigError("plan.rank", cfg.rank, f"allowed: {' | '.join(RANKS)}")
    if cfg.sampler not in SAMPLERS:
        raise ConfigError("plan.sampler", cfg.sampler, f"allowed: {' | '.join(SAMPLERS)}")
    for key in ("top_k", "trials", "exhaustive_limit"):
        if getattr(cfg, key) < 1:
            raise ConfigError(f"plan.{key}", getattr(cfg, key), "allowed: an integer >= 1")
    if isinstance(cfg.seed, bool) or not isinstance(cfg.seed, int) or not 0 <= cfg.seed < 2 ** 32:
        # the samplers seed NumPy's generator, which takes 0 .. 2**32 - 1 (refused only after the seeds' search)
        raise ConfigError("plan.seed", cfg.seed, "allowed: an integer in [0, 4294967295]")
    if cfg.workers < 0:
        raise ConfigError("plan.workers", cfg.workers, "allowed: 0 (one per CPU core) or an integer >= 1")
    return cfg


def run_folder(out_dir: Optional[str], now: Optional[object] = None) -> Path:
    """The folder a plan writes into: ``out_dir``, or a fresh ``outputs/YYYY-MM-DD/HH-MM-SS`` (Hydra's run-folder
    pattern, so plans sit beside runs), suffixed ``-1``, ``-2``... when two plans start in the same second."""
    import datetime

    if out_dir:
        return Path(out_dir)
    t = now or datetime.datetime.now()
    base = Path("outputs") / t.strftime("%Y-%m-%d") / t.strftime("%H-%M-%S")
    path, k = base, 0
    while path.exists():
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    return path


def documented_keys() -> List[tuple]:
    """(``plan.KEY``, default, first sentence of its documentation) for each setting, in the order of
    :class:`PlanConfig` (for ``python -m ipuexp.plan --help``)."""
    import ast
    import dataclasses
    import inspect
    import re

    tree = ast.parse(inspect.getsource(PlanConfig))
    docs = {}
    body = tree.body[0].body
    for node, after in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            text = " ".join(str(after.value.value).split()).replace("``", "")
            first = re.split(r"(?<=[a-z0-9)%])\. (?=[A-Z])", text)[0]
            docs[node.target.id] = first if first.endswith(".") else first + "."
    out = []
    for f in dataclasses.fields(PlanConfig):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        shown = "null" if default is None else ("true" if default is True else "false" if default is False
                                                 else f"{default}".replace(" ", "").replace("'", ""))
        out.append((f"plan.{f.name}", shown, docs.get(f.name, "")))
    return out

