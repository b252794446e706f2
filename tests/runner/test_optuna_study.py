"""The Optuna study's summary names the study's best trial, as written to ``optimization_results.yaml``."""
from __future__ import annotations

from pathlib import Path

import pytest
from hydra.core.utils import JobReturn, JobStatus

pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="Hydra's Optuna sweeper is the optuna extra")

from ipuexp.runner import summary  # noqa: E402
from ipuexp.runner.errors import DoesNotFit  # noqa: E402
from ipuexp.runner.optuna_study import _best_params, best_trial  # noqa: E402


def _trial(idx: int, amp: float, mbs: int, tput: float, ok: bool = True) -> summary.Outcome:
    ret = JobReturn(overrides=[f"data.micro_batch_size={mbs}", f"options.available_memory_proportion={amp}",
                               "+recipe=bert_large"], status=JobStatus.COMPLETED if ok else JobStatus.FAILED)
    ret.return_value = {"throughput": {"samples_per_s": tput}} if ok else DoesNotFit("does not fit in IPU memory")
    return summary.classify(idx, ret)


def test_the_studys_best_not_the_tables(tmp_path: Path) -> None:
    """A minimising study's best is its slowest trial: the summary names that one, matched by its parameters."""
    outcomes = [_trial(0, 0.2808290128214932, 16, 0.0, ok=False), _trial(1, 0.367531900234624, 8, 3514.2),
                _trial(2, 0.2704133683281797, 8, 3507.0)]
    results = tmp_path / "optimization_results.yaml"
    results.write_text("name: optuna\nbest_params:\n  data.micro_batch_size: 8\n"
                       "  options.available_memory_proportion: 0.2704133683281797\nbest_value: 3507.0\n")
    top = best_trial(outcomes, _best_params(results))
    assert top is outcomes[2] and summary.best(outcomes) is outcomes[1]
    assert best_trial(outcomes, None) is None and _best_params(tmp_path / "missing.yaml") is None
    # A trial that did not fit (FAILED for the study) is never the best, whatever its parameters.
    assert best_trial(outcomes, {"data.micro_batch_size": 16, "options.available_memory_proportion":
                                 0.2808290128214932}) is None
