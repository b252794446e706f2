"""The planner: the optimum of a small space found without enumerating it, the lower bound never above the memory
model, the recipe always a candidate, infeasible problems and bad input as one line."""
from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import replace

import pytest

from ipuexp.config.compose import compose_recipe
from ipuexp.plan import space as sp
from ipuexp.plan.candidate import apply
from ipuexp.plan.evaluate import FITS, OOM, PRUNED, variables_bound
from ipuexp.plan.planner import plan, prepare
from ipuexp.plan.settings import PlanConfig

# The MNIST pipeline (4 layers on 4 IPUs) with the host-side and location options held: a few thousand points.
SMALL_FIX = ["options.device_iterations", "options.num_instances", "options.io.prefetch_depth",
             "options.io.num_io_tiles", "options.tensor_locations.weights.on_chip",
             "options.tensor_locations.optimizer_state.on_chip",
             "options.tensor_locations.optimizer_state.replicated_tensor_sharding", "options.partials_type",
             "options.recomputation.mode", "options.recomputation.checkpoint_every_layer"]


@pytest.mark.slow
def test_optuna_finds_the_exhaustive_optimum_of_a_small_space():
    base = compose_recipe("mnist_pipeline")
    settings = dict(fix=SMALL_FIX, workers=1, refine=False)
    full = plan(base, PlanConfig(search="exhaustive", **settings), quiet=True)
    assert full.result.stats.method == "exhaustive"
    assert full.result.stats.candidates >= sp.size(full.problem) - full.result.stats.invalid
    searched = plan(base, PlanConfig(search="optuna", trials=600, **settings), quiet=True)
    assert searched.result.stats.candidates < full.result.stats.candidates / 2
    assert searched.best.score == pytest.approx(full.best.score, rel=1e-9)
    # The recipe's own configuration is a candidate, so the best is never below it at the lower end of the band.
    assert full.best.score >= full.result.recipe.score


def test_memory_lower_bound_never_exceeds_the_memory_model():
    base = compose_recipe("bert_large")
    problem, ev, _, _ = prepare(base, PlanConfig(fix=["data.micro_batch_size"]))
    rng = random.Random(0)
    everything = sp.layouts(problem)
    checked = 0
    for _ in range(120):
        lay, r = rng.choice(everything)
        dims = sp.dimensions(problem, lay, r)
        values = {k: rng.choice(v) for k, v in dims.items()}
        c = sp.build(lay, r, values)
        out = ev.evaluate(c)
        if out.status in (FITS, OOM):
            exp = apply(base, c)
            bound = dict(variables_bound(exp, ev.stages(c.layout, c.micro_batch)))
            for ipu, tile_bytes in zip(sorted(bound), out.ipu_tile_bytes):
                assert bound[ipu] <= tile_bytes
            checked += 1
    assert checked > 50


def test_pruned_candidates_are_over_the_limit_by_the_bound():
    base = compose_recipe("bert_large")
    problem, ev, _, _ = prepare(base, PlanConfig(fix=["data.micro_batch_size"]))
    # No replicas to shard over and everything on chip: IPU 1's seven layers of LAMB state do not fit.
    c = replace(problem.recipe, optimizer_state=(True, False))
    out = ev.evaluate(c)
    assert out.status in (PRUNED, OOM) and out.shortfall_bytes > 0 and "IPU" in out.reason


def test_fixed_keys_stay_fixed_and_unknown_keys_are_refused():
    base = compose_recipe("bert_large")
    problem, _, _, _ = prepare(base, PlanConfig(fix=["options.pipeline.schedule", "options.precision"]))
    assert all(sp.dimensions(problem, lay, r)["schedule"] == ("grouped",) for lay, r in sp.layouts(problem))
    from ipuexp.config.errors import ConfigError

    with pytest.raises(ConfigError, match="plan.fix"):
        prepare(base, PlanConfig(fix=["options.no_such_key"]))


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ipuexp.plan", "-q", "tracking.enabled=false", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.slow
def test_infeasible_problem_ends_with_one_line_saying_what_is_short(tmp_path):
    # 96 BERT-Large layers on an IPU-POD4: the weights and LAMB state alone exceed the four IPUs.
    proc = _cli("+recipe=bert_large", "system=pod4", "options.replication_factor=1", "model.num_layers=96",
                "options.pipeline.layers_per_ipu=[24,24,24,24]", "plan.trials=200", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ipuexp.plan: no configuration of bert large fits on pod4")
    assert "short by" in last and "IPU" in last


def test_bad_plan_setting_is_one_line(tmp_path):
    proc = _cli("+recipe=bert_large", "plan.search=greedy", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("ipuexp.plan: config error: plan.search='greedy' is invalid: allowed: "
                                   "auto | exhaustive | optuna")
    proc = _cli("+recipe=bert_large", "plan.no_such=1", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "plan.no_such" in proc.stderr
    # The samplers' seed NumPy refuses, before the search rather than after it.
    proc = _cli("+recipe=bert_large", "plan.seed=-1", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("ipuexp.plan: config error: plan.seed=-1 is invalid: allowed: an integer in "
                                   "[0, 4294967295]")
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("recipe, overrides", [("bert_large", []), ("resnet50_pod64", []), ("gpt2_medium", []),
                                               # more replicas than the recipe's global batch allows most layouts
                                               ("mnist_pipeline", ["system=pod64"])])
def test_best_is_never_slower_than_the_recipe(recipe, overrides):
    # The recipe's own configuration is evaluated first and kept, so a small trial budget cannot lose it.
    p = plan(compose_recipe(recipe, overrides), PlanConfig(trials=150, top_k=2), quiet=True)
    r = p.result.recipe
    assert r.candidate == p.problem.recipe and r.fits
    assert p.result.outcomes[p.problem.recipe] is r
    # The planner ranks by the lower end of the band (plan.rank=lower): the best is never below the recipe there.
    assert p.best.score >= r.score
