"""What ``python -m ipuexp.validate`` writes besides its table: the ``calibration:`` block of each
``conf/ipu/<gen>.yaml`` (every constant with its value and its fitting or source note) and the predicted-vs-published
plot of ``docs/emulator.md``. ``report`` is the command's ``ipuexp.fitting.validate_report.Report``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, Sequence

from ipuexp.config.store import CONF_DIR
from ipuexp.files import savefig_whole, write_whole

_FIT_NOTES = {
    "amp_efficiency": "share of the AMP's streaming rate reached inside matmul/convolution vertices, beyond the "
                      "fixed cycles of each AMP pass (emulator/matmul_plan.py, from PopLibs' ConvPartial1x1Out estimate)",
    "vector_efficiency": "share of PopLibs' per-tile vector rate (emulator/vector_rate.py VECTOR_BYTES_PER_CYCLE, from "
                         "PerformanceEstimation.cpp) reached by the non-matmul vertices of every class",
    "compute_set_cycles": "cycles of one compute set on top of ipu.sync_cycles (supervisor start, worker "
                          "dispatch, vertex tail); also sets the fixed cost of a collective's ring step inside a "
                          "rack (ring_step_supersteps of them)",
    "gw_step_latency_s": "seconds of one ring step of a collective once the ring spans racks: its slowest hop "
                         "is a GW-Link (gateway, 100 GbE RoCE, cross-rack sync); no public figure; in seconds, "
                         "the network's latency, not the tile clock's",
    "host_step_s": "seconds of a PopTorch training loop's own work per host call (host.framework poptorch or "
                   "optimum): the model call's host side and the setOptimizer after every step (an "
                   "OptimizerFromHost run), the Trainer's step under Optimum (emulator/host.py); no public figure; "
                   "the host's time, not the tile clock's",
    "popart_step_s": "seconds of a PopART training loop's own work per host call (host.framework popart): "
                     "session.run's host side, the step's input arrays, and the updateOptimizerFromHost after every "
                     "step when the learning rate changes each step (a second engine run over every IPU of the "
                     "process; emulator/host.py); no public figure; the host's time, not the tile clock's",
}
PRIOR_NOTES = {
    "amp_grain": "prior, not fitted: input channels the AMP takes per pass at 16-bit inputs (8 at 32-bit): "
                 "PopLibs groups AMP convolution/matmul input channels by 16 half / 8 float on this tile design; "
                 "matmul K is padded to it",
    "links_per_neighbour": "prior, not fitted: IPU-Links between neighbouring IPUs of a pipeline: docs/sources.md "
                           "[e] Bow-2000 datasheet 'IPU-Link 512Gbps' between IPUs = 64 GB/s both ways = 2 links x "
                           "16 GB/s per direction ([l] 320 GB/s over 10 links, counting both directions)",
    "ring_step_supersteps": "prior, not fitted: supersteps of one ring step of a collective: slice the fragment, "
                            "the cross-replica copy, the reduction, the index increment (PopLibs "
                            "ReplicatedCollectives.cpp, the ring all-reduce that preceded GCL)",
    "hop_latency_s": "prior, not fitted: one IPU-Link hop of a sync signal (poplibs IPUModel tool, "
                     "setGlobalSyncLatency: 15 ns per hop, paid there and back)",
    "global_sync_cycles": "prior, not fitted: no public figure (IPU Model: poplar::IPUModel's "
                          "globalSyncCycles default is not printed); about 0.5-0.75 us; one per pipeline cycle and "
                          "ring step: under 0.1% of every calibration step, so the rows cannot fit it",
    "host_latency_s": "prior, not fitted: no public figure; one host round trip through the Poplar runtime "
                      "(stream callback, PCIe/RoCE); paid per host call and per stream copy without a prefetched "
                      "buffer: about 1% of the calibration steps at most, so the rows cannot fit it",
}


def calibration_block(report: Any, generation: str, priors: Dict[str, Any], rows: Sequence[str]) -> str:
    """The ``calibration:`` YAML block of one generation, each constant with its note."""
    fitted_here = generation in {o.row.ipu for o in report.outcomes}
    lines = [
        "calibration:",
        "  # Constants of the cycle model (ipuexp/execution/hardware.py Calibration). Fitted values come from",
        "  # `python -m ipuexp.validate --fit`: scipy.optimize.least_squares (soft-L1 robust loss) on",
        "  # log(predicted / published) over the rows of the calibration table",
        "  # (ipuexp/calibration/published-throughput.csv), log-parameterised within physical bounds",
        "  # (ipuexp/calibration/fitted.py FITTED), with a weak prior (its PRIORS; ipuexp/fitting/fit.py PRIOR_WEIGHT).",
        "  # They are counted in cycles (gw_step_latency_s in seconds) and shared by Mk2 and Bow:",
        "  # the same GC200 tile design (tiles, SRAM, AMP and exchange per cycle) at different clocks",
        "  # (docs/sources.md [b], [c], [d]), so one fit over the Mk2 and Bow rows serves both generations.",
        f"  # Rows fitted on: {', '.join(rows)}.",
    ]
    if not fitted_here:
        lines.append(f"  # No {generation} row exists: the fitted values are carried over unvalidated.")
    for name, value in report.constants.items():
        loo = [c[name] for c in report.loo_constants.values() if name in c]
        spread = f"; leave-one-out refits {min(loo):.4g} to {max(loo):.4g}" if loo else ""
        where = "Fitted on all rows above" if fitted_here else "Not fitted here (carried over)"
        lines.append(f"  # {name}: {_FIT_NOTES[name]}. {where}, robust least squares on log error with a weak "
                     f"prior{spread}.")
        lines.append(f"  {name}: {value:g}")
    for name, value in priors.items():
        lines.append(f"  # {name}: {PRIOR_NOTES.get(name, 'prior, not fitted')}.")
        lines.append(f"  {name}: {value:g}" if isinstance(value, (int, float)) else f"  {name}: {value}")
    return "\n".join(_wrap(line) for line in lines) + "\n"


def _wrap(line: str, width: int = 116) -> str:
    """Wrap long YAML comments at ``width`` columns."""
    import textwrap

    if not line.lstrip().startswith("#") or len(line) <= width:
        return line
    indent = line[: len(line) - len(line.lstrip())] + "# "
    return "\n".join(textwrap.wrap(line.lstrip()[2:], width, initial_indent=indent, subsequent_indent=indent))


def write_block(generation: str, text: str) -> None:
    """Replace the ``calibration:`` block (it closes the file) of ``conf/ipu/<generation>.yaml``."""
    path = CONF_DIR / "ipu" / f"{generation}.yaml"
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("calibration:"))
    write_whole(path, "\n".join(lines[:start] + text.rstrip("\n").splitlines()) + "\n")


def priors(generation: str, fitted: Iterable[str]) -> Dict[str, Any]:
    """The constants of ``conf/ipu/<generation>.yaml``'s calibration block that are not fitted."""
    from omegaconf import OmegaConf

    fitted = set(fitted)
    cal = OmegaConf.load(CONF_DIR / "ipu" / f"{generation}.yaml").get("calibration") or {}
    return {k: v for k, v in OmegaConf.to_container(cal).items() if k not in fitted}


