"""The end-of-sweep table: classification, order, best fitting point."""
from __future__ import annotations

from typing import Any, List, Optional

import pytest
from hydra.core.utils import JobReturn, JobStatus

from ipuexp.result import IPUMemory, MemoryFigures, ModelFigures, Result, Skipped, ThroughputFigures
from ipuexp.runner import summary
from ipuexp.runner.errors import JobFailedError


def _result(tput: Optional[float], fits: Optional[bool], used: int = 500) -> Result:
    model = ModelFigures(name="bert", parameters=1, flops_per_sample=1.0, fwd_flops_per_sample=0.5,
                         bwd_flops_per_sample=0.5, num_stages=1, ipus_per_replica=1, capture_seconds=0.1)
    memory = MemoryFigures(fits=bool(fits), ipus=[IPUMemory(ipu=0, capacity_bytes=1000, total_bytes=used,
                                                            always_live_bytes=0, not_always_live_bytes=0,
                                                            max_tile_bytes=0, max_tile=0, fits=bool(fits))])
    throughput = ThroughputFigures(samples_per_s=tput, step_time_s=2.0, bubble_fraction=0.1,
                                   utilisation=[0.9]) if tput is not None else None
    return Result(recipe="r", model=model, fits=fits, memory=memory, throughput=throughput)


def _ret(overrides: List[str], value: Any, ok: bool = True) -> JobReturn:
    ret = JobReturn(overrides=overrides, status=JobStatus.COMPLETED if ok else JobStatus.FAILED)
    ret.return_value = value
    return ret


@pytest.fixture
def outcomes() -> List[summary.Outcome]:
    rets = [
        _ret(["+recipe=r", "options.gradient_accumulation=1"], _result(100.0, True)),
        _ret(["+recipe=r", "options.gradient_accumulation=2"], _result(300.0, False, used=1500)),
        _ret(["+recipe=r", "options.gradient_accumulation=3"], JobFailedError("ValueError: bad", "ValueError",
                                                                               log_file="/x/3/job.log"), ok=False),
        _ret(["+recipe=r", "options.gradient_accumulation=4"], _result(200.0, True)),
    ]
    return [summary.classify(i, r) for i, r in enumerate(rets)]


def test_classify(outcomes: List[summary.Outcome]) -> None:
    assert [o.status for o in outcomes] == [summary.DONE, summary.OOM, summary.FAILED, summary.DONE]
    assert outcomes[2].error == "ValueError: bad" and outcomes[2].log_file == "/x/3/job.log"
    assert summary.counts(outcomes) == {summary.DONE: 2, summary.FAILED: 1, summary.OOM: 1, summary.SKIPPED: 0}


def test_order_and_best(outcomes: List[summary.Outcome]) -> None:
    # Highest throughput first (an out-of-memory point keeps its place by throughput), failures last.
    assert [o.idx for o in summary.ordered(outcomes)] == [1, 3, 0, 2]
    best = summary.best(outcomes)  # the fastest point that fits, not the fastest point
    assert best is not None and best.idx == 3


def test_varying_keys(outcomes: List[summary.Outcome]) -> None:
    assert summary.varying(outcomes) == ["options.gradient_accumulation"]


def test_print(outcomes: List[summary.Outcome], capsys: pytest.CaptureFixture) -> None:
    summary.print_summary(outcomes, title="Sweep s")
    out = capsys.readouterr().out
    assert "Sweep s: 2 done, 1 failed, 1 out of memory" in out
    flat = " ".join(out.split())  # lines break between words to fit the terminal
    assert "Best fitting point: #3 +recipe=r options.gradient_accumulation=4 (200.0 samples/s)" in flat
    assert "#2 failed: ValueError: bad (traceback in /x/3/job.log)" in flat
    lines = out.splitlines()
    rule = next(n for n, ln in enumerate(lines) if ln.startswith("─"))
    assert [ln.split()[0] for ln in lines[rule + 1:rule + 5]] == ["1", "3", "0", "2"]  # rows in throughput order
    assert "150%" in out and "out of memory" in out


def test_plain_return_values(capsys: pytest.CaptureFixture) -> None:
    """Any Hydra app's sweep gets a table too: its return values instead of throughput."""
    outs = [summary.classify(i, _ret([f"a={i}"], {"a": i})) for i in range(2)]
    summary.print_summary(outs)
    out = capsys.readouterr().out
    assert "2 done, 0 failed, 0 out of memory" in out and "{'a': 1}" in out and "samples/s" not in out


def test_skipped_points_say_so(outcomes: List[summary.Outcome], capsys: pytest.CaptureFixture) -> None:
    """A point whose configuration had run before (a resumed sweep) is neither done nor failed."""
    skipped = summary.classify(4, _ret(["+recipe=r", "options.gradient_accumulation=5"], Skipped()))
    assert skipped.status == summary.SKIPPED
    assert summary.line(skipped) == "skipped: already has a FINISHED run in MLflow"
    assert [o.idx for o in summary.ordered(outcomes + [skipped])] == [1, 3, 0, 4, 2]  # before the failures
    summary.print_summary(outcomes + [skipped], title="Sweep s")
    assert "Sweep s: 2 done, 1 failed, 1 out of memory, 1 skipped" in capsys.readouterr().out


