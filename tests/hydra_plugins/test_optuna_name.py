"""With hydra-optuna-sweeper installed too, ``hydra/sweeper=optuna`` is ipuexp's whichever plugin Hydra imports last,
the other stays reachable as ``hydra/sweeper=hydra_optuna`` (its samplers ``hydra_optuna_NAME``), and the sweep says
which is which. A stand-in for that plugin registers what it registers: ``optuna`` and its samplers."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

STAND_IN = '''from dataclasses import dataclass, field
from typing import Any, List

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class TPESamplerConfig:
    _target_: str = "optuna.samplers.TPESampler"
    seed: Any = None


@dataclass
class OptunaSweeperConf:
    _target_: str = "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    defaults: List[Any] = field(default_factory=lambda: [{"sampler": "tpe"}])
    sampler: Any = MISSING
    direction: Any = "minimize"


ConfigStore.instance().store(group="hydra/sweeper", name="optuna", node=OptunaSweeperConf, provider="optuna_sweeper")
ConfigStore.instance().store(group="hydra/sweeper/sampler", name="tpe", node=TPESamplerConfig,
                             provider="optuna_sweeper")
'''

APP = '''import sys
SITE = {site!r}
sys.path.{where}
import hydra


@hydra.main(version_base=None, config_path=None, config_name=None)
def main(cfg):
    return (cfg.x - 1) ** 2


if __name__ == "__main__":
    main()
'''


@pytest.mark.parametrize("where", ["insert(0, SITE)", "append(SITE)"])  # their plugin imported first, or last
def test_optuna_is_ipuexps_and_theirs_stays_reachable(tmp_path: Path, where: str) -> None:
    site = tmp_path / "site" / "hydra_plugins" / "hydra_optuna_sweeper"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    (site / "config.py").write_text(STAND_IN)
    (tmp_path / "app.py").write_text(APP.format(site=str(tmp_path / "site"), where=where))

    def sweeper(*args: str) -> str:
        proc = subprocess.run([sys.executable, "app.py", *args, "+x=1", "--cfg", "hydra",
                               "--package", "hydra.sweeper"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    ours = sweeper("hydra/sweeper=optuna")
    assert "_target_: hydra_plugins.ipuexp.optuna_sweeper.OptunaSweeper" in ours
    assert "deterministic_objective" not in ours and "n_ei_candidates: 24" in ours  # ipuexp's TPE settings
    theirs = sweeper("hydra/sweeper=hydra_optuna")
    assert "_target_: hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper" in theirs
    assert "n_ei_candidates" not in theirs  # its own TPE settings
    proc = subprocess.run([sys.executable, "app.py", "-m", "hydra/sweeper=optuna", "+x=range(0,3)",
                           "hydra.sweeper.n_trials=2", "hydra.sweep.dir=sweep"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert ("hydra/sweeper=optuna is ipuexp's Optuna sweeper; hydra-optuna-sweeper is installed too: "
            "hydra/sweeper=hydra_optuna (samplers hydra/sweeper/sampler=hydra_optuna_NAME)") in proc.stdout
