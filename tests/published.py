"""Public locators of Graphcore's published configuration files and their copies in ``../shared``.

Recipes and calibration runs cite the public file (``graphcore/examples@COMMIT:PATH#CONFIG``); the tests read the
copy beside the project to check that nothing drifted.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

SHARED = Path(__file__).resolve().parents[1].parent / "shared"

_COPIES = {
    "graphcore/examples@3cc8f81:nlp/bert/tensorflow2/configs/": "reference/graphcore-configs/examples/"
                                                                "HEAD_nlp_bert_tensorflow2_configs_selected.json",
    "mlcommons/training_results_v1.1:Graphcore/benchmarks/resnet/implementations/tensorflow/configs.yml":
        "reference/graphcore-configs/mlperf/v1.1_resnet_tf1_configs.yml",
    "mlcommons/training_results_v2.0:Graphcore/benchmarks/resnet/implementations/tensorflow/configs.yml":
        "reference/graphcore-configs/mlperf/v2.0_resnet_tf1_configs.yml",
    "graphcore/examples@3cc8f81:tutorials/tutorials/pytorch/pipelining/": "seeds/002_09441df96189f4e6.txt",
}
_COMMIT_PREFIX = {"3cc8f81": "HEAD", "187775b": "187775b", "9b61ab6": "9b61ab6"}


def shared_copy(source: str) -> Tuple[Path, str]:
    """The copy under ``../shared`` of a public ``source`` locator, and the configuration name within it."""
    locator, _, config = source.partition("#")
    for prefix, copy in _COPIES.items():
        if locator.startswith(prefix):
            rest = locator[len(prefix):]
            # The TF2 copy bundles several JSON files, keyed by their path in the repository.
            return SHARED / copy, (locator.split(":", 1)[1] if rest else config)
    repo_commit, _, path = locator.partition(":")
    repo, _, commit = repo_commit.partition("@")
    assert repo == "graphcore/examples" and commit in _COMMIT_PREFIX, f"unknown source {source!r}"
    return SHARED / "reference/graphcore-configs/examples" / f"{_COMMIT_PREFIX[commit]}_{path.replace('/', '_')}", config


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
