"""A user's calibration: the fitted constants refitted by ``python -m ipuexp.calibrate`` on runs the user measured,
kept as ``NAME.yaml`` in ``./calibration`` (or ``$IPUEXP_CALIBRATION_DIR``) and selected with ``calibration=NAME``
for any run, sweep or plan.

The file holds the constants, what they replaced, their leave-one-out ranges, the measured rows with their
predictions before and after the refit, and the leave-one-out residuals that the error bands of predictions made
under it come from (``ipuexp.calibration.band``). Selecting it changes ``ipu.calibration`` in the composed
configuration, so the resolved ``config.yaml`` of every job shows the constants it ran with.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ipuexp.calibration.band import Residual

if TYPE_CHECKING:
    from omegaconf import DictConfig

ENV = "IPUEXP_CALIBRATION_DIR"
SHIPPED = "shipped"
"""What the ``calibration`` tag of a run says when it used the constants shipped with ipuexp."""
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
FITTED_ON = ("shipped+measured", "measured")
"""What a calibration was fitted on: the shipped calibration rows and the measured ones, or the measured alone."""


@dataclass
class MeasuredRow:
    """One measured run as the calibration saw it."""

    id: str
    overrides: str
    """The command-line overrides that compose the run."""
    measured_samples_per_s: float
    before_samples_per_s: float
    """Predicted with the constants the calibration replaced."""
    after_samples_per_s: float
    """Predicted with the calibration's constants."""
    loo_samples_per_s: Optional[float] = None
    """Predicted with the constants refitted without this row (its leave-one-out prediction)."""
    family: str = ""
    measured_ipu_memory_bytes: Optional[int] = None
    predicted_ipu_memory_bytes: Optional[int] = None


@dataclass
class UserCalibration:
    """The content of ``NAME.yaml``."""

    name: str
    fitted_on: str
    """``shipped+measured``: the shipped calibration rows and the measured ones; ``measured``: the measured only."""
    constants: Dict[str, float]
    """The fitted constants (``ipuexp.calibration.fitted.FITTED``) that replace ``ipu.calibration``'s."""
    replaced: Dict[str, float]
    """The constants they replace (the shipped ones)."""
    loo_range: Dict[str, List[float]] = field(default_factory=dict)
    """Each constant's lowest and highest value over the leave-one-out refits."""
    rows: List[MeasuredRow] = field(default_factory=list)
    """The measured rows fitted on."""
    residuals: List[Residual] = field(default_factory=list)
    """Leave-one-out residuals of every row fitted on (shipped and measured): the error bands under this
    calibration."""
    created: str = ""
    command: str = ""

    @property
    def digest(self) -> str:
        return digest(self.constants)


