"""The package layout's rules: imports follow the data flow (the import-linter contract in pyproject.toml) and no
module takes part in an import cycle, lazy function-level imports included."""
from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import grimp

ROOT = Path(__file__).resolve().parents[1]


def test_import_contract_is_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 kept, 0 broken" in proc.stdout


def _cycles(adjacency: Dict[str, List[str]]) -> List[List[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in adjacency[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(adjacency):
        if module not in index:
            visit(module)
    return found


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert _cycles({"a": ["b"], "b": []}) == []


@functools.lru_cache(maxsize=None)
def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("ipuexp")


def test_no_import_cycles():
    graph = _graph()
    adjacency = {m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i.startswith("ipuexp"))
                 for m in graph.modules}
    assert _cycles(adjacency) == []


def _folder(module: str) -> str:
    """The floor a module is on: its subpackage of ``ipuexp`` (``ipuexp.tracking``), or a top-level module."""
    return ".".join(module.split(".")[:2])


def test_no_cycle_between_subpackages():
    # Read as folders, the tree must have no cycle either: each folder sits on one floor.
    graph = _graph()
    adjacency: Dict[str, set] = {}
    for m in graph.modules:
        adjacency.setdefault(_folder(m), set()).update(
            _folder(i) for i in graph.find_modules_directly_imported_by(m)
            if i.startswith("ipuexp") and _folder(i) != _folder(m))
    assert _cycles({k: sorted(v) for k, v in adjacency.items()}) == []


def test_the_folder_cycle_finder_sees_a_cycle_through_two_modules_of_one_folder():
    assert _folder("ipuexp.calibration.fit") == _folder("ipuexp.calibration") == "ipuexp.calibration"
    assert _cycles({"ipuexp.a": ["ipuexp.b"], "ipuexp.b": ["ipuexp.a"]}) == [["ipuexp.a", "ipuexp.b"]]


CONFIG_ARGS = ("cfg", "config", "base_cfg")
"""Parameter names that hold a configuration."""


def test_no_function_takes_a_configuration_as_any():
    import ast

    untyped = []
    for path in sorted((ROOT / "ipuexp").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
                    shape = ast.unparse(arg.annotation).strip("'\"") if arg.annotation else None
                    if arg.arg in CONFIG_ARGS and shape in (None, "Any", "Optional[Any]"):
                        untyped.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}({arg.arg}: {shape})")
    assert untyped == []
