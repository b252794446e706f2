"""The calibration of the analytic engine: the data shipped with ipuexp (published training throughput of real
IPU systems and, per row, the configuration it was measured with, ``runs/<id>.yaml``), the fitted constants and their
ranges, the error bands and their reach, and a user's calibration: what every run reads, below ``ipuexp.config``
(which applies a calibration). The fit over this table runs the engine, so it is a floor above
(``ipuexp.fitting``), and so are the two commands (``ipuexp.commands.validate``, ``ipuexp.commands.calibrate``).

These runs are not user recipes: ``python -m ipuexp.validate`` composes them as the ``calibration_run`` config group,
which only it registers, so ``--help`` lists the user's recipes alone. Sources of every row are in the table's
``config_reference`` and ``throughput_source`` columns (see ``docs/sources.md``).
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

CALIBRATION_DIR = Path(__file__).resolve().parent
TABLE = CALIBRATION_DIR / "published-throughput.csv"
RUNS_DIR = CALIBRATION_DIR / "runs"
GROUP = "calibration_run"
"""Config group of the calibration runs (``+calibration_run=<id>``); ``calibration=NAME`` selects a user's fitted
constants (``ipuexp.calibration.user``)."""


@dataclass(frozen=True)
class Row:
    """One published measurement."""

    id: str
    ipu: str
    published: float
    """Published samples per second over the whole system."""
    model: str = ""
    system: str = ""
    ipus: int = 0
    """IPUs of the whole system the row ran on."""
    micro_batch: int = 0
    grad_accum: int = 0
    packed: bool = False
    """Packed sequences (several short sequences in one row): its throughput counts sequences, not packs."""

    @property
    def family(self) -> str:
        return family(self.model)


def family(model: str) -> str:
    """Model family of a calibration row or a configured model name: bert, resnet, vit, gpt, or the name. A
    Transformers model (``hf:bert-large-uncased``) belongs to the family its name starts with."""
    name = model.lower().removeprefix("hf:").replace("-", "").replace("_", "")
    for fam in ("bert", "resnet", "vit", "gpt"):
        if name.startswith(fam):
            return fam
    # the name up to its first hyphen: roberta-large: roberta; t5-small: t5; wav2vec2-base: wav2vec2; a user's own
    # mlp_classifier stays itself (its first word is no family)
    word = re.match(r"[a-z0-9_]+", model.lower().removeprefix("hf:"))
    return word.group(0) if word else (name or "unknown")


def _int(value: Any) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


def load_rows(path: Optional[Path] = None) -> List[Row]:
    """The rows of the calibration table (the shipped one unless ``path`` is given)."""
    with open(path or TABLE, newline="") as f:
        return [Row(r["id"], r["ipu"], float(r["throughput_samples_per_s"]), r.get("model", ""), r.get("system", ""),
                    _int(r.get("ipus")), _int(r.get("micro_batch")), _int(r.get("grad_accum")),
                    str(r.get("packed") or "no").strip().lower().startswith("yes"))
                for r in csv.DictReader(f)]


def unpredicted(rows: Sequence[Row]) -> List[Tuple[Row, str]]:
    """Rows the engine cannot predict yet, each with the reason: they are reported, not fitted."""
    out = []
    for row in rows:
        if not (RUNS_DIR / f"{row.id}.yaml").exists():
            out.append((row, f"no run configuration (ipuexp/calibration/runs/{row.id}.yaml)"))
    return out


HF_EXTRA = 'pip install -e ".[hf]"'
"""How a clone installs the hf extra that rows of ``model.name: hf`` need."""


def needs_extra(rows: Sequence[Row]) -> List[Row]:
    """Rows whose run is a Transformers model (``model.name: hf``) while Transformers is not installed: the base
    install cannot compose them."""
    import importlib.util

    if importlib.util.find_spec("transformers") is not None:
        return []
    from omegaconf import OmegaConf

    out = []
    for row in rows:
        path = RUNS_DIR / f"{row.id}.yaml"
        if path.exists() and OmegaConf.select(OmegaConf.load(path), "model.name") == "hf":
            out.append(row)
    return out


def run_names() -> List[str]:
    return sorted(p.stem for p in RUNS_DIR.glob("*.yaml"))


def register_runs() -> None:
    """Store every calibration run as ``+calibration_run=<id>`` (global package, like a recipe)."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    cs = ConfigStore.instance()
    stored = cs.repo.get(GROUP, {})
    for path in sorted(RUNS_DIR.glob("*.yaml")):
        if f"{path.stem}.yaml" in stored:  # stored earlier in this process: the packaged files do not change
            continue
        cs.store(group=GROUP, name=path.stem, node=OmegaConf.load(path), package="_global_")