def plot(report: Any, path: Path) -> None:
    """Predicted against published samples/s per IPU, in sample and under each held-out mode, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 6))
    markers = {"in-sample": ("o", "C0"), "leave-one-out": ("s", "C1"), "leave-one-family-out": ("^", "C2"),
               "leave-one-size-out": ("D", "C3")}
    for mode, (marker, colour) in markers.items():
        xs, ys = [], []
        for o in report.outcomes:
            value = o.predicted if mode == "in-sample" else o.held_out.get(mode)
            if value is not None:
                ipus = max(o.row.ipus, 1)
                xs.append(o.row.published / ipus)
                ys.append(value / ipus)
        ax.scatter(xs, ys, marker=marker, label=mode, alpha=0.8, s=30 if mode == "in-sample" else 45,
                   facecolors=colour if mode == "in-sample" else "none", edgecolors=colour)
    lo = min(o.row.published / max(o.row.ipus, 1) for o in report.outcomes) / 1.5
    hi = max(o.row.published / max(o.row.ipus, 1) for o in report.outcomes) * 1.5
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    for k in (0.85, 1.15):
        ax.plot([lo, hi], [lo * k, hi * k], "k:", lw=0.6)
    _label_points(fig, ax, report.outcomes)
    ax.set_xlabel("published samples/s per IPU")
    ax.set_ylabel("predicted samples/s per IPU")
    ax.set_title("ipuexp calibration: predicted vs published (dotted: +-15%; *: not fitted)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    savefig_whole(fig, path, dpi=110)
    plt.close(fig)


def _label_points(fig: Any, ax: Any, outcomes: Sequence[Any]) -> None:
    """Each row's label to the right of its point, moved down in steps until it overlaps no label placed before it;
    the x axis reaches far enough right for the last labels."""
    from matplotlib.text import Text
    ax.set_xscale("log")
    ax.set_yscale("log")
    top = max(o.row.published / max(o.row.ipus, 1) for o in outcomes)
    ax.set_xlim(right=top * 12)
    fig.canvas.draw()  # the axes' final transform, for the labels' extents
    renderer = fig.canvas.get_renderer()
    boxes: list = []

    def short(o: Any) -> str:
        return f"{o.row.model}{' packed' if o.row.packed else ''} {o.row.system}"

    names = [short(o) for o in outcomes]
    for o in sorted(outcomes, key=lambda o: -o.predicted / max(o.row.ipus, 1)):
        ipus = max(o.row.ipus, 1)
        x, y = o.row.published / ipus, o.predicted / ipus
        # Two rows of one model and system are told apart by their ids.
        label = (short(o) if names.count(short(o)) == 1 else o.row.id) + (" *" if o.unexplained else "")
        for step in range(12):
            # A label pushed away from its point keeps a thin line to it.
            line = dict(arrowstyle="-", color="grey", lw=0.5, shrinkA=0, shrinkB=3) if step else None
            text = ax.annotate(label, (x, y), fontsize=7, xytext=(6, -8 - 9 * step), textcoords="offset points",
                               arrowprops=line)
            # The text's own extent (an annotation's would take in its line too).
            text.update_positions(renderer)
            box = Text.get_window_extent(text, renderer)
            if not any(box.overlaps(other) for other in boxes) or step == 11:
                break  # the last step keeps its place: a label is never dropped
            text.remove()
        boxes.append(box)
