"""A non-editable install runs on its own: configs, recipes, the calibration table and the MNIST test set ship in
the package, and nothing reads the source tree or the material beside it."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What a user sees: the package's code, configs and data files, and the Hydra plugin.
USER_FACING = [p for folder in ("ipuexp", "hydra_plugins") for p in (ROOT / folder).rglob("*")
               if p.suffix in (".py", ".yaml", ".csv", ".md") and "__pycache__" not in p.parts]
NOT_PUBLIC = re.compile(r"\.\./shared|shared/|\b[Ss]eeds?[ /]?0\d\d\b|graphcore-facts|parents\[[2-9]\]")


def test_no_user_facing_file_cites_the_private_material():
    assert len(USER_FACING) > 50
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in USER_FACING
            for n, line in enumerate(p.read_text().splitlines(), 1) if NOT_PUBLIC.search(line)]
    assert not hits, "cite public documents by title (docs/sources.md) instead:\n" + "\n".join(hits[:20])


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """``pip install .`` (not editable, no dependencies: they are this interpreter's) into a fresh target."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(ROOT)], check=True, capture_output=True, timeout=300)
    return target


def _run(args, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MLFLOW", "IPUEXP"))}
    env.update(PYTHONPATH=str(site), MLFLOW_TRACKING_URI=f"sqlite:///{cwd / 'mlflow.db'}",
               IPUEXP_CACHE_DIR=str(cwd / "captures"), PYTHONUNBUFFERED="1", COLUMNS="200")
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_installed_package_runs_from_an_unrelated_directory(installed, tmp_path):
    where = _run(["-c", "import ipuexp, hydra_plugins.ipuexp as l; print(ipuexp.__file__, l.__file__)"],
                 installed, tmp_path)
    assert where.returncode == 0, where.stderr
    assert all(path.startswith(str(installed)) for path in where.stdout.split()), where.stdout

    bert = _run(["-m", "ipuexp", "+recipe=bert_large", "hydra.run.dir=bert"], installed, tmp_path)
    assert bert.returncode == 0, bert.stderr[-2000:]
    assert (tmp_path / "bert" / "result.json").is_file()
    assert "samples/s" in bert.stdout

    mnist = _run(["-m", "ipuexp", "+recipe=mnist_pipeline", "engine.epochs=1", "hydra.run.dir=mnist"],
                 installed, tmp_path)
    assert mnist.returncode == 0, mnist.stderr[-2000:]
    assert re.search(r"test accuracy \d+\.\d+%", mnist.stdout), mnist.stdout[-2000:]

    # A shipped Transformers configuration, and an imported Optimum IPUConfig written to ./recipes of the launch
    # directory and run from there.
    if importlib.util.find_spec("transformers") is not None:
        hf = _run(["-m", "ipuexp", "model=hf", "model.hf.config=bert-base-uncased", "hydra.run.dir=hf",
                   "options.pipeline.layers_per_ipu=[6,6]", "options.gradient_accumulation=16"], installed, tmp_path)
        assert hf.returncode == 0, hf.stderr[-2000:]
        assert "hf:bert-base-uncased" in (tmp_path / "hf" / "result.json").read_text()
    (tmp_path / "ipu_config.json").write_text(json.dumps({"layers_per_ipu": [3, 7, 7, 7], "ipus_per_replica": 4,
                                                          "replication_factor": 4, "gradient_accumulation_steps": 64,
                                                          "matmul_proportion": 0.25}))
    imported = _run(["-m", "ipuexp.recipes", "import", "ipu_config.json", "--base", "bert_large", "--name", "mine"],
                    installed, tmp_path)
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert (tmp_path / "recipes" / "mine.yaml").is_file()
    mine = _run(["-m", "ipuexp", "+recipe=mine", "hydra.run.dir=mine"], installed, tmp_path)
    assert mine.returncode == 0, mine.stderr[-2000:]
    assert json.loads((tmp_path / "mine" / "result.json").read_text())["recipe"] == "mine"

    check = _run(["-m", "ipuexp.validate", "--no-loo"], installed, tmp_path)
    assert check.returncode == 0, check.stderr[-2000:]  # a report: gates shown, exit 0 (--check gates)
    for row in ("bert_large_ph1_bow_pod16_tf2", "resnet50_mk2_pod256_tf1_mlperf11",
                "vit_b16_finetune_bow_pod16_pytorch"):
        assert row in check.stdout
    assert "MAPE" in check.stdout


def test_help_lists_user_recipes_only(tmp_path):
    out = _run(["-m", "ipuexp", "--help"], ROOT, tmp_path)
    text = " ".join(out.stdout.split())
    line = text.split("recipe: ", 1)[1].split(" sweep: ", 1)[0]
    assert "bert_large" in line and "calib" not in line and "resnet50_mk2_pod128" not in line


def test_no_test_reads_material_outside_the_repository():
    # A fresh clone has no ../shared beside it: every file a test compares against is kept in tests/data.
    outside = re.compile(r"\.\./shared|/ \"shared\"|parents\[1\]\.parent|\bSHARED\b")
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in (ROOT / "tests").rglob("*.py")
            for n, line in enumerate(p.read_text().splitlines(), 1) if outside.search(line)
            and p.name != "test_packaging.py"]
    assert not hits, hits
