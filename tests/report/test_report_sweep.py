import csv
from pathlib import Path

import pytest
from rich.console import Console

from ipuexp.commands.report import main
from ipuexp.report.sweep import Point, ReportError, Sweep, pareto_front, print_table, swept_options
from ipuexp.report.sweep_load import load

# (gradient accumulation, IO tiles, samples/s, bytes on each of 2 IPUs, fits)
SWEEP = [
    (256, 0, 700.0, [500_000_000, 420_000_000], True),
    (256, 32, 760.0, [560_000_000, 430_000_000], True),
    (1024, 0, 900.0, [520_000_000, 600_000_000], True),     # peak on IPU 1
    (1024, 32, 980.0, [640_000_000, 610_000_000], True),
    (2048, 0, 950.0, [700_000_000, 690_000_000], True),     # slower than (1024, 32) with more memory: dominated
    (2048, 32, 1100.0, [990_000_000, 700_000_000], False),  # fastest, but does not fit
]


def _p(name, tput, mem, fits=True):
    return Point(run_id=name, name=name, params={}, throughput=tput, peak_memory=mem, fits=fits)


def test_pareto_front_keeps_fitting_points_nobody_beats_on_both_axes():
    pts = [_p("a", 100, 10), _p("b", 90, 12), _p("c", 150, 20), _p("d", 150, 25), _p("e", 300, 30, fits=False),
           _p("f", 120, 10), _p("g", 200, 40), _p("h", None, 5)]
    assert [p.name for p in pareto_front(pts)] == ["f", "c", "g"]
    assert pareto_front([]) == []


def _run(name, params, sweep_id, tput=1.0, mem=1.0):
    return Point(name, name, params, tput, mem, True, sweep_id=sweep_id)


def test_swept_options_are_the_keys_that_vary_within_a_sweep():
    pts = [_run("1", {"a": "1", "b": "x", "tracking.uri": "u1", "c": "5"}, "s1"),
           _run("2", {"a": "2", "b": "x", "tracking.uri": "u2", "c": "6"}, "s1")]
    assert swept_options(pts) == ["a", "c"]
    # A run of its own sets a key no sweep varies (an imported ipu_config.json), and another run of its own
    # has other values: neither is a sweep. A key only one run of a sweep has is not swept either.
    pts += [_run("3", {"a": "7", "model.hf.ipu_config": "/data/ipu_config.json"}, None),
            _run("4", {"a": "8", "b": "y"}, None),
            _run("5", {"a": "3", "b": "x", "c": "5", "d": "only here"}, "s2"),
            _run("6", {"a": "4", "b": "x", "c": "5"}, "s2")]
    assert swept_options(pts) == ["a", "c"]
    # A key constant within each sweep but different between two sweeps is not swept.
    assert swept_options(pts[4:]) == ["a"]
    assert swept_options(pts[2:4]) == []


def test_table_fits_the_terminal_and_keeps_every_figure():
    amp = ["0.2", "0.3", "[0.2, 0.4, 0.4, 0.4]", "[0.15, 0.25, 0.25, 0.25]"]
    pts = [_run(f"r{n}", {"options.gradient_accumulation": str(ga), "options.device_iterations": str(di),
                          "data.micro_batch_size": "16", "options.available_memory_proportion": a,
                          "options.io.num_io_tiles": "32"}, "s1", tput=1000.0 + 37.3 * n, mem=(700 + 13 * n) * 2**20)
           for n, (ga, di, a) in enumerate((ga, di, a) for ga in (512, 2048) for di in (1, 16) for a in amp)]
    pts += [_run("single", {"options.gradient_accumulation": "100"}, None, tput=999.9, mem=2**30)]
    sweep = Sweep("bert_large", pts, options=swept_options(pts))
    assert sweep.options == ["options.gradient_accumulation", "options.device_iterations",
                             "options.available_memory_proportion"]
    for width in (120, 80, 64):
        console = Console(record=True, width=width)
        print_table(sweep, console)
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= width
        for p in pts:
            assert f"{p.throughput:,.1f}" in text and f"{p.peak_memory / 2**20:,.1f} MiB" in text
    console = Console(record=True, width=120)
    print_table(sweep, console)
    text = console.export_text()
    assert "[0.15, 0.25 x3]" in text and "accumulation" in text and "GA:" not in text  # whole headers
    narrow = Console(record=True, width=68)  # the sweep column beside: a run of its own is among them
    print_table(sweep, narrow)
    assert "GA: gradient accumulation" in narrow.export_text()  # initials, and what they stand for
    assert "1,024.0 MiB" in text  # the 1 GiB run reads in the column's unit
    front = pareto_front(pts)
    rows = {line.split()[-1]: line for line in text.splitlines() if line.strip() and line.split()[-1].isdigit()}
    assert sorted(rows, key=int) == [str(n) for n in range(1, len(front) + 1)]  # the Pareto points, numbered


