"""The console summary of a result."""
from __future__ import annotations

from ipuexp.result import Result


def _si(x: float, unit: str = "") -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.2f} {prefix}{unit}"
    return f"{x:.0f} {unit}".rstrip()


def print_result(result: Result) -> None:
    from rich.console import Console
    from rich.table import Table

    m = result.model
    # A recipe run with a model of its own (``model.name=hf``, ``model.name=custom``) names the model too.
    own = not result.recipe or result.recipe.startswith(m.name.replace("-", "_").split("_")[0])
    label = (result.recipe or m.name) if own else f"{result.recipe} with {m.name}"
    table = Table(title=f"{label}: {m.parameters / 1e6:.1f}M parameters, "
                        f"{m.flops_per_sample / 1e9:.1f} GFLOPs per sample, {m.num_stages} stages")
    for col in ("IPU", "stages", "parameters", "fwd FLOPs/mb", "bwd FLOPs/mb", "saved act./mb", "boundary out/mb"):
        table.add_column(col, justify="right")
    for ipu in m.ipus:
        table.add_row(str(ipu.ipu), ",".join(map(str, ipu.stages)), _si(ipu.parameters), _si(ipu.fwd_flops),
                      _si(ipu.bwd_flops), _si(ipu.saved_activation_bytes, "B"), _si(ipu.boundary_out_bytes, "B"))
    console = Console()
    console.print(table)
    if result.memory is not None:
        mem = Table(title="Memory per IPU (fullest tile decides)")
        for col in ("IPU", "total", "of IPU", "always-live", "not-always-live", "fullest tile", "fits"):
            mem.add_column(col, justify="right")
        for ipu in result.memory.ipus:
            share = ipu.total_bytes / max(ipu.capacity_bytes, 1)
            mem.add_row(str(ipu.ipu), _si(ipu.total_bytes, "B"), f"{share:.0%}", _si(ipu.always_live_bytes, "B"),
                        _si(ipu.not_always_live_bytes, "B"), f"{ipu.max_tile_bytes} B (tile {ipu.max_tile})",
                        "yes" if ipu.fits else "[red]no[/red]")
        console.print(mem)
        for line in result.memory.report:
            console.print(line, markup=False)
    t = result.throughput
    if t is not None:
        util = ", ".join(f"{u:.0%}" for u in t.utilisation)
        band = f" (+-{t.error_band_pct:.0f}%)" if t.error_band_pct is not None else ""
        console.print(f"Throughput: {t.samples_per_s:,.0f} samples/s{band}, step {t.step_time_s * 1e3:,.2f} ms, "
                      f"bubble {t.bubble_fraction:.1%}, IPU utilisation {util}")
        if t.error_band_reasons:
            console.print("Error band: " + "; ".join(t.error_band_reasons), markup=False)
        parts = sorted(t.breakdown.items(), key=lambda kv: -kv[1])
        console.print("Step time: " + ", ".join(f"{k} {v / max(t.step_time_s, 1e-12):.1%}" for k, v in parts if v > 0))
    f = result.functional
    if f is not None:
        acc = f", test accuracy {f.test_accuracy:.2f}%" if f.test_accuracy is not None else ""
        console.print(f"Functional: final loss {f.final_loss:.4f}{acc}, host {f.samples_per_s:,.1f} samples/s "
                      f"(analytic prediction for the IPU system: {f.predicted_samples_per_s or 0:,.1f})")
