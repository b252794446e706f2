"""The console summary of a result. Counts (parameters, FLOPs) are decimal; memory is binary (``ipuexp.units``)."""
from __future__ import annotations

from typing import Any

from ipuexp.result import Result, RunFigures
from ipuexp.units import column_unit, human_bytes


def flops_text(flops: float) -> str:
    """FLOPs with the unit that keeps a figure readable (13.7 MFLOPs, not 0.0 GFLOPs) and thousands separated."""
    for scale, unit in ((1e9, "GFLOPs"), (1e6, "MFLOPs"), (1e3, "kFLOPs")):
        if flops >= scale:
            return f"{flops / scale:,.1f} {unit}"
    return f"{flops:,.0f} FLOPs"


def _si(x: float) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.2f} {prefix}"
    return f"{x:.0f}"


def _hanging(line: str, width: int) -> str:
    """A report line wrapped with a hanging indent: a numbered remedy's continuation under its text, any other
    indented line's 2 more than its start, a line at the margin's 4; figures stay whole."""
    import re

    from ipuexp.terminal_table import wrap

    lead = len(line) - len(line.lstrip())
    number = re.match(r"\d+\.\s+", line.lstrip())
    hang = len(number.group(0)) if number else (2 if lead else 4)
    return wrap(line.strip(), width, indent=lead, subsequent=hang)


def run_line(run: RunFigures) -> str:
    """What ran: the batch, the replicas, and the IPUs used of the system's (with the overrides that use the rest)."""
    seq = f", sequence length {run.sequence_length}" if run.sequence_length else ""
    line = (f"Ran: micro-batch {run.micro_batch_size}{seq}, {run.replicas} "
            f"{'replica' if run.replicas == 1 else 'replicas'} of {run.ipus_per_replica} "
            f"{'IPU' if run.ipus_per_replica == 1 else 'IPUs'}, gradient accumulation "
            f"{run.gradient_accumulation}, device iterations {run.device_iterations} (global batch "
            f"{run.global_batch:,}); IPUs used {run.ipus_used} of {run.system_ipus} ({run.system})")
    if run.ipus_reserved > run.ipus_used:
        idle = run.ipus_reserved - run.ipus_used
        line += (f"; {run.ipus_reserved} reserved (options.auto_round_num_ipus): {idle} of them "
                 f"{'stays' if idle == 1 else 'stay'} idle")
    remedy = run.idle_remedy()
    if remedy:
        line += f": {run.system_ipus - run.ipus_used} idle; {remedy}"
    return line


