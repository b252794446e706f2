"""The console summary of a run: memory in binary units, one unit per column."""
from ipuexp.report.console import print_result
from ipuexp.result import IPUMemory, IPUModelFigures, MemoryFigures, ModelFigures, Result, ThroughputFigures
from ipuexp.units import KIB, MIB


def test_memory_tables_use_binary_units(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    capacity = 1472 * 624 * KIB
    ipus = [IPUMemory(ipu=i, capacity_bytes=capacity, total_bytes=b, always_live_bytes=b // 2,
                      not_always_live_bytes=b - b // 2, max_tile_bytes=b // 1472, max_tile=i * 1472, fits=i == 0)
            for i, b in enumerate([int(700 * MIB), int(1100 * MIB)])]
    model = ModelFigures(name="bert_large", parameters=336_000_000, flops_per_sample=2.4e11,
                         fwd_flops_per_sample=8e10, bwd_flops_per_sample=1.6e11, num_stages=2, ipus_per_replica=2,
                         capture_seconds=0.1,
                         ipus=[IPUModelFigures(ipu=i, stages=[i], blocks=[], parameters=1, fwd_flops=1, bwd_flops=1,
                                               saved_activation_bytes=int(266.05 * MIB),
                                               boundary_out_bytes=2 * MIB) for i in range(2)])
    print_result(Result(recipe="bert_large", model=model, fits=False, memory=MemoryFigures(fits=False, ipus=ipus),
                        throughput=ThroughputFigures(samples_per_s=3500.0, step_time_s=1.0, bubble_fraction=0.1,
                                                     utilisation=[0.5, 1.0])))
    out = capsys.readouterr().out
    assert " MB" not in out and " GB" not in out
    assert "266.0 MiB" in out and "2.0 MiB" in out
    assert "700.0 MiB" in out and "1,100.0 MiB" in out  # an IPU over 1 GiB reads in the column's MiB
    assert "487.0 KiB" in out  # 700 MiB over 1472 tiles


def test_memory_table_fits_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    capacity = 1472 * 624 * KIB
    ipus = [IPUMemory(ipu=i, capacity_bytes=capacity, total_bytes=int(1100 * MIB), always_live_bytes=int(600 * MIB),
                      not_always_live_bytes=int(500 * MIB), max_tile_bytes=int(1100 * MIB) // 1472, max_tile=4416,
                      fits=False) for i in range(4)]
    model = ModelFigures(name="bert_large", parameters=1, flops_per_sample=1.0, fwd_flops_per_sample=1.0,
                         bwd_flops_per_sample=0.0, num_stages=4, ipus_per_replica=4, capture_seconds=0.1)
    print_result(Result(recipe="bert_large", model=model, fits=False, memory=MemoryFigures(fits=False, ipus=ipus)))
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80
    row = next(line for line in lines if line.startswith("  3 "))
    assert all(f in row for f in ("1,100.0 MiB", "600.0 MiB", "500.0 MiB", "765.2 KiB", "no"))
    assert "4416" not in row  # which tile is fullest: always an IPU's first, kept in result.json only


def test_the_run_tables_at_80_columns_to_a_pipe_keep_every_figure_whole(capsys, monkeypatch):
    """Both tables of a run (model and memory), 80 columns, output to a pipe: no line over 80 characters, every
    figure whole, no terminal codes."""
    monkeypatch.setenv("COLUMNS", "80")
    capacity = 1472 * 624 * KIB
    ipus = [IPUMemory(ipu=i, capacity_bytes=capacity, total_bytes=int((700 + 150 * i) * MIB),
                      always_live_bytes=int(445.2 * MIB), not_always_live_bytes=int((255 + 150 * i) * MIB),
                      max_tile_bytes=int((700 + 150 * i) * MIB) // 1472, max_tile=1472 * i, fits=i < 2)
            for i in range(4)]
    model = ModelFigures(name="bert_large", parameters=336_000_000, flops_per_sample=2.4e11,
                         fwd_flops_per_sample=8e10, bwd_flops_per_sample=1.6e11, num_stages=26, ipus_per_replica=4,
                         capture_seconds=0.1,
                         ipus=[IPUModelFigures(ipu=i, stages=list(range(7 * i, min(7 * i + 7, 26))), blocks=[],
                                               parameters=88_170_000, fwd_flops=1.8415e11, bwd_flops=3.6829e11,
                                               saved_activation_bytes=int(308.1 * MIB),
                                               boundary_out_bytes=14 * MIB) for i in range(4)])
    print_result(Result(recipe="bert_large", model=model, fits=False, memory=MemoryFigures(fits=False, ipus=ipus)))
    out = capsys.readouterr().out
    assert "\x1b[" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    for figure in ("88.17 M", "184.15 G", "368.29 G", "308.1 MiB", "14.0 MiB", "700.0 MiB", "1,150.0 MiB",
                   "445.2 MiB", "705.0 MiB", "487.0 KiB", "0,1,2,3,4,5,6", "21,22,23,24,25"):
        assert figure in out, figure


def test_remedy_lines_wrap_with_a_hanging_indent():
    from ipuexp.report.console import _hanging

    remedy = ("  1. reduce data.micro_batch_size (now 32): stash, activations, temporaries and host buffers "
              "(773.0 MiB on the fullest IPU) scale with it; micro-batch 1 frees about 748.8 MiB")
    lines = _hanging(remedy, 80).splitlines()
    assert len(lines) > 1 and all(line.startswith("     ") and not line.startswith("      ") for line in lines[1:])
    assert max(map(len, lines)) <= 80 and "773.0 MiB" in " ".join(lines)
    head = _hanging("Out of memory on tile 0: 656180 bytes used but tiles only have 638976 bytes of memory", 80)
    assert head.splitlines()[1].startswith("    ")


def test_figures_are_not_highlighted_in_a_terminal_and_the_band_is_one_short_line():
    """On a terminal rich would colour the -7 of (+-7%) as a negative number and 3,490 as two numbers: the
    throughput, band and step lines are printed as they are; the band's rows stay in result.json."""
    import io

    from rich.console import Console

    model = ModelFigures(name="bert_large", parameters=1, flops_per_sample=1.0, fwd_flops_per_sample=1.0,
                         bwd_flops_per_sample=0.0, num_stages=1, ipus_per_replica=1, capture_seconds=0.1)
    t = ThroughputFigures(samples_per_s=3490.0, step_time_s=1.0, bubble_fraction=0.1, utilisation=[0.99],
                          breakdown={"compute": 0.9}, error_band_pct=7.0,
                          error_band_reasons=["leave-one-out residuals of the bert rows: a_row, b_row"],
                          error_band_summary=["leave-one-out residuals of the 2 bert rows"])
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, color_system="truecolor", width=80)
    print_result(Result(recipe="bert_large", model=model, fits=True, throughput=t), console)
    out = buf.getvalue()
    lines = [line for line in out.splitlines() if line.startswith(("Throughput", "Error band", "Step time"))]
    assert len(lines) == 3 and not any("\x1b[" in line for line in lines), lines
    assert "3,490 samples/s (+-7%)" in out and "a_row" not in out
    assert "Error band: leave-one-out residuals of the 2 bert rows (rows named in result.json)" in " ".join(out.split())


def test_the_measured_line_gives_the_error_the_band_bounds(capsys, monkeypatch):
    """``predicted / measured - 1``, as validate and the bands take it: 1,000 against 800 measured is 25% high,
    outside +-20% though 800 is within 20% of 1,000; against 1,100 it is 9.1% low."""
    from ipuexp.result import MeasuredFigures

    monkeypatch.setenv("COLUMNS", "80")
    model = ModelFigures(name="bert_large", parameters=1, flops_per_sample=1.0, fwd_flops_per_sample=1.0,
                         bwd_flops_per_sample=0.0, num_stages=1, ipus_per_replica=1, capture_seconds=0.1)
    for measured, band, inside, line in [
            (800.0, 20.0, False, "Measured: 800 samples/s (the prediction is 25.0% high: outside its +-20% band)"),
            (1100.0, 20.0, True, "Measured: 1,100 samples/s (the prediction is 9.1% low: inside its +-20% band)"),
            (1100.0, None, None, "Measured: 1,100 samples/s (the prediction is 9.1% low)")]:
        throughput = ThroughputFigures(samples_per_s=1000.0, step_time_s=1.0, bubble_fraction=0.1, utilisation=[1.0],
                                       error_band_pct=band)
        result = Result(recipe="bert_large", model=model, fits=True, throughput=throughput,
                        measured=MeasuredFigures(samples_per_s=measured, over_predicted=measured / 1000.0,
                                                 in_band=inside))
        print_result(result)
        assert line in capsys.readouterr().out.splitlines()
