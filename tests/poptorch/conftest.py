"""A PopTorch session whose prediction is already made: the front end's behaviour without an engine run. Every test
has one (a test that needs another opens its own on top), so no test falls back on the session a script importing
ipuexp.poptorch gets, which writes its result under ./outputs and its run into ./mlflow.db when pytest exits."""
from __future__ import annotations

import pytest

from ipuexp.poptorch.session import Session, session


@pytest.fixture(autouse=True)
def job(tmp_path):
    s = Session(None, [], tmp_path)
    s.predicted = True
    with session(s):
        yield s
