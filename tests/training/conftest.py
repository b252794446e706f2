"""Functional-engine tests run torch single-threaded: their micro-batches are small, and on a shared machine
intra-op threads spin against other processes far more than they help."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
