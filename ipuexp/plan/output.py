"""What a person acts on: the ranked table, why the best rejected candidates were rejected, ``plan.json``, the
Pareto plot (throughput against the fullest tile, fitting and not)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

from ipuexp.emulator.oom import human
from ipuexp.files import savefig_whole, write_whole
from ipuexp.plan.candidate import Candidate, differences
from ipuexp.plan.evaluate import FITS, OOM, Outcome, lower_end
from ipuexp.plan.planner import Plan

CONVERGED = 0.01
"""A sampler that improved the best by more than this over the last quarter of its budget had not converged."""


RUN_ONLY = {"device_iterations": 0, "instances": 0, "prefetch": 0}
"""Options that change how the host feeds a configuration, not the configuration: a table row stands for its
variants in these (the best ranked shown), so that five rows are five configurations."""


RESOLUTION = 0.001
"""Predictions this close (0.1%: the table's four or five significant digits) are the same answer."""


def distinct(outcomes: List[Outcome], n: int, recipe: Optional[Candidate] = None) -> List[Outcome]:
    """The first ``n`` outcomes (ranked) that are distinct configurations: candidates the table cannot tell apart
    (the same samples/s, band, fullest tile and IPU as shown) are shown once, as the one changing the fewest
    options; then the variants of one configuration in ``RUN_ONLY`` options are shown once, as the simplest of
    those within ``RESOLUTION`` of its best."""
    from dataclasses import replace

    def key(o: Outcome) -> Any:
        return (o.status, f"{o.samples_per_s:,.0f}", lower_text(o), human(o.peak_tile_bytes), human(o.peak_ipu_bytes))

    groups: Dict[Any, Outcome] = {}
    for o in outcomes:
        cur = groups.get(key(o))
        if cur is None or (recipe is not None and len(differences(o.candidate, recipe))
                           < len(differences(cur.candidate, recipe))):
            groups[key(o)] = o
    shown = [o for o in (groups.pop(key(o), None) for o in outcomes) if o is not None]
    variants: Dict[Candidate, List[Outcome]] = {}
    for o in shown:
        variants.setdefault(replace(o.candidate, **RUN_ONLY), []).append(o)
    out: List[Outcome] = []
    for same in variants.values():  # in rank order of each configuration's best variant
        # Variants within the table's resolution of the best are one answer: the simplest of them is shown.
        close = [o for o in same if o.score >= same[0].score * (1 - RESOLUTION)]
        out.append(min(close, key=lambda o: len(differences(o.candidate, recipe)) if recipe is not None else 0))
        if len(out) == n:
            break
    return out


def throughput_text(o: Outcome) -> str:
    band = f" (±{o.band_pct:.0f}%)" if o.band_pct is not None else ""
    return f"{o.samples_per_s:,.0f}{band}" + (" *" if o.extrapolated else "")


def lower_text(o: Outcome) -> str:
    """The lower end of the band: what the prediction promises at worst."""
    return "-" if o.band_pct is None else f"{lower_end(o.samples_per_s, o.band_pct):,.0f}"


def row(o: Outcome, recipe: Candidate) -> Dict[str, Any]:
    changes = differences(o.candidate, recipe)
    return {
        "samples_per_s": round(o.samples_per_s, 1), "error_band_pct": o.band_pct,
        "samples_per_s_lower": None if o.band_pct is None else round(lower_end(o.samples_per_s, o.band_pct), 1),
        "extrapolated": o.extrapolated, "score": round(o.score, 1),
        "nearest_row": o.nearest[0] if o.nearest else None,
        "nearest_distance": round(o.nearest[1], 2) if o.nearest else None,
        "step_time_s": o.step_time_s, "status": o.status, "global_batch": o.candidate.global_batch,
        "peak_tile_bytes": o.peak_tile_bytes, "peak_tile_ipu": o.peak_tile_ipu,
        "tile_headroom": round(o.tile_headroom, 4), "peak_ipu_bytes": o.peak_ipu_bytes, "peak_ipu": o.peak_ipu,
        "ipu_headroom": round(o.ipu_headroom, 4), "changes": changes, "overrides": changes, "reason": o.reason,
    }


def wrapped(text: str, width: int, indent: int) -> str:
    """``text`` broken between words to ``width`` columns, indented by ``indent`` and its continuation lines by 4
    more; figures stay whole (:func:`ipuexp.terminal_table.wrap`)."""
    from ipuexp.terminal_table import wrap

    return wrap(text, max(width, indent + 20), indent=indent, subsequent=4)


def structure_text(c: Candidate) -> str:
    """Replicas x IPUs per replica."""
    return f"{c.replicas} x {c.layout.ipus}"


def changes_text(c: Candidate, recipe: Candidate) -> str:
    return " ".join(differences(c, recipe)).replace("options.", "") or "(the recipe)"


def print_plan(plan: Plan, top: List[Outcome], rejected: List[Outcome], console: Any = None) -> None:
    """The summary, the table of the baseline and the best (figures only), what each changes, why the closest
    rejected candidates were rejected; every line within the terminal's width."""
    from ipuexp.terminal_table import Column, Table, terminal_console

    console = console or terminal_console()
    width = console.width
    st = plan.result.stats
    p = plan.problem
    r, scaled = plan.result.recipe, plan.result.scaled
    baseline = scaled if scaled is not None else r
    console.print(wrapped(
        f"Planned {plan.base.recipe or plan.base.model.name} on {plan.base.system.name} ({p.num_ipus} IPUs), global "
        f"batch {p.global_batch:,}: {st.seeds:,} seeds over every structure, {st.method} search of a space of "
        f"{st.space_size:,}, climbs from the best; {st.candidates:,} candidates in {st.seconds:.1f} s "
        f"({st.candidates / max(st.seconds, 1e-9):,.0f}/s; {st.evaluated:,} fully evaluated, {st.pruned:,} rejected "
        f"by the memory lower bound), graph capture {plan.capture_s:.1f} s", width, 0), soft_wrap=True)
    if st.budget and st.late_gain() > CONVERGED:
        console.print(wrapped(
            f"Not converged: the best improved by {st.late_gain():.1%} in the last quarter of the "
            f"{st.budget:,} sampled candidates; plan.trials={4 * st.budget} would search further.", width, 0),
            soft_wrap=True)
    by_lower = plan.settings.rank == "lower"
    title = ("Configurations that fit, by the lower end of their band" if by_lower
             else "Fastest configurations that fit")
    # The fullest tile's and IPU's cells (``IPU 7: 591.9 KiB (5%)``) and a throughput with its notes fold between
    # their figures; each figure stays whole with its unit.
    table = Table([Column("#", figure=False), Column("samples/s", figure=False, align="right"),
                   Column("at worst", figure=True), Column("replicas x IPUs", figure=True),
                   Column("fullest tile (free)", figure=False, align="right"),
                   Column("fullest IPU (free)", figure=False, align="right")], title=title)
    label = "scaled" if scaled is not None else "recipe"
    shown = [(label, baseline)] + [(str(i), o) for i, o in enumerate(top, 1)]
    for name, o in shown:
        if o.status not in (FITS, OOM):
            table.add_row(name, "-", "-", structure_text(o.candidate), "-", "-")
            continue
        fit = "" if o.fits else " (does not fit)"
        table.add_row(name, throughput_text(o) + fit, lower_text(o), structure_text(o.candidate),
                      f"IPU {o.peak_tile_ipu}: {human(o.peak_tile_bytes)} ({o.tile_headroom:.0%})",
                      f"IPU {o.peak_ipu}: {human(o.peak_ipu_bytes)} ({o.ipu_headroom:.0%})")
    console.print(table)
    console.print(wrapped(
        "at worst: the prediction at the far end of its error band (samples/s / (1 + band))"
        + ("; the table ranks by it (plan.rank=point ranks by the prediction)" if by_lower else "")
        + "; *: extrapolated, no calibration row reaches it; a row stands for its variants in device iterations, "
          f"PopRun instances and prefetch depth (shown: the simplest within {RESOLUTION:.1%} of the best)", width, 0),
        soft_wrap=True)
    if top and baseline.status == FITS:
        best = top[0]
        console.print(wrapped(
            f"Best against the {label}: {_ratio(best.samples_per_s, baseline.samples_per_s)} predicted, "
            f"{_worst_claim(best, baseline, label)}. Evidence: "
            + (f"extrapolated ({best.extrapolated})" if best.extrapolated else _evidence(best)), width, 0),
            soft_wrap=True)
    if scaled is not None:
        used = r.candidate.layout.ipus * r.candidate.replicas
        sc = scaled.candidate
        how = (f"on all {p.num_ipus} IPUs by data parallelism" if sc.replicas != p.recipe.replicas else
               f"at the global batch of {p.global_batch:,}")
        if sc.replicas != p.recipe.replicas and sc.global_batch != p.recipe.global_batch:
            how += f", at the global batch of {p.global_batch:,}"
        published = (f"uses {used} of the {p.num_ipus} IPUs" if used < p.num_ipus else
                     f"has a global batch of {p.recipe.global_batch:,}")
        console.print(wrapped(
            f"scaled: the recipe {how} ({changes_text(sc, p.recipe)}). The recipe as published {published}: "
            f"{_figure(r)}.", width, 0), soft_wrap=True)
    elif baseline.status not in (FITS, OOM):
        console.print(wrapped(f"recipe: {baseline.reason}", width, 0), soft_wrap=True)
    if top:
        console.print(wrapped("What each changes from the recipe (keys without their options. prefix; plan.json "
                              "has the overrides in full, and --write-recipe writes the best as a recipe):", width, 0),
                      soft_wrap=True)
        for i, o in enumerate(top, 1):
            console.print(wrapped(f"{i}: {changes_text(o.candidate, p.recipe)}", width, 2), soft_wrap=True)
    if rejected:
        console.print("Faster, but rejected (smallest shortfall first):" if top and rejected[0].samples_per_s >
                      top[0].samples_per_s else "Closest to fitting (smallest shortfall first):")
        for o in rejected:
            speed = f"{o.samples_per_s:,.0f} samples/s: " if o.status == OOM else ""
            console.print(wrapped(f"{speed}{o.reason}", width, 2), soft_wrap=True)
            console.print(wrapped(changes_text(o.candidate, p.recipe), width, 6), soft_wrap=True)


def _worst_claim(best: Outcome, baseline: Outcome, label: str) -> str:
    """The best against the baseline at the lower ends of their bands; a gain is claimed only when the best's
    lower end is above the baseline's own prediction (else the band allows the best to be the slower)."""
    if best.band_pct is None or baseline.band_pct is None:
        return f"{_ratio(best.score, baseline.score)} by the ranking"
    worst = lower_end(best.samples_per_s, best.band_pct)
    if worst < baseline.samples_per_s:
        return (f"but at worst {worst:,.0f} samples/s, below the {label}'s own prediction "
                f"({baseline.samples_per_s:,.0f}): its band (±{best.band_pct:.0f}%) does not rule out a loss")
    return f"{_ratio(worst, lower_end(baseline.samples_per_s, baseline.band_pct))} at worst"


def _ratio(a: float, b: float) -> str:
    return f"{100 * (a / b - 1):+.1f}%" if b else "-"


def _evidence(o: Outcome) -> str:
    if o.nearest is None:
        return "no calibration row to compare with"
    row, d = o.nearest
    where = "within its reach" if d <= 0 else f"{d:.1f} reach-widths beyond its reach"
    return f"nearest calibration row {row} ({where}), band ±{o.band_pct:.0f}%"


def _figure(o: Outcome) -> str:
    if o.status in (FITS, OOM):
        return throughput_text(o) + " samples/s" + ("" if o.fits else " (does not fit)")
    return o.reason


def plan_json(plan: Plan, top: List[Outcome], rejected: List[Outcome]) -> Dict[str, Any]:
    st = plan.result.stats
    p = plan.problem
    return {
        "recipe": plan.base.recipe, "model": plan.base.model.name, "system": plan.base.system.name,
        "ipu": plan.base.ipu.name, "global_batch": p.global_batch, "batch_tolerance": p.batch_tolerance,
        "headroom": plan.settings.headroom, "fixed": sorted(plan.settings.fix),
        "search": {"method": st.method, "space_size": st.space_size, "candidates": st.candidates,
                   "evaluated": st.evaluated, "pruned": st.pruned, "invalid": st.invalid, "repeats": st.repeats,
                   "refined": st.refined, "seeds": st.seeds, "seconds": round(st.seconds, 2),
                   "workers": st.workers, "capture_s": round(plan.capture_s, 2), "seed": plan.settings.seed,
                   "trials": st.budget, "late_gain": round(st.late_gain(), 4),
                   "converged": not st.budget or st.late_gain() <= CONVERGED},
        "recipe_result": row(plan.result.recipe, p.recipe),
        "scaled_result": row(plan.result.scaled, p.recipe) if plan.result.scaled is not None else None,
        "top": [row(o, p.recipe) for o in top],
        "rejected": [row(o, p.recipe) for o in rejected],
    }


def pareto_plot(plan: Plan, path: Path) -> Path:
    """Throughput against the fullest tile of every timed candidate, fitting and not, with the front of the
    fitting ones and the recipe marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [o for o in plan.result.outcomes.values() if o.status in (FITS, OOM)]
    limit = plan.result.recipe.tile_limit_bytes or plan.result.recipe.tile_memory_bytes
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for status, colour, label in ((OOM, "#d62728", "does not fit"), (FITS, "#1f77b4", "fits")):
        pts = [o for o in timed if o.status == status]
        ax.scatter([o.peak_tile_bytes / 1024 for o in pts], [o.samples_per_s for o in pts], s=6, alpha=0.4,
                   color=colour, label=f"{label} ({len(pts):,})")
    front = pareto_front([o for o in timed if o.fits])
    ax.plot([o.peak_tile_bytes / 1024 for o in front], [o.samples_per_s for o in front], "-o", color="black",
            markersize=3, label="Pareto front of the fitting")
    r = plan.result.recipe
    if r.status in (FITS, OOM):
        ax.scatter([r.peak_tile_bytes / 1024], [r.samples_per_s], marker="*", s=160, color="#ff7f0e",
                   label="recipe", zorder=5)
    sc = plan.result.scaled
    if sc is not None and sc.status in (FITS, OOM):
        ax.scatter([sc.peak_tile_bytes / 1024], [sc.samples_per_s], marker="D", s=60, color="#2ca02c",
                   label="recipe scaled to the system", zorder=5)
    ax.axvline(limit / 1024, color="grey", linestyle="--", linewidth=1, label="tile limit")
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if str(v)[0] in "25" else ""))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("fullest tile (KiB)")
    ax.set_ylabel("samples/s")
    ax.set_title(f"{plan.base.recipe or plan.base.model.name} on {plan.base.system.name}: candidates")
    ax.legend(fontsize=8)
    fig.tight_layout()
    savefig_whole(fig, path, dpi=120)
    plt.close(fig)
    return path


def pareto_front(fitting: List[Outcome]) -> List[Outcome]:
    """Candidates no other beats on both throughput and fullest tile, by fullest tile."""
    front: List[Outcome] = []
    for o in sorted(fitting, key=lambda o: (o.peak_tile_bytes, -o.samples_per_s)):
        if not front or o.samples_per_s > front[-1].samples_per_s:
            front.append(o)
    return front


def write_outputs(plan: Plan, top: List[Outcome], rejected: List[Outcome], out_dir: Path) -> Dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "plan.json"
    write_whole(path, json.dumps(plan_json(plan, top, rejected), indent=2))
    return {"plan": path, "pareto": pareto_plot(plan, out_dir / "pareto.png")}


def shortfall_line(closest: Optional[Outcome], plan: Plan) -> str:
    """The one line an infeasible problem ends with."""
    p = plan.problem
    head = (f"no configuration of {plan.base.model.name} {plan.base.model.size} fits on "
            f"{plan.base.system.name} ({p.num_ipus} IPUs) at global batch {p.global_batch:,}")
    if closest is None:
        return head
    changes = " ".join(differences(closest.candidate, p.recipe)) or "the recipe"
    return f"{head}: the closest ({changes}) leaves {closest.reason}"
