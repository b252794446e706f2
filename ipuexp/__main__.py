"""``python -m ipuexp``: compose the Hydra config, check it, run the job, track it.

Configuration errors (unknown keys, wrong types, cross-field rules) are caught before Hydra starts the job and
reported as one line naming the key, the value and what is allowed, with exit code 2.
"""
from __future__ import annotations

import sys
from typing import List, Optional

EXIT_CONFIG_ERROR = 2


def _is_multirun(argv: List[str]) -> bool:
    return any(a in ("-m", "--multirun") for a in argv)


def _wants_hydra_only(argv: List[str]) -> bool:
    """Hydra's own informational flags (--help, --cfg, --info, ...) need no pre-flight check."""
    return any(a.startswith(("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "--shell-completion", "-sc"))
               for a in argv)


def preflight(overrides: List[str], rules: bool = True) -> None:
    """Compose one configuration (``hydra.*`` overrides included) and, with ``rules``, validate it; raise
    ConfigError on the first problem."""
    from omegaconf import open_dict

    from ipuexp.config.compose import compose_config
    from ipuexp.config.errors import ConfigError
    from ipuexp.config.validate import validate

    cfg = compose_config(overrides, return_hydra_config=True)
    if cfg.hydra.runtime.choices.get("model") == "hf" and cfg.model.name != "hf":
        # +recipe=NAME is merged after the model group, so its model.name wins over model=hf's
        raise ConfigError("model.name", cfg.model.name, "allowed: hf with model=hf; a recipe sets model.name "
                          "after the model group: add model.name=hf to use the Transformers model with it")
    if rules:
        with open_dict(cfg):
            del cfg["hydra"]  # checked by composing; the experiment schema does not define it
        validate(cfg)


def sweep_points(overrides: List[str]) -> List[List[str]]:
    """The sweep points that try every swept value once: the first point, then that point with one swept key set
    to each of its other values (``a=1,2 b=x,y`` gives ``a=1 b=x``, ``a=2 b=x``, ``a=1 b=y``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    axes = [[f"{ov.get_key_element()}={v}" for v in ov.sweep_string_iterator()] if ov.is_sweep_override()
            else [ov.input_line] for ov in OverridesParser.create().parse_overrides(overrides)]
    first = [axis[0] for axis in axes]
    return [first] + [first[:i] + [value] + first[i + 1:] for i, axis in enumerate(axes) for value in axis[1:]]


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    from ipuexp.config.errors import ConfigError
    if not _wants_hydra_only(argv):
        overrides = [a for a in argv if not a.startswith("-")]
        try:
            # The first point is composed and validated; every other swept value is composed once, so a value the
            # schema rejects stops the sweep here. A rule broken by one combination fails that job alone.
            first, *others = sweep_points(overrides) if _is_multirun(argv) else [overrides]
            preflight(first)
            for point in others:
                preflight(point, rules=False)
        except ConfigError as err:
            print(f"ipuexp: config error: {err}", file=sys.stderr)
            sys.exit(EXIT_CONFIG_ERROR)
    try:
        _hydra_entry(argv)
    except KeyboardInterrupt:
        print("ipuexp: interrupted", file=sys.stderr)
        sys.exit(130)


def _hydra_entry(argv: List[str]) -> None:
    import hydra

    from ipuexp.config.store import CONF_PATH, register

    register()

    @hydra.main(version_base=None, config_path=CONF_PATH, config_name="config")
    def _job(cfg):
        from ipuexp.app import run_job

        return run_job(cfg)

    sys.argv = [sys.argv[0]] + argv
    _job()


if __name__ == "__main__":
    main()