def test_an_88_row_sweep_at_80_columns_to_a_pipe_is_a_line_per_row(monkeypatch, capsys):
    """88 configurations, 80 columns, output to a pipe: a line per configuration, every line within 80 characters,
    every figure and swept value whole (GA 2048 is not split), each header word whole and no two alike."""
    monkeypatch.setenv("COLUMNS", "80")
    amp = ["0.2", "[0.2, 0.4, 0.4, 0.4]"]
    pts = [_run(f"r{n}", {"options.gradient_accumulation": str(ga), "options.device_iterations": str(di),
                          "data.micro_batch_size": str(mbs), "options.available_memory_proportion": a,
                          "model.mode": mode}, "s1", tput=1000.0 + 37.3 * n, mem=(700 + 3 * n) * 2**20)
           for n, (ga, di, mbs, a, mode) in enumerate(
               (ga, di, mbs, a, mode) for ga in (16, 64, 512, 2048) for di in (1, 16) for mbs in (1, 8, 16)
               for a in amp for mode in ("pipeline", "all"))][:88]
    pts += [_run(f"x{n}", {"options.gradient_accumulation": "100", "model.mode": "none"}, "s1", tput=900.0 - n,
                 mem=2**30) for n in range(88 - len(pts))]
    print_table(Sweep("bert_large", pts, options=swept_options(pts)))
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "\x1b[" not in out and max(len(line) for line in lines) <= 80
    rule = next(n for n, line in enumerate(lines) if line.startswith("─"))
    legend = " ".join(lines[rule + 1 + len(pts):])  # one line per configuration, then what initials stand for
    assert legend.startswith("GA: gradient accumulation")
    last = lines[rule - 1].split()  # each column's last header line
    assert len(last) == 9 and len(set(last)) == 9  # no two columns headed alike
    headers = " ".join(line for line in lines[:rule] if "swept:" not in line and "," not in line).split()
    words = set(headers + legend.replace(";", " ").replace(":", " ").split())
    assert {"accumulation", "iterations", "batch", "size", "proportion", "mode", "memory"} <= words
    for p, line in zip(sorted(pts, key=lambda p: -p.throughput), lines[rule + 1:]):
        assert f"{p.throughput:,.1f}" in line and f"{p.peak_memory / 2**20:,.1f} MiB" in line
        assert f" {p.params['options.gradient_accumulation']} " in f" {line} "


def test_runs_read_back_give_the_table_and_the_front(log_sweep, db_uri):
    log_sweep("s1", SWEEP)
    sweep = load(db_uri, "bert_large")
    assert sweep.options == ["options.gradient_accumulation", "options.io.num_io_tiles"]
    assert len(sweep.points) == 6
    by_name = {p.name: p for p in sweep.points}
    p = by_name["gradient_accumulation=1024,num_io_tiles=0"]
    assert p.throughput == 900.0 and p.peak_memory == 600_000_000 and p.fits is True
    assert by_name["gradient_accumulation=2048,num_io_tiles=32"].fits is False
    assert [q.name for q in pareto_front(sweep.points)] == [
        "gradient_accumulation=256,num_io_tiles=0", "gradient_accumulation=256,num_io_tiles=32",
        "gradient_accumulation=1024,num_io_tiles=0", "gradient_accumulation=1024,num_io_tiles=32"]
    assert sweep.capacity == 1472 * 638976
    console = Console(record=True, width=200)
    print_table(sweep, console)
    text = console.export_text()
    assert "1,100.0" in text and "944.1 MiB" in text and "gradient" in text


