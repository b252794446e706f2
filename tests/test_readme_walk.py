"""The README walk: every command of the README's runnable code blocks, run where a new user stands.

How README.md marks a block (an HTML comment on the line before it, invisible on GitHub):

- ``<!-- walk -->`` before a code block (indented or fenced): the block runs. A block whose lines start with ``$ ``
  is a transcript: each ``$ `` line is a command (continued by a trailing backslash; a trailing
  ``# exit status N`` says it exits with status N), and the lines up to the next
  ``$ `` line are what it prints, stdout and stderr together, compared line by line (trailing blanks ignored). A
  line ``...`` stands for any number of lines (none included). A block without ``$ `` lines is a list of
  commands, one a line (a trailing ``# comment`` is dropped), checked for their exit status only.
- ``<!-- walk: exit=N -->``: the block's commands exit with status N (default 0).
- ``<!-- walk: file NAME -->`` before a block: the block is written to ``NAME`` in the walk's folder (the file a user
  writes, e.g. their own model), for the commands after it.

The README is walked as a user walks it: in one folder, from its first command to its last, in the README's
order (each section a test of its own, run in turn), so that a section's commands meet what the sections before
left (the runs in ``./mlflow.db``, the recipes imported, the files written). The walk has one graph-capture cache
(``IPUEXP_CACHE_DIR``), a temporary HOME, no MLflow settings from the environment (runs go to ``./mlflow.db``)
and ``COLUMNS=80`` unless the command sets it. Commands run with ``bash -c`` and this interpreter's ``python``
first on the PATH. A section selected alone (``-k``) starts from an empty folder.

What is normalised before comparing, because it truly varies from run to run: run folders' dates and times
(``outputs/2026-11-26/23-42-22`` -> ``outputs/DATE/TIME``), MLflow run ids (32 hex digits), Hydra's log time
stamps (``[2026-11-27 01:28:38,654]`` -> ``[...]``), Optuna's generated study names, absolute paths under the walk
folder, the wall-clock durations of a sweep's last line (``9 jobs in 4.1 s, ... per job 220 ms ...``) and of a
plan's first paragraph (``8,103 candidates in 44.2 s (184/s; ...), graph capture 0.1 s``), and the host's own
samples/s of a PopTorch script's numerics.

Commands that a walk does not run, each with its reason, are in ``NOT_RUN`` below; ``IPUEXP_WALK_ALL=1`` runs the
slow ones too. Without Transformers (the README's first install), the commands of a Transformers model
(``model=hf``, ``model.name=hf``) are left out, as the README says to install the hf extra for them.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# Commands (by their start, after any VAR=value prefix) a walk does not run, and why.
NOT_RUN: Dict[str, str] = {
    "mlflow ui": "starts a server that runs until stopped",
    "python -m ipuexp.recipes import FILE": "a placeholder for the user's file; the examples below import real ones",
    "python -m ipuexp.poptorch --system pod4 train.py -- ": "train.py is the user's script; tests/poptorch runs "
                                                             "the tutorial's",
    "python -m ipuexp +recipe=bert_base tracking.uri=http://10.0.0.9": "what it prints depends on the network (a "
                                                                      "proxy may answer for 10.0.0.9); "
                                                                      "tests/tracking check the probe",
}
SLOW: Dict[str, str] = {
    "python -m ipuexp.plan": "a plan searches thousands of candidates (about 20 s); tests/plan check the planner",
    "python -m ipuexp.validate": "refits every calibration row (about 12 s); tests/commands check it",
    "python -m ipuexp -m +recipe=bert_large +sweep=ga_di_io": "48 jobs; the 9-point sweeps of the README run",
    "python -m ipuexp -m +recipe=bert_large +sweep=amp": "24 jobs; the 9-point sweeps of the README run",
    "python -m ipuexp model=hf model.hf.config=bert-base-uncased": "imports Transformers (the hf extra); its "
                                                                   "BERT-Large transcript runs",
}
# Sections walked only with IPUEXP_WALK_ALL=1, and why.
SLOW_SECTIONS: Dict[str, str] = {
    "A worked example": "the refit of the calibration takes about 50 s, and the section's runs need its file; "
                        "tests/commands run the command",
}
# Commands of a Transformers model need the hf extra, which the README's first install leaves out (it says to
# install the extra first): on the base install the walk leaves them out.
NEEDS_HF = re.compile(r"(^|\s)\+?model(\.name)?=hf(\s|$)")
HAS_HF = importlib.util.find_spec("transformers") is not None
# Files a command names that are the user's own, and what stands for them in the walk.
USER_FILES: Dict[str, str] = {
    "train.py": "tests/poptorch/scripts/mnist_pipelining.py",   # the PopTorch tutorial's script, as README says
}
TIMEOUT_S = 600


@dataclass
class Step:
    line: int                       # README line of the command (1-based)
    command: str = ""
    expected: Optional[List[str]] = None   # None: exit status only
    exit_status: int = 0
    file: Optional[Tuple[str, str]] = None  # (name, content) to write instead of running


@dataclass
class Section:
    title: str
    line: int
    steps: List[Step] = field(default_factory=list)


def _blocks(lines: List[str]):
    """(marker, first line index, block lines) for each code block after a ``<!-- walk ... -->`` comment."""
    i = 0
    while i < len(lines):
        m = re.fullmatch(r"\s*<!-- walk(?::\s*(.*?))?\s*-->\s*", lines[i])
        if not m:
            i += 1
            continue
        marker = (m.group(1) or "").strip()
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j < len(lines) and lines[j].lstrip().startswith("```"):
            k = j + 1
            while k < len(lines) and not lines[k].lstrip().startswith("```"):
                k += 1
            yield marker, j + 1, lines[j + 1:k]
            i = k + 1
        else:
            k = j
            while k < len(lines) and (lines[k].startswith("    ") or not lines[k].strip()):
                k += 1
            while k > j and not lines[k - 1].strip():
                k -= 1
            yield marker, j, [line[4:] for line in lines[j:k]]
            i = k


def _join(block: List[str], start: int) -> Tuple[str, int]:
    """The command starting at ``block[start]`` with its backslash continuations, and the index after it."""
    parts = []
    k = start
    while True:
        text = block[k].rstrip()
        if text.endswith("\\"):
            parts.append(text[:-1].strip())
            k += 1
            continue
        parts.append(text.strip())
        return " ".join(p for p in parts if p), k + 1


def sections() -> List[Section]:
    lines = README.read_text(encoding="utf-8").splitlines()
    heads = [(i, line.lstrip("#").strip()) for i, line in enumerate(lines) if re.match(r"#{2,3} ", line)]

    def section_of(index: int) -> Tuple[int, str]:
        found = (0, "README")
        for i, title in heads:
            if i <= index:
                found = (i, title)
        return found

    out: Dict[int, Section] = {}
    for marker, first, block in _blocks(lines):
        head_line, title = section_of(first)
        sec = out.setdefault(head_line, Section(title, head_line + 1))
        exit_status = int(re.search(r"exit=(\d+)", marker).group(1)) if "exit=" in marker else 0
        name = re.match(r"file\s+(\S+)", marker)
        if name:
            sec.steps.append(Step(first + 1, file=(name.group(1), "\n".join(block) + "\n")))
            continue
        if any(line.startswith("$ ") for line in block):
            if not block[0].startswith("$ "):
                raise AssertionError(f"README.md:{first + 1}: a transcript's first line must be a $ command")
            k = 0
            while k < len(block):
                start = k
                cmd_lines = [block[k][2:]]
                while cmd_lines[-1].rstrip().endswith("\\"):
                    k += 1
                    cmd_lines.append(block[k])
                k += 1
                command, _ = _join(cmd_lines, 0)
                status = exit_status
                comment = re.search(r"\s+#\s*(.*)$", command)
                if comment:
                    command = command[:comment.start()].rstrip()
                    said = re.search(r"exit status (\d+)", comment.group(1))
                    status = int(said.group(1)) if said else status
                expected = []
                while k < len(block) and not block[k].startswith("$ "):
                    expected.append(block[k])
                    k += 1
                while expected and not expected[-1].strip():
                    expected.pop()
                sec.steps.append(Step(first + start + 1, command=command, expected=expected, exit_status=status))
        else:
            k = 0
            while k < len(block):
                if not block[k].strip():
                    k += 1
                    continue
                start = k
                cmd_lines = [block[k]]
                while cmd_lines[-1].rstrip().endswith("\\"):
                    k += 1
                    cmd_lines.append(block[k])
                k += 1
                command, _ = _join(cmd_lines, 0)
                command = re.sub(r"\s+#\s.*$", "", command).strip()
                sec.steps.append(Step(first + start + 1, command=command, exit_status=exit_status))
    return [out[k] for k in sorted(out)]


_NORMALISE = [
    (re.compile(r"\b(outputs|multirun)/\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d"), r"\1/DATE/TIME"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "RUNID"),
    (re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\]"), "[...]"),
    (re.compile(r"\bno-name-[0-9a-f-]{36}\b"), "no-name-UUID"),
    # A sweep's last line: wall-clock durations.
    (re.compile(r"^(\s*\d+ jobs in )[\d.,]+ (m?s)"), r"\1T \2"),
    (re.compile(r"(per job )[\d.,]+ (m?s in the task, )[\d.,]+ (m?s in Hydra's run_job around it, )[\d.,]+ (m?s)"),
     r"\1T \2T \3T \4"),
    # A plan's first paragraph: how long its search and its graph capture took.
    (re.compile(r"(candidates in )[\d.,]+ s \([\d,]+/s;"), r"\1T s (R/s;"),
    (re.compile(r"(graph capture )[\d.,]+ s"), r"\1T s"),
    # What a PopTorch script's numerics measured on this host (not a prediction), and its final loss, whose last
    # digit moves with the order torch's CPU kernels sum in on another processor.
    (re.compile(r"^(ipuexp\.poptorch: this host ran them at )[\d,]+ (samples/s)$"), r"\1N \2"),
    (re.compile(r"(weight updates on this host, final loss )\d+\.\d+"), r"\1L"),
]


def normalise(line: str, folder: Optional[Path] = None) -> str:
    if folder is not None:
        line = line.replace(str(folder.resolve()), ".").replace(str(folder), ".")
    for pattern, repl in _NORMALISE:
        line = pattern.sub(repl, line)
    return line.rstrip()


def normalise_lines(lines: List[str], folder: Optional[Path] = None) -> List[str]:
    """``normalise`` each line; a sweep's last line (``N jobs in ...``), whose wrapping moves with its durations'
    digits, is joined with its continuation lines first."""
    out: List[str] = []
    joining = False
    for line in lines:
        if joining and line.startswith("    ") and line.strip() != "...":
            out[-1] = f"{out[-1]} {line.strip()}"
            continue
        joining = bool(re.match(r"^\s*\d+ jobs in [\d.,]+ m?s, ", line) or line.startswith("Planned "))
        out.append(line.rstrip())
    return [normalise(line, folder) for line in out]


def matches(expected: List[str], actual: List[str]) -> bool:
    """Line by line; an expected ``...`` matches any number of actual lines."""
    memo: Dict[Tuple[int, int], bool] = {}

    def go(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(expected):
            ok = j == len(actual)
        elif expected[i].strip() == "...":
            ok = go(i + 1, j) or (j < len(actual) and go(i, j + 1))
        elif expected[i].endswith(" ...") and expected[i].strip() != "...":
            ok = j < len(actual) and actual[j].startswith(expected[i][:-3]) and go(i + 1, j + 1)
        else:
            ok = j < len(actual) and expected[i] == actual[j] and go(i + 1, j + 1)
        memo[key] = ok
        return ok

    return go(0, 0)


def _reason(command: str) -> Tuple[Optional[str], bool]:
    """(why the walk does not run it, whether it is only slow)."""
    bare = re.sub(r"^(\w+=\S+\s+)+", "", command)
    for prefix, why in NOT_RUN.items():
        if bare.startswith(prefix):
            return why, False
    for prefix, why in SLOW.items():
        if bare.startswith(prefix):
            return why, True
    return None, False


def _env(home: Path, cache: Path) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLFLOW_", "IPUEXP_", "RAY_", "HYDRA_")) and k not in ("COLUMNS", "LINES")}
    env.update(HOME=str(home), IPUEXP_CACHE_DIR=str(cache), COLUMNS="80", PYTHONUNBUFFERED="1",
               MPLCONFIGDIR=str(home / ".config" / "matplotlib"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("PYTHONPATH", None)
    return env


SECTIONS = sections()


def _runs(section: Section) -> bool:
    if section.title in SLOW_SECTIONS and os.environ.get("IPUEXP_WALK_ALL") != "1":
        return False
    return any(s.command and (_reason(s.command)[0] is None or (_reason(s.command)[1]
                                                                  and os.environ.get("IPUEXP_WALK_ALL") == "1"))
               for s in section.steps)


WALKED = [s for s in SECTIONS if _runs(s)]


@pytest.fixture(scope="module")
def walk_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def walk_folder(tmp_path_factory) -> Path:
    """The one folder the whole README is walked in, and its capture cache beside it."""
    return tmp_path_factory.mktemp("walk")


def test_readme_marks_runnable_blocks():
    """The README has walkable blocks, among them the custom-model and importer examples."""
    commands = [s.command for sec in SECTIONS for s in sec.steps if s.command]
    assert len(commands) >= 20, commands
    assert any("model.target=" in c for c in commands)
    assert any(c.split("python -m ", 1)[-1].startswith("ipuexp.recipes import") for c in commands)
    files = [s.file[0] for sec in SECTIONS for s in sec.steps if s.file]
    assert files, "the custom model's file is written by the walk"


def test_transcript_matching():
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["a", "...", "b"], ["a", "b"])
    assert not matches(["a", "b"], ["a", "c"])
    assert matches(["Throughput: 1 samples/s, ..."], ["Throughput: 1 samples/s, step 2 ms"])
    assert normalise("Wrote x to outputs/2026-11-26/23-42-22/") == "Wrote x to outputs/DATE/TIME/"
    assert normalise_lines(["Planned x: 8,103 candidates in 44.2 s (184/s; 6,329 fully evaluated), graph",
                            "    capture 0.1 s"]) == \
        normalise_lines(["Planned x: 8,103 candidates in 7.9 s (1,025/s; 6,329 fully evaluated), graph capture",
                         "    0.2 s"])
    assert normalise_lines(["9 jobs in 4.1 s, 1 at a time; per job 220 ms in the task, 59 ms in Hydra's run_job "
                            "around it, 177", "    ms composing its configuration"]) == \
        normalise_lines(["9 jobs in 3.8 s, 1 at a time; per job 316 ms in the task, 27 ms in Hydra's run_job "
                         "around it, 71 ms", "    composing its configuration"])


@pytest.mark.slow
@pytest.mark.parametrize("section", WALKED, ids=[re.sub(r"\W+", "_", s.title).strip("_") for s in WALKED])
def test_readme_walk(section: Section, walk_folder: Path, walk_home: Path):
    folder = walk_folder / "here"
    folder.mkdir(exist_ok=True)
    env = _env(walk_home, walk_folder / "cache")
    run_all = os.environ.get("IPUEXP_WALK_ALL") == "1"
    problems: List[str] = []
    ran = 0
    for step in section.steps:
        if step.file:
            name, content = step.file
            (folder / name).write_text(content, encoding="utf-8")
            continue
        for name, source in USER_FILES.items():
            if re.search(rf"(^|\s){re.escape(name)}(\s|$)", step.command) and not (folder / name).exists():
                (folder / name).write_text((ROOT / source).read_text(encoding="utf-8"), encoding="utf-8")
        why, slow = _reason(step.command)
        if (why and not (slow and run_all)) or (NEEDS_HF.search(step.command) and not HAS_HF):
            continue
        proc = subprocess.run(["bash", "-c", step.command], cwd=folder, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_S)
        ran += 1
        out = proc.stdout.splitlines()
        where = f"README.md:{step.line}: $ {step.command}"
        if proc.returncode != step.exit_status:
            problems.append(f"{where}\nexit status {proc.returncode}, README says {step.exit_status}:\n"
                            + "\n".join(out[-40:]))
            continue
        if step.expected is not None:
            expected = normalise_lines(step.expected)
            actual = normalise_lines(out, folder)
            if not matches(expected, actual):
                problems.append(f"{where}\nthe README shows:\n" + "\n".join(expected)
                                + "\nthe command printed:\n" + "\n".join(actual))
    assert not problems, "\n\n".join(problems)