def print_result(result: Result, console: Any = None) -> None:
    """The run's tables and figures (on ``console``, default the terminal), laid out by
    :mod:`ipuexp.terminal_table`."""
    from rich.text import Text

    from ipuexp.terminal_table import Column, Table, terminal_console

    m = result.model
    # A recipe run with a model of its own (``model.name=hf``, ``model.name=custom``) names the model too.
    own = not result.recipe or result.recipe.startswith(m.name.replace("-", "_").split("_")[0])
    label = (result.recipe or m.name) if own else f"{result.recipe} with {m.name}"
    saved = column_unit((ipu.saved_activation_bytes for ipu in m.ipus), largest="MiB")
    sent = column_unit((ipu.boundary_out_bytes for ipu in m.ipus), largest="MiB")
    # The stages of an IPU are a list (``0,1,2,3``): text that folds after its commas.
    columns = [Column("IPU", figure=True), Column("stages", figure=False, align="right"),
               *(Column(h, figure=True) for h in ("parameters", "fwd FLOPs/mb", "bwd FLOPs/mb", "saved act./mb",
                                                   "boundary out/mb"))]
    table = Table(columns, title=f"{label}: {m.parameters / 1e6:.1f}M parameters, "
                                 f"{flops_text(m.flops_per_sample)} per sample, {m.num_stages} "
                                 f"{'stage' if m.num_stages == 1 else 'stages'}")
    for ipu in m.ipus:
        table.add_row(str(ipu.ipu), ",".join(map(str, ipu.stages)), _si(ipu.parameters), _si(ipu.fwd_flops),
                      _si(ipu.bwd_flops), human_bytes(ipu.saved_activation_bytes, 1, saved),
                      human_bytes(ipu.boundary_out_bytes, 1, sent))
    console = console or terminal_console()
    if result.run is not None:
        console.print(run_line(result.run), markup=False, highlight=False)
    console.print(table)
    if result.memory is not None:
        ipus = result.memory.ipus
        # One unit for the three columns that add up (total = always live + not always live), the totals' (an IPU
        # over 1 GiB next to ones under it still reads in MiB): 725.4 KiB beside MiB columns reads 0.7 MiB.
        total = always = rest = column_unit((i.total_bytes for i in ipus), largest="MiB")
        rows = [(str(ipu.ipu), human_bytes(ipu.total_bytes, 1, total),
                 f"{ipu.total_bytes / max(ipu.capacity_bytes, 1):.0%}", human_bytes(ipu.always_live_bytes, 1, always),
                 human_bytes(ipu.not_always_live_bytes, 1, rest), human_bytes(ipu.max_tile_bytes, 1, "KiB"),
                 Text("yes") if ipu.fits else Text("no", style="red")) for ipu in ipus]
        # Which tile is fullest is not shown: the memory model puts an IPU's extra load (code, exchange buffers) on
        # its first tile, so the column would only repeat each IPU's first tile number (``result.json`` keeps it).
        headers = ("IPU", "total", "of IPU", "always live", "not always live", "fullest tile")
        mem = Table([*(Column(h, figure=True) for h in headers), Column("fits", figure=False, align="right")], rows,
                    title="Memory per IPU (fullest tile decides)")
        console.print(mem)
        for line in result.memory.report:
            console.print(_hanging(line, console.width), markup=False, highlight=False, soft_wrap=True)
    t = result.throughput
    if t is not None:
        util = ", ".join(f"{u:.0%}" for u in t.utilisation)
        band = f" (+-{t.error_band_pct:.0f}%)" if t.error_band_pct is not None else ""
        rate = f"{t.samples_per_s:,.0f} samples/s{band}"
        if t.sequences_per_s is not None:  # packed: a sample is a pack
            rate = f"{t.sequences_per_s:,.0f} sequences/s{band} ({t.samples_per_s:,.0f} packs/s)"
        # Figures and signs as printed: rich's highlighter would colour the -7 of (+-7%) as a negative number.
        console.print(f"Throughput: {rate}, step {t.step_time_s * 1e3:,.2f} ms, "
                      f"bubble {t.bubble_fraction:.1%}, IPU utilisation {util}", markup=False, highlight=False)
        # One short line; result.json's error_band_reasons name every calibration row behind it.
        reasons = t.error_band_summary or [r for r in t.error_band_reasons if not r.startswith("extrapolated:")]
        if reasons:
            console.print("Error band: " + "; ".join(reasons) + " (rows named in result.json)", markup=False,
                          highlight=False)
        if t.extrapolated:
            console.print(f"Extrapolated: no calibration row reaches this configuration ({t.extrapolated}); the band "
                          "covers how far off the model was where it extrapolated before", markup=False,
                          highlight=False)
        parts = sorted(t.breakdown.items(), key=lambda kv: -kv[1])
        console.print("Step time: " + ", ".join(f"{k} {v / max(t.step_time_s, 1e-12):.1%}" for k, v in parts if v > 0),
                      markup=False, highlight=False)
    ms = result.measured
    if ms is not None:
        parts = []
        if ms.samples_per_s is not None and ms.over_predicted is not None:
            parts.append(f"{ms.samples_per_s:,.0f} samples/s ({_measured_error(ms, result)})")
        if ms.ipu_memory_bytes is not None and ms.memory_over_predicted is not None:
            parts.append(f"fullest IPU {human_bytes(ms.ipu_memory_bytes, 1, 'MiB')}, "
                         f"{ms.memory_over_predicted:.2f}x the prediction")
        console.print("Measured: " + "; ".join(parts), markup=False, highlight=False)
    f = result.functional
    if f is not None:
        acc = f", test accuracy {f.test_accuracy:.2f}%" if f.test_accuracy is not None else ""
        console.print(f"Functional: final loss {f.final_loss:.4f}{acc}, host {f.samples_per_s:,.1f} samples/s "
                      f"(analytic prediction for the IPU system: {f.predicted_samples_per_s or 0:,.1f})")


def _measured_error(ms: Any, result: Result) -> str:
    """``the prediction is 38.2% high: inside its +-108% band``: the error in the terms the band bounds
    (``ipuexp.calibration.band_ends``), predicted / measured - 1."""
    from ipuexp.calibration.band_ends import error_pct

    error = error_pct(1.0, ms.over_predicted)  # over_predicted is measured / predicted
    text = f"the prediction is {abs(error):.1f}% {'high' if error > 0 else 'low'}"
    band = result.throughput.error_band_pct if result.throughput is not None else None
    if ms.in_band is None or band is None:
        return text
    return f"{text}: {'inside' if ms.in_band else 'outside'} its +-{band:.0f}% band"