def test_cli_writes_csv_and_charts(log_sweep, db_uri, tmp_path: Path, capsys):
    log_sweep("s1", SWEEP)
    out = tmp_path / "report"
    assert main(["bert_large", "--uri", db_uri, "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert [float(r["samples_per_s"]) for r in rows] == sorted((s[2] for s in SWEEP), reverse=True)
    top = rows[0]
    assert top["options.gradient_accumulation"] == "2048" and top["fits"] == "False" and top["pareto"] == "False"
    assert sum(r["pareto"] == "True" for r in rows) == 4
    assert float(rows[1]["peak_ipu_memory_bytes"]) == 640_000_000
    import matplotlib.image

    for name in ("throughput_vs_options.gradient_accumulation.png", "throughput_vs_options.io.num_io_tiles.png",
                 "pareto.png"):
        image = matplotlib.image.imread(out / name)
        assert image.shape[0] > 300 and image.shape[1] > 500
        assert image.std() > 0.01  # something is drawn
    assert "Wrote sweep.csv" in capsys.readouterr().out


def test_a_single_runs_own_setting_is_no_swept_key(log_sweep, make_result, db_uri, tmp_path: Path, capsys):
    from ipuexp.config.compose import compose_config
    from ipuexp.tracking import JobTracking, track_job
    from ipuexp.tracking.store import client

    log_sweep("s1", SWEEP)
    cfg = compose_config([f"tracking.uri={db_uri}", "tracking.experiment=bert_large"])
    with track_job(JobTracking.of(cfg)) as run:  # a run of its own, outside any sweep
        run.log_result(make_result(800.0, [600_000_000, 600_000_000], True))
    client(db_uri).log_param(run.run_id, "model.hf.ipu_config", "/data/optimum/ipu_config.json")  # its override
    out = tmp_path / "report"
    assert main(["bert_large", "--uri", db_uri, "--out", str(out)]) == 0
    assert load(db_uri, "bert_large").options == ["options.gradient_accumulation", "options.io.num_io_tiles"]
    assert sorted(p.name for p in out.glob("*.png")) == [
        "pareto.png", "throughput_vs_options.gradient_accumulation.png", "throughput_vs_options.io.num_io_tiles.png"]
    assert "ipu_config" not in capsys.readouterr().out


def test_sweep_selection_latest_and_all(log_sweep, db_uri):
    log_sweep("s1", SWEEP[:4])
    log_sweep("s2", [(4096, 64, 1200.0, [800_000_000, 800_000_000], True),
                     (1024, 32, 990.0, [640_000_000, 610_000_000], True)])  # (1024, 32) measured again
    latest = load(db_uri, "bert_large", "latest")
    assert sorted(p.throughput for p in latest.points) == [990.0, 1200.0]
    everything = load(db_uri, "bert_large", "all")
    assert len(everything.points) == 5  # one point per configuration, its newest run
    again = [p for p in everything.points if p.name == "gradient_accumulation=1024,num_io_tiles=32"]
    assert [p.throughput for p in again] == [990.0]


def test_bad_input_is_one_line_and_exit_code_2(db_uri, log_sweep, capsys):
    assert main(["no_such_experiment", "--uri", db_uri]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ipuexp.report: experiment='no_such_experiment' not found") and "\n" not in err
    from ipuexp.tracking.store import client, experiment_id

    experiment_id(client(db_uri), "empty", db_uri)
    with pytest.raises(ReportError, match="no FINISHED job runs"):
        load(db_uri, "empty")
    with pytest.raises(ReportError, match="no sweep"):
        load(db_uri, "empty", "latest")


def test_runs_that_do_not_compare_are_reported_apart_and_single_runs_are_marked(monkeypatch, capsys):
    """A zoo model and a Transformers model of the same keys, packed and unpacked runs (sequences/s against
    samples/s), are not one comparison: each kind is a table of its own. In one kind, a run of its own beside a
    sweep's points says so."""
    from ipuexp.report.sweep import comparable, sweep_numbers

    def run(name, model, sweep_id=None, seqs=None, ga="2048"):
        params = {"model": model, "options.gradient_accumulation": ga}
        return Point(name, name, params, 3490.0, 7e8, True, sweep_id=sweep_id, sequences_per_s=seqs)

    points = [run("a", "bert_large", "s1"), run("b", "bert_large", "s1", ga="1024"), run("c", "bert_large"),
              run("d", "hf:bert-large-uncased"), run("e", "bert_large", seqs=1411.0)]
    sets = comparable(Sweep("bert_large", points, swept_options(points)))
    assert [(s.experiment, [p.name for p in s.points]) for s in sets] == [
        ("bert_large [bert_large]", ["a", "b", "c"]), ("bert_large [hf:bert-large-uncased]", ["d"]),
        ("bert_large [bert_large, packed]", ["e"])]
    assert sweep_numbers(sets[0].points) == {"a": "1", "b": "1", "c": "-"}
    monkeypatch.setenv("COLUMNS", "80")
    print_table(sets[0])
    print_table(sets[2])
    out = capsys.readouterr().out
    assert "sweep -: a run of its own, not a point of a sweep (its overrides: c)" in out
    assert "packs/s" in out and "sequences/s" in out
