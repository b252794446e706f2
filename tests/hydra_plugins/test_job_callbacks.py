"""Callbacks and returns as Hydra's own launchers give them, under ``hydra/launcher=ipuexp`` and ``ray``: a callback's
``on_job_start`` receives the task function itself (the launcher times it from around it), and a failed job's
``JobReturn.return_value`` raises the task's own exception type, as ipuexp's one-line JobFailedError."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest
from hydra.experimental.callback import Callback

from ipuexp.runner.errors import JobFailedError

SEEN: List[Any] = []


class Recorder(Callback):
    def on_job_start(self, config: Any, *, task_function: Any, **kwargs: Any) -> None:
        SEEN.append(task_function)


def test_in_process_jobs_give_callbacks_the_task_and_raise_its_error(tmp_path, hydra_restore_singletons):
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    def task(cfg: Any) -> float:
        return 1 / cfg.a

    SEEN.clear()
    (tmp_path / "config.yaml").write_text("a: 1\n")
    # Hydra's basic sweeper reads each JobReturn's return_value: the failed one raises
    with initialize_config_dir(config_dir=str(tmp_path), version_base=None, job_name="app"), \
            pytest.raises(ZeroDivisionError) as raised:
        GlobalHydra.instance().hydra.multirun(
            config_name="config", task_function=task, with_log_configuration=False, overrides=[
                "hydra/launcher=ipuexp", "hydra/sweeper=basic", "hydra.mode=MULTIRUN", "hydra.launcher.summary=false",
                f"hydra.sweep.dir={tmp_path / 'sweep'}", f"+hydra.callbacks.rec._target_={__name__}.Recorder",
                "a=1,0"])
    assert SEEN == [task, task]
    assert isinstance(raised.value, JobFailedError) and str(raised.value) == "ZeroDivisionError: division by zero"


APP = """import os

import hydra
from hydra.experimental.callback import Callback


class Recorder(Callback):
    def on_job_start(self, config, *, task_function, **kwargs):
        with open(os.path.join(config.hydra.runtime.output_dir, "task.txt"), "w") as f:
            f.write(f"{type(task_function).__name__} {task_function.__name__}")


@hydra.main(version_base=None, config_path=None, config_name=None)
def main(cfg):
    return 1 / cfg.a


if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
def test_jobs_on_ray_give_callbacks_the_task_and_raise_its_error(tmp_path: Path, monkeypatch) -> None:
    """The callback runs in the Ray worker (it notes what it got in the job's folder); the failed job's error comes
    back to the driver as the task's own type (HYDRA_FULL_ERROR shows its type)."""
    (tmp_path / "app.py").write_text(APP)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    proc = subprocess.run([sys.executable, "app.py", "-m", "hydra/launcher=ray", "hydra.sweep.dir=sweep",
                           "+hydra.callbacks.rec._target_=__main__.Recorder", "+a=1,0"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == "ZeroDivisionError: ZeroDivisionError: division by zero"
    for job in ("0", "1"):
        assert (tmp_path / "sweep" / job / "task.txt").read_text() == "function main"
