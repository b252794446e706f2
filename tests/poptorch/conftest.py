"""A PopTorch session whose prediction is already made: the front end's behaviour without an engine run."""
from __future__ import annotations

import pytest

from ipuexp.poptorch.session import Session, session


@pytest.fixture
def job(tmp_path):
    s = Session(None, [], tmp_path)
    s.predicted = True
    with session(s):
        yield s
