"""Who answers ``hydra/sweeper=optuna`` when hydra-optuna-sweeper is installed beside ipuexp.

Both plugins store a config named ``optuna`` in the ``hydra/sweeper`` group (and ``tpe``, ``random``, ``grid``,
``nsgaii``, ``cmaes`` in ``hydra/sweeper/sampler``); Hydra keeps whichever plugin module it happened to import last.
Hydra imports every plugin module before it asks any search-path plugin for its path, so this one settles the names
then, the same way whatever the import order: ``optuna`` and the sampler names are ipuexp's (the sweeper on current
Optuna), and hydra-optuna-sweeper's sweeper stays reachable as ``hydra/sweeper=hydra_optuna``, with its samplers as
``hydra/sweeper/sampler=hydra_optuna_NAME`` (its default: ``hydra_optuna_tpe``). ipuexp's sweeper says so when its
study starts (``installed_too``).
"""
import sys
from typing import Any, Optional

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.config_store import ConfigStore
from hydra.plugins.search_path_plugin import SearchPathPlugin

THEIR_CONFIG = "hydra_plugins.hydra_optuna_sweeper.config"
"""hydra-optuna-sweeper's module of configs."""
THEIR_PROVIDER = "optuna_sweeper"
ALIAS = "hydra_optuna"
"""hydra-optuna-sweeper's sweeper (``hydra/sweeper=hydra_optuna``) and the prefix of its samplers' names."""
THEIR_SAMPLERS = {"tpe": "TPESamplerConfig", "random": "RandomSamplerConfig", "grid": "GridSamplerConfig",
                  "cmaes": "CmaEsSamplerConfig", "nsgaii": "NSGAIISamplerConfig", "motpe": "MOTPESamplerConfig"}


def installed_too() -> Optional[str]:
    """The line that says which Optuna sweeper ``hydra/sweeper=optuna`` is, when hydra-optuna-sweeper is there too."""
    if THEIR_CONFIG not in sys.modules:
        return None
    return (f"hydra/sweeper=optuna is ipuexp's Optuna sweeper; hydra-optuna-sweeper is installed too: "
            f"hydra/sweeper={ALIAS} (samplers hydra/sweeper/sampler={ALIAS}_NAME)")


def settle() -> None:
    """Store ipuexp's ``optuna`` and samplers, and hydra-optuna-sweeper's under ``hydra_optuna``, when both are
    installed (nothing otherwise)."""
    theirs: Any = sys.modules.get(THEIR_CONFIG)
    if theirs is None:
        return
    store = ConfigStore.instance()  # settled at every composition: a later scan of the plugins stores theirs again
    from omegaconf import OmegaConf

    from ipuexp.sweeps.optuna_config import SAMPLERS, OptunaSweeperConf

    for name, cls in THEIR_SAMPLERS.items():
        if hasattr(theirs, cls):
            store.store(group="hydra/sweeper/sampler", name=f"{ALIAS}_{name}", node=getattr(theirs, cls),
                        provider=THEIR_PROVIDER)
    node = OmegaConf.structured(theirs.OptunaSweeperConf)
    node.defaults = [{"sampler": f"{ALIAS}_tpe"}]
    store.store(group="hydra/sweeper", name=ALIAS, node=node, provider=THEIR_PROVIDER)
    store.store(group="hydra/sweeper", name="optuna", node=OptunaSweeperConf, provider="ipuexp")
    for name, conf in SAMPLERS.items():
        store.store(group="hydra/sweeper/sampler", name=name, node=conf, provider="ipuexp")


class OptunaName(SearchPathPlugin):
    """Runs ``settle`` once Hydra has imported every plugin, before any config is composed."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        settle()
