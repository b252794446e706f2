"""One of many processes writing runs into one SQLite store at once (see test_tracking_concurrency.py).

Usage: concurrent_writer.py DB_URI SWEEP_DIR WORKER RUNS STEPS GO_FILE. Prints the lock retries it needed.
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from tracking_fixtures import sample_result  # noqa: E402

from ipuexp.config.compose import compose_config as compose  # noqa: E402
from ipuexp.tracking import JobTracking, SweepContext, store, track_job  # noqa: E402


def main() -> None:
    uri, sweep_dir, worker, runs, steps, go = sys.argv[1:]
    worker, runs, steps = int(worker), int(runs), int(steps)
    configs = [compose([f"tracking.uri={uri}", "tracking.experiment=concurrent",
                        f"options.gradient_accumulation={worker * runs + k + 1}"]) for k in range(runs)]
    while not Path(go).exists():  # start together
        time.sleep(0.01)
    for k, cfg in enumerate(configs):
        ga = cfg.options.gradient_accumulation
        sweep = SweepContext(dir=Path(sweep_dir), job_overrides=[f"options.gradient_accumulation={ga}"],
                             swept_keys=["options.gradient_accumulation"])
        with track_job(JobTracking.of(cfg, sweep=sweep)) as run:
            for step in range(1, steps + 1):
                run.log_step_metrics(step, {"loss": 1.0 / step, "accuracy": step / steps})
                run.flush()  # one transaction per step: as much contention as possible
            run.log_result(sample_result(throughput=float(ga)))
    print(store.busy_retries)


if __name__ == "__main__":
    main()