def test_long_decimals_are_rounded_for_the_console() -> None:
    """An optimisation sweeper's float samples show 4 significant digits; other values as given."""
    assert summary.shown("0.3497859536643815") == "0.3498"
    assert summary.shown("1.0e-05") == "1.0e-05" and summary.shown("0.35") == "0.35"
    assert summary.shown("1024") == "1024" and summary.shown("interleaved") == "interleaved"
    assert summary.shown("[0.25,0.3333333333]") == "[0.25,0.3333333333]"  # not a number: as given
    o = summary.Outcome(3, ["+recipe=r", "options.available_memory_proportion=0.3497859536643815"], summary.DONE,
                        result=_result(3539.0, True))
    assert summary.best_line(o, "as in s/optimization_results.yaml") == (
        "Best fitting point: #3 +recipe=r options.available_memory_proportion=0.3498 (3,539.0 samples/s; as in "
        "s/optimization_results.yaml)")
    # the line wraps to the terminal after Hydra's log prefix: its words, whatever the width
    assert " ".join(summary.progress(4, 8, o, ["options.available_memory_proportion"]).split()) == \
        "[4/8] #3 done, 3,539.0 samples/s (options.available_memory_proportion=0.3498)"


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_table_fits_the_terminal_and_keeps_every_figure(columns: int, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture) -> None:
    """Within ``COLUMNS``: long keys and swept values fold, no figure or status is cut or ellipsised."""
    monkeypatch.setenv("COLUMNS", str(columns))
    keys = ["options.available_memory_proportion", "options.pipeline.schedule", "options.gradient_accumulation"]
    outs = []
    for i in range(6):
        values = [f"{0.1 + i * 0.0529:.16f}", ["grouped", "interleaved", "sequential"][i % 3], str(512 * 2 ** i)]
        ret = _ret(["+recipe=r"] + [f"{k}={v}" for k, v in zip(keys, values)],
                   _result(1000.0 + 1234.5 * i, i != 4, used=900 if i != 4 else 1500))
        outs.append(summary.classify(i, ret))
    summary.print_summary(outs, title="Sweep s")
    lines = capsys.readouterr().out.splitlines()
    # Every line within the width but the best point's (whole, to be copied; a failure's would be too).
    assert all(len(ln) <= columns for ln in lines)
    assert "…" not in "\n".join(lines)
    table = any(ln.startswith("─") for ln in lines)
    assert table == (columns >= 80)  # narrower than its narrowest form: a record per point instead
    rows = " ".join(lines)
    for o in outs:  # each row's figures whole
        assert f"{o.samples_per_s:,.1f}" in rows
    assert "out of memory" in rows and "150%" in rows
    assert "0.2058" in rows  # a swept value, rounded, not folded
    for i in range(6):  # every swept number whole (GA 16384 not split), every memory figure with its %
        assert f" {512 * 2 ** i} " in f" {rows} " and "90%" in rows
    assert "\x1b[" not in "\n".join(lines)  # a pipe gets plain text


def test_the_sweepers_best_point_is_the_one_shown(outcomes: List[summary.Outcome],
                                                  capsys: pytest.CaptureFixture) -> None:
    """An optimisation sweeper names its best trial (here a slower one, as a minimising study would)."""
    summary.print_summary(outcomes, title="Sweep s", top=outcomes[0], source="the study's best")
    out = capsys.readouterr().out
    assert out.count("Best fitting point") == 1
    assert "Best fitting point: #0 +recipe=r options.gradient_accumulation=1 (100.0 samples/s; the study's best)" in \
        " ".join(out.split())


def test_timing_without_the_launchers_figures() -> None:
    """A launcher that does not say where the time went (Hydra's basic launcher) still gets the wall time."""
    assert summary.timing_line(2.04, None, [], [None, None]) == "2 jobs in 2.0 s"
    assert summary.timing_line(2.04, 1, [], []) == ""


def test_packed_points_compete_by_their_sequences() -> None:
    """A packed point's samples are packs: it ranks by sequences/s against unpacked points' samples/s."""
    packed = _result(150.0, True)
    packed.throughput.sequences_per_s = 300.0
    rets = [_ret(["+recipe=r", "data.packing.max_sequences_per_pack=1"], _result(200.0, True)),
            _ret(["+recipe=r", "data.packing.max_sequences_per_pack=3"], packed)]
    outs = [summary.classify(i, r) for i, r in enumerate(rets)]
    top = summary.best(outs)
    assert top is outs[1] and [o.idx for o in summary.ordered(outs)] == [1, 0]
    assert summary.best_line(top).endswith("(300.0 sequences/s, 150.0 packs/s)")
