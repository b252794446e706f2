"""A sweep's tally: every batch recorded whatever launcher ran it, one summary at the end, failed points quiet."""
from __future__ import annotations

from typing import Any, List, Sequence

import pytest
from hydra.core.utils import JobReturn, JobStatus

from ipuexp.runner import tally as tally_mod
from ipuexp.runner.errors import DoesNotFit, JobFailedError, SweepReturn


def _ret(overrides: List[str], value: Any, ok: bool = True) -> JobReturn:
    ret = JobReturn(overrides=overrides, status=JobStatus.COMPLETED if ok else JobStatus.FAILED)
    ret.return_value = value
    return ret


class ForeignLauncher:
    """A launcher that is not ipuexp's (no ``tally``): plain JobReturns, a failed one among them."""

    def __init__(self) -> None:
        self.batches: List[int] = []

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> List[JobReturn]:
        self.batches.append(len(job_overrides))
        rets = []
        for pos, overrides in enumerate(job_overrides):
            a = int(overrides[0].split("=")[1])
            rets.append(_ret(list(overrides), DoesNotFit("does not fit in IPU memory"), ok=False) if a == 2 else
                        _ret(list(overrides), {"a": a}))
        return rets


def test_every_batch_is_tallied_and_summarised_once(capsys: pytest.CaptureFixture) -> None:
    t = tally_mod.Tally(total=4)
    launcher = tally_mod.Tallied(ForeignLauncher(), t)
    first = launcher.launch([["a=0"], ["a=1"]], initial_job_idx=0)
    second = launcher.launch([["a=2"], ["a=3"]], initial_job_idx=2)
    assert [o.idx for o in t.outcomes] == [0, 1, 2, 3] and t.done == 4
    assert [o.status for o in t.outcomes] == ["done", "done", "out of memory", "done"]
    assert t.first_failure() is None  # out of memory is an outcome, not a failure
    # The failed trial raises its own error without Hydra's "Error executing job" line (stderr).
    assert all(isinstance(r, SweepReturn) for r in first + second)
    with pytest.raises(DoesNotFit):
        second[0].return_value
    assert "Error executing job" not in capsys.readouterr().err
    t.print("Sweep s")
    t.print("Sweep s")  # once
    out = capsys.readouterr().out
    assert out.count("Sweep s: 3 done, 0 failed, 1 out of memory") == 1
    assert "4 jobs in" in out  # the wall time, which a foreign launcher does not report itself


class InterruptedLauncher:
    """Like ipuexp's launcher on Ctrl-C: its batch takes a while, adds what finished and prints the summary from
    inside the batch, then raises."""

    def __init__(self, tally: tally_mod.Tally) -> None:
        self.tally = tally

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> List[JobReturn]:
        import time

        start = time.perf_counter()
        while time.perf_counter() - start < 0.3:  # the batch's jobs run a while
            time.sleep(0.05)
        tally_mod.report([_ret(list(o), {"a": 1}) for o in job_overrides], initial_job_idx, self.tally, True,
                         "Interrupted sweep s", ends_sweep=True)
        raise KeyboardInterrupt


def test_an_interrupted_batch_counts_its_time_in_the_summary(capsys: pytest.CaptureFixture) -> None:
    import re

    t = tally_mod.Tally(total=3)
    launcher = tally_mod.Tallied(InterruptedLauncher(t), t)
    with pytest.raises(KeyboardInterrupt):
        launcher.launch([["a=0"], ["a=1"], ["a=2"]], initial_job_idx=0)
    seconds = float(re.search(r"3 jobs in ([0-9.]+) s", capsys.readouterr().out).group(1))
    assert seconds >= 0.3  # not "0.0 s": the time the batch ran before the interrupt
    assert t.batch_started is None and t.wall_s >= 0.3


def test_first_failure_and_summary_switch(capsys: pytest.CaptureFixture) -> None:
    t = tally_mod.Tally(total=2, show=False)
    err = JobFailedError("ValueError: bad", "ValueError")
    t.add([_ret(["a=0"], {"a": 0}), _ret(["a=1"], err, ok=False)], initial_job_idx=0)
    assert t.first_failure() is err
    t.print("Sweep s")
    assert capsys.readouterr().out == ""  # hydra.launcher.summary=false


def test_progress_counts_over_the_sweep() -> None:
    """A launcher's progress lines number points over the whole sweep and name them by what varies."""
    t = tally_mod.Tally(total=4)
    t.add([_ret(["a=0", "b=x"], {"a": 0}), _ret(["a=1", "b=x"], {"a": 1})], initial_job_idx=0)
    progress = tally_mod.Progress([["a=2", "b=x"], ["a=3", "b=x"]], t)
    assert progress.line(2, _ret(["a=2", "b=x"], {"a": 2})) == "[3/4] #2 done (a=2)"
    alone = tally_mod.Progress([["a=0", "b=x"]], None)  # a one-point sweep: all its overrides name it
    assert alone.line(0, _ret(["a=0", "b=x"], None)) == "[1/1] #0 done (a=0 b=x)"


def test_sweep_return_keeps_a_completed_value() -> None:
    ret = SweepReturn.of(_ret(["a=0"], 1.5))
    assert ret.return_value == 1.5 and SweepReturn.of(ret) is ret


def test_a_finished_job_the_sweeper_refused_is_listed_as_failed() -> None:
    tally = tally_mod.Tally(total=2, show=False)
    tally.add([_ret(["a=1"], (1, 2)), _ret(["a=2"], 3.0)], initial_job_idx=0)
    tally.refuse(0, "Return value must be float-castable. Got '(1, 2)'.")
    assert [(o.status, o.error) for o in tally.outcomes] == [
        ("failed", "Return value must be float-castable. Got '(1, 2)'."), ("done", "")]
