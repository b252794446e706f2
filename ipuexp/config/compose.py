"""Compose configurations from Python exactly as ``python -m ipuexp`` does (for notebooks, tests, validation)."""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from omegaconf import DictConfig, OmegaConf

from ipuexp.config.errors import ConfigError, from_omegaconf


def compose_config(overrides: Iterable[str] = (), return_hydra_config: bool = False) -> DictConfig:
    """The composed config for command-line style overrides; raises ConfigError naming the bad key.

    ``return_hydra_config`` keeps the ``hydra`` node (launcher, sweep dir, ...), so ``hydra.*`` overrides are
    checked too."""
    from hydra import compose, initialize_config_module

    from ipuexp.config.store import CONF_MODULE, register

    register()
    overrides = list(overrides)
    try:
        with initialize_config_module(config_module=CONF_MODULE, version_base=None, job_name="ipuexp"):
            cfg = compose(config_name="config", overrides=overrides, return_hydra_config=return_hydra_config)
    except ConfigError:
        raise
    except Exception as exc:  # Hydra wraps OmegaConf's errors; name the key they carry
        given = dict(o.split("=", 1) for o in overrides if "=" in o)
        err = from_omegaconf(exc, {k.lstrip("+~"): v for k, v in given.items()})
        if err.key == "?":  # a message that names no key: the first override that fails it, as typed
            culprit = _first_failing(overrides, return_hydra_config)
            if culprit is not None:
                key, _, value = culprit.partition("=")
                err = ConfigError(key.lstrip("+~"), value, str(err.allowed))
        raise err from None
    apply_imported_options(cfg, overrides)
    apply_calibration(cfg)
    return cfg


def _first_failing(overrides: Sequence[str], return_hydra_config: bool) -> Any:
    """The first override whose addition makes composing fail (the ones before it compose), or None."""
    from hydra import compose, initialize_config_module

    from ipuexp.config.store import CONF_MODULE

    for n in range(1, len(overrides) + 1):
        try:
            with initialize_config_module(config_module=CONF_MODULE, version_base=None, job_name="ipuexp"):
                compose(config_name="config", overrides=list(overrides[:n]), return_hydra_config=return_hydra_config)
        except Exception:
            return overrides[n - 1]
    return None


def apply_calibration(cfg: DictConfig) -> None:
    """The constants of ``calibration=NAME`` (``python -m ipuexp.calibrate``) into ``cfg.ipu.calibration``; a
    ConfigError when there is no such calibration."""
    from ipuexp.calibration.user import CalibrationError, apply

    try:
        apply(cfg)
    except CalibrationError as err:
        raise ConfigError("calibration", err.name, err.allowed) from None


def apply_imported_options(cfg: DictConfig, overrides: Iterable[str] = ()) -> list:
    """Apply the options of ``model.hf.ipu_config`` (an Optimum Graphcore ipu_config.json) to ``cfg`` in place:
    they override the recipe's, and the keys of ``overrides`` (the command line) keep their values. Returns the
    warnings (repeated keys, fields not modelled)."""
    from ipuexp.config import ipu_config as optimum

    return optimum.apply(cfg, list(overrides))


def load_experiment(*overrides: str) -> Any:
    """A validated ExperimentConfig object, e.g. ``load_experiment("+recipe=bert_large", "options.gradient_accumulation=512")``."""
    from ipuexp.config.validate import validate

    cfg = compose_config(overrides)
    validate(cfg)
    return OmegaConf.to_object(cfg)


def compose_recipe(recipe: str, overrides: Iterable[str] = ()) -> Any:
    """The validated ExperimentConfig object of ``+recipe=NAME`` with command-line style ``overrides``."""
    return load_experiment(f"+recipe={recipe}", *overrides)


def compose_run(row_id: str, overrides: Sequence[str] = ()) -> Any:
    """The validated ExperimentConfig object of a calibration row's configuration."""
    from ipuexp.calibration import GROUP, RUNS_DIR, register_runs

    if not (RUNS_DIR / f"{row_id}.yaml").exists():
        raise FileNotFoundError(f"calibration row {row_id!r} has no configuration: expected "
                                f"ipuexp/calibration/runs/{row_id}.yaml")
    register_runs()
    return load_experiment(f"+{GROUP}={row_id}", *overrides)
