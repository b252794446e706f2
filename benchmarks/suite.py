"""What a user waits on, each row timed in fresh processes (median of ``--repeat``), against its target and the
baseline file (``benchmarks/baseline.json``: the previous release on the same machine, measured side by side).

    python benchmarks/suite.py                          # every row; exit 1 when a row is >20% over its baseline
    python benchmarks/suite.py --rows help run          # some rows
    python benchmarks/suite.py --against /tmp/prev --write-baseline   # remeasure the baseline side by side:
                                                        # each run of this tree alternates with one of the other

A row runs in a new temporary folder (its MLflow store warmed by one untimed tracked run where it tracks); the
captures cache is the user's, warm after the first run, as a user's is.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
BASELINE = Path(__file__).with_name("baseline.json")
TOLERANCE = 1.20
"""A row more than 20% over its baseline fails the suite."""
MEASURED = """id,overrides,measured_samples_per_s
vit_b16_gen,+calibration_run=vit_b16_finetune_bow_pod16_pytorch,7319
gpt2_medium_wt103,+calibration_run=gpt2_medium_wikitext103_sl1024_mk2_pod16_optimum,102
"""
SWEEP = ["-m", "+recipe=bert_large", "options.gradient_accumulation=256,1024,2048",
         "options.io.num_io_tiles=0,32,64"]
SWEEP_JOBS = 9


@dataclass(frozen=True)
class Row:
    name: str
    what: str
    target: float
    unit: str
    measure: Callable[[Path, Dict[str, str]], float]


def _run(args: Sequence[str], cwd: Path, env: Dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc


def _timed(args: Sequence[str], warm: bool = False) -> Callable[[Path, Dict[str, str]], float]:
    def measure(cwd: Path, env: Dict[str, str]) -> float:
        if warm:  # the store exists, as it does from a user's second run on
            _run(args, cwd, env)
        t = time.perf_counter()
        _run(args, cwd, env)
        return time.perf_counter() - t
    return measure


def _calibrate(cwd: Path, env: Dict[str, str]) -> float:
    (cwd / "measured.csv").write_text(MEASURED)
    return _timed(["-m", "ipuexp.calibrate", "measured.csv", "--name", "published2", "--recipe", "vit_b16",
                   "--recipe", "bert_large"])(cwd, env)


def _evaluate_ms(cwd: Path, env: Dict[str, str]) -> float:
    out = _run([str(ROOT / "benchmarks" / "bench_evaluate.py")], cwd, env, check=False).stdout
    found = re.search(r"median ([0-9.]+) ms", out)
    if not found:
        raise RuntimeError(f"bench_evaluate.py printed no median: {out[-1000:]}")
    return float(found.group(1))


def _mlflow_ms(cwd: Path, env: Dict[str, str]) -> float:
    """MLflow's share of one job of the README's 9-point sweep: (tracked - untracked) / jobs."""
    _run(["-m", "ipuexp", *SWEEP], cwd, env)  # warm store
    t = time.perf_counter()
    _run(["-m", "ipuexp", *SWEEP], cwd, env)
    on = time.perf_counter() - t
    t = time.perf_counter()
    _run(["-m", "ipuexp", *SWEEP, "tracking.enabled=false"], cwd, env)
    off = time.perf_counter() - t
    return max(0.0, on - off) / SWEEP_JOBS * 1e3


ROWS: List[Row] = [
    Row("help", "python -m ipuexp --help", 0.5, "s", _timed(["-m", "ipuexp", "--help"])),
    Row("run", "python -m ipuexp +recipe=bert_large tracking.enabled=false", 1.5, "s",
        _timed(["-m", "ipuexp", "+recipe=bert_large", "tracking.enabled=false"])),
    Row("run_tracked", "python -m ipuexp +recipe=bert_large (store exists)", 3.0, "s",
        _timed(["-m", "ipuexp", "+recipe=bert_large"], warm=True)),
    Row("sweep", "README 9-point sweep, tracking off", 3.0, "s",
        _timed(["-m", "ipuexp", *SWEEP, "tracking.enabled=false"], warm=True)),
    Row("sweep_tracked", "README 9-point sweep (store exists)", 4.0, "s", _timed(["-m", "ipuexp", *SWEEP], warm=True)),
    Row("sweep_mlflow", "MLflow's share of a job, README 9-point sweep", 50.0, "ms", _mlflow_ms),
    Row("hf_run", "python -m ipuexp model=hf model.hf.config=bert-base-uncased (warm capture)", 5.0, "s",
        _timed(["-m", "ipuexp", "model=hf", "model.hf.config=bert-base-uncased", "tracking.enabled=false"],
               warm=True)),
    Row("evaluate", "benchmarks/bench_evaluate.py median", 1.0, "ms", _evaluate_ms),
    Row("validate", "python -m ipuexp.validate", 15.0, "s", _timed(["-m", "ipuexp.validate"])),
    Row("calibrate", "python -m ipuexp.calibrate (README example)", 15.0, "s", _calibrate),
    Row("plan", "python -m ipuexp.plan +recipe=bert_large system=pod64", 15.0, "s",
        _timed(["-m", "ipuexp.plan", "+recipe=bert_large", "system=pod64"])),
]


def _env(tree: Optional[Path]) -> Dict[str, str]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _once(row: Row, tree: Optional[Path]) -> float:
    cwd = Path(tempfile.mkdtemp(prefix=f"ipuexp-suite-{row.name}-"))
    try:
        return row.measure(cwd, _env(tree))
    finally:
        shutil.rmtree(cwd, ignore_errors=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", choices=[r.name for r in ROWS], help="rows to run (default: all)")
    ap.add_argument("--repeat", type=int, default=3, help="fresh runs per row; the median counts (default 3)")
    ap.add_argument("--against", type=Path, help="another checkout (e.g. a git worktree of the previous release), "
                                                 "run alternately with this one")
    ap.add_argument("--write-baseline", action="store_true",
                    help="write the medians of --against (else of this tree) to the baseline file")
    ap.add_argument("--baseline", type=Path, default=BASELINE)
    args = ap.parse_args(argv)

    rows = [r for r in ROWS if not args.rows or r.name in args.rows]
    baseline = json.loads(args.baseline.read_text()).get("rows", {}) if args.baseline.exists() else {}
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} cores, load average {load:.1f} at the start; median of {args.repeat}")
    head = f"{'row':<13} {'now':>9} {'target':>8} {'baseline':>9} {'ratio':>6}"
    print(head + ("  previous (--against)" if args.against else "") + "  what")
    mine: Dict[str, float] = {}
    theirs: Dict[str, float] = {}
    failed = False
    for row in rows:
        now, other = [], []
        for _ in range(args.repeat):
            now.append(_once(row, None))
            if args.against:
                other.append(_once(row, args.against))
        mine[row.name] = statistics.median(now)
        if other:
            theirs[row.name] = statistics.median(other)
        base = baseline.get(row.name)
        ratio = mine[row.name] / base if base else None
        over = ratio is not None and ratio > TOLERANCE
        failed |= over
        fmt = (lambda v: f"{v:.2f} {row.unit}" if v is not None else "-")
        line = (f"{row.name:<13} {fmt(mine[row.name]):>9} {fmt(row.target):>8} {fmt(base):>9} "
                f"{'-' if ratio is None else f'x{ratio:.2f}':>6}")
        if args.against:
            line += f"  {fmt(theirs.get(row.name)):>20}"
        print(line + f"  {row.what}" + ("  OVER BASELINE" if over else ""), flush=True)
    if args.write_baseline:
        rows_out = {**baseline, **(theirs if args.against else mine)}
        args.baseline.write_text(json.dumps({
            "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{os.cpu_count()} cores, load average {load:.1f}",
            "tree": str(args.against) if args.against else "this tree",
            "rows": rows_out}, indent=2) + "\n")
        print(f"wrote {args.baseline}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
