"""A sweep's driver as ``python -m ipuexp`` runs one in its own process, with three jobs: one that finishes with a
result and its files, one that fails, one interrupted; with or without the recorder.

    python recorder_job.py DB_URI SWEEP_DIR recorder|direct|gone

``gone``: the driver is killed outright (SIGKILL) after the first job, with the recorder.
"""
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from tracking_fixtures import sample_result  # noqa: E402


def main(uri: str, sweep_dir: str, mode: str) -> None:
    from omegaconf import open_dict

    from ipuexp.config.compose import compose_config
    from ipuexp.tracking import JobTracking, recorder, recorder_loop, track_job
    from ipuexp.tracking.hydra_callback import SweepTracking
    from ipuexp.tracking.sweep import SweepContext

    base = [f"tracking.uri={uri}", "tracking.experiment=test"]
    task = ["options.gradient_accumulation=16,32,64"]
    config = compose_config(base, return_hydra_config=True)
    with open_dict(config):
        config.hydra.mode = "MULTIRUN"
        config.hydra.sweep.dir = sweep_dir
        config.hydra.overrides.task = task
    if mode != "direct":
        recorder.allow()  # as python -m ipuexp does
    callback = SweepTracking()
    callback.on_multirun_start(config)
    recorder.start_aside(recorder_loop.serve)  # as ipuexp's launcher does before it runs the jobs in its process
    assert (recorder.for_sweep(Path(sweep_dir)) is not None) == (mode != "direct")
    for i, (ga, outcome) in enumerate([(16, "done"), (32, "error"), (64, "interrupt")]):
        job = [f"options.gradient_accumulation={ga}"]
        ctx = SweepContext(dir=Path(sweep_dir), job_overrides=job, swept_keys=["options.gradient_accumulation"],
                           sweep_overrides=task)
        folder = Path(sweep_dir) / str(i)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            with track_job(JobTracking.of(compose_config(base + job), sweep=ctx)) as run:
                if outcome == "error":
                    raise ValueError("boom")
                if outcome == "interrupt":
                    raise KeyboardInterrupt
                result = sample_result(throughput=100.0 * ga)
                for name in ("result.json", "config.yaml", "pipeline.png"):
                    (folder / name).write_text(name)
                    result.artifacts[name] = str(folder / name)
                run.log_step_metrics(1, {"loss": 2.5})
                run.log_result(result)
        except (ValueError, KeyboardInterrupt):
            pass
        if mode == "gone":
            os.kill(os.getpid(), signal.SIGKILL)
    callback.on_multirun_end(config)


if __name__ == "__main__":
    main(*sys.argv[1:])