def digest(constants: Mapping[str, Any]) -> str:
    """A short hash of fitted constants: runs tagged with the same one were predicted with the same constants."""
    blob = json.dumps({k: float(v) for k, v in sorted(constants.items())}, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def calibration_dir() -> Path:
    """``$IPUEXP_CALIBRATION_DIR``, else ``calibration`` in the folder the command was launched from (Hydra moves
    each job's working directory)."""
    from ipuexp.data.paths import launch_dir

    env = os.environ.get(ENV)
    return Path(os.path.expanduser(env)).resolve() if env else launch_dir() / "calibration"


def path_of(name: str, directory: Optional[Path] = None) -> Path:
    return (directory or calibration_dir()) / f"{name}.yaml"


def available(directory: Optional[Path] = None) -> List[str]:
    d = directory or calibration_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def check_name(name: str) -> None:
    """A calibration name is a file name: letters, digits, ``_ . -``; ``shipped`` names the shipped one."""
    if not NAME.match(name) or name == SHIPPED:
        raise ValueError(f"--name={name!r} is invalid: allowed letters, digits, '_', '.', '-' (a file name), "
                         f"not {SHIPPED!r}")


class NameTaken(FileExistsError):
    """``NAME.yaml`` appeared while this calibration was being fitted (another ``calibrate --name NAME``)."""


def save(cal: UserCalibration, directory: Optional[Path] = None, overwrite: bool = True) -> Path:
    """Write ``NAME.yaml`` whole or not at all: a temporary file of this process's own, then a rename. Without
    ``overwrite`` the rename is a hard link that fails (NameTaken) when the name was taken meanwhile, so two
    writers never replace each other's file; the temporary file is removed on any failure (a full disk too)."""
    import tempfile

    from omegaconf import OmegaConf

    path = path_of(cal.name, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# ipuexp calibration {cal.name!r}: select it with calibration={cal.name}\n"
              f"# Written by: {cal.command}\n" if cal.command else f"# ipuexp calibration {cal.name!r}\n")
    fd, tmp = tempfile.mkstemp(prefix=f".{cal.name}.", suffix=".yaml.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(header + OmegaConf.to_yaml(OmegaConf.structured(cal)))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        if overwrite:
            os.replace(tmp, path)
        else:
            _claim(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    _load.cache_clear()
    return path


def _claim(tmp: str, path: Path) -> None:
    """Put ``tmp`` at ``path`` unless ``path`` exists, atomically: a hard link, or where the file system has none
    an exclusive create of the name, then the rename over it."""
    try:
        os.link(tmp, path)
        return
    except FileExistsError:
        raise NameTaken(f"{path} was written meanwhile") from None
    except OSError:  # no hard links here (some network and FUSE file systems)
        pass
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        raise NameTaken(f"{path} was written meanwhile") from None
    os.replace(tmp, path)


def free_name(name: str, directory: Optional[Path] = None) -> str:
    """``NAME-2``, ``NAME-3``, ...: the first calibration name not taken, to keep a fit whose name was taken."""
    n = 2
    while path_of(f"{name}-{n}", directory).exists():
        n += 1
    return f"{name}-{n}"


class CalibrationError(ValueError):
    """No calibration of that name, or a file that is not one: ``allowed`` says what is there (``calibration=NAME``
    turns it into the config error of that key)."""

    def __init__(self, name: str, allowed: str):
        self.name, self.allowed = name, allowed
        super().__init__(f"calibration={name!r} is invalid: {allowed}")


def load(name: str, directory: Optional[Path] = None) -> UserCalibration:
    """The calibration ``name``; a CalibrationError (one line) when there is none or the file is not one."""
    path = path_of(name, directory)
    if not NAME.match(name) or not path.is_file():
        names = available(directory)
        there = f"calibrations in {path.parent}: {', '.join(names)}" if names else f"no calibration in {path.parent}"
        raise CalibrationError(name, f"allowed: null (the shipped one) or a name made by python -m "
                          f"ipuexp.calibrate FILE.csv --name NAME ({there})")
    try:
        return _load(str(path), path.stat().st_mtime_ns)
    except Exception as exc:  # a file edited by hand: name it and what is wrong, in one line
        first = " ".join(str(exc).split())[:300]
        raise CalibrationError(name, f"{path} is not a calibration file: {first}") from None


@lru_cache(maxsize=8)
def _load(path: str, _mtime: int) -> UserCalibration:
    from omegaconf import OmegaConf

    cal = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(UserCalibration), OmegaConf.load(path)))
    check(cal)
    return cal


def check(cal: UserCalibration) -> None:
    """What a calibration file must hold to predict with (ValueError naming the first key that does not): known
    constants, each a finite number inside its physical range (``fitted.FITTED``), and the residuals that the error
    bands under it come from. Checked when the file is loaded, so a run, sweep or plan refuses it before it starts."""
    from ipuexp.calibration.fitted import FITTED

    unknown = sorted(set(cal.constants) - set(FITTED))
    if unknown or not cal.constants:
        raise ValueError(f"constants must be among {', '.join(FITTED)}; found {', '.join(cal.constants) or 'none'}")
    if cal.fitted_on not in FITTED_ON:
        raise ValueError(f"fitted_on={cal.fitted_on!r} is invalid: allowed: {' | '.join(FITTED_ON)}")
    for key, value in cal.constants.items():
        low, high = FITTED[key]
        if not _number(value) or not low * (1 - 1e-9) <= value <= high * (1 + 1e-9):
            raise ValueError(f"constants.{key}={value!r} is invalid: allowed: a number in [{low:g}, {high:g}] (its "
                             "physical range, ipuexp.calibration.fitted.FITTED)")
    for key, value in cal.replaced.items():
        if not _number(value) or value <= 0:
            raise ValueError(f"replaced.{key}={value!r} is invalid: allowed: a number > 0")
    if not cal.residuals:
        raise ValueError("residuals=[] is invalid: allowed: the leave-one-out residuals python -m ipuexp.calibrate "
                         "writes (the error bands come from them; the file was cut off or edited?)")
    for i, r in enumerate(cal.residuals):
        if not math.isfinite(r.loo_error_pct) or r.ipus < 1 or r.micro_batch < 1 or r.grad_accum < 1:
            raise ValueError(f"residuals[{i}]={r.id!r} is invalid: allowed: a finite loo_error_pct and ipus, "
                             "micro_batch, grad_accum >= 1")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def residuals_for(name: Optional[str]) -> Optional[Tuple[Residual, ...]]:
    """The residuals the error bands of a prediction under calibration ``name`` come from (None: the shipped
    ones)."""
    if not name or name == SHIPPED:
        return None
    return tuple(load(name).residuals)


def apply(cfg: DictConfig) -> None:
    """Put the constants of ``cfg.calibration`` (a name) into ``cfg.ipu.calibration``, in place; nothing for null."""
    from omegaconf import open_dict

    name = cfg.get("calibration")
    if not name or name == SHIPPED:
        return
    cal = load(str(name))
    with open_dict(cfg.ipu):
        for key, value in cal.constants.items():
            cfg.ipu.calibration[key] = float(value)


def tag_of(name: Optional[str], constants: Mapping[str, Any]) -> Dict[str, str]:
    """The run tags that say which calibration a prediction used: its name and a hash of its constants."""
    from ipuexp.calibration.fitted import FITTED

    return {"calibration": name or SHIPPED,
            "calibration_hash": digest({k: constants[k] for k in FITTED if k in constants})}
