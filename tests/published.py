"""Public locators of Graphcore's published configuration files and their copies in ``tests/data``.

Recipes and calibration runs cite the public file (``graphcore/examples@COMMIT:PATH#CONFIG``); the tests read the
copy kept with them (``tests/data/graphcore-configs``, Apache-2.0, sources in its README) to check that nothing
drifted.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

DATA = Path(__file__).resolve().parent / "data"
"""The published files the tests compare against (configurations, the calibration table, Optimum ipu_configs)."""

_COPIES = {
    "graphcore/examples@3cc8f81:nlp/bert/tensorflow2/configs/": "graphcore-configs/examples/"
                                                                "HEAD_nlp_bert_tensorflow2_configs_selected.json",
    "mlcommons/training_results_v1.1:Graphcore/benchmarks/resnet/implementations/tensorflow/configs.yml":
        "graphcore-configs/mlperf/v1.1_resnet_tf1_configs.yml",
    "mlcommons/training_results_v2.0:Graphcore/benchmarks/resnet/implementations/tensorflow/configs.yml":
        "graphcore-configs/mlperf/v2.0_resnet_tf1_configs.yml",
    "graphcore/examples@3cc8f81:tutorials/tutorials/pytorch/pipelining/":
        "graphcore-tutorials/HEAD_tutorials_tutorials_pytorch_pipelining_README.txt",
}
_COMMIT_PREFIX = {"3cc8f81": "HEAD", "187775b": "187775b", "9b61ab6": "9b61ab6"}


def shared_copy(source: str) -> Tuple[Path, str]:
    """The copy under ``tests/data`` of a public ``source`` locator, and the configuration name within it."""
    locator, _, config = source.partition("#")
    for prefix, copy in _COPIES.items():
        if locator.startswith(prefix):
            rest = locator[len(prefix):]
            # The TF2 copy bundles several JSON files, keyed by their path in the repository.
            return DATA / copy, (locator.split(":", 1)[1] if rest else config)
    repo_commit, _, path = locator.partition(":")
    repo, _, commit = repo_commit.partition("@")
    assert repo == "graphcore/examples" and commit in _COMMIT_PREFIX, f"unknown source {source!r}"
    return DATA / "graphcore-configs/examples" / f"{_COMMIT_PREFIX[commit]}_{path.replace('/', '_')}", config


def split_bundle(path: Path, folder: Path) -> List[Path]:
    """The JSON files a bundled copy holds (``### repository/path`` before each), written to ``folder`` under their
    own names; any other file is returned as it is."""
    text = path.read_text(encoding="utf-8")
    if not text.startswith("### "):
        return [path]
    out = []
    for part in text.split("### ")[1:]:
        name, _, body = part.partition("\n")
        target = folder / Path(name.strip()).name
        target.write_text(body, encoding="utf-8")
        out.append(target)
    return out


def bundled(path: Path, name: str, folder: Path) -> Path:
    """The file ``name`` (its repository path) of a bundled copy, written to ``folder``."""
    return next(p for p in split_bundle(path, folder) if p.name == Path(name).name)
