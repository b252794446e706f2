"""The out-of-memory remedies name only what helps: none that frees a trifle against the overflow, and more IPUs only
where the system has IPUs to spare."""
from __future__ import annotations

import copy
import re
from types import SimpleNamespace

from ipuexp.emulator.oom import FailingIPU, _remedies, oom_lines

from tests.emulator.test_memory import experiment, graph, memory


def _remedy_lines(report):
    return [line for line in report if re.match(r"\s+\d+\. ", line)]


def test_more_ipus_only_when_the_system_has_them():
    g = graph(mbs=256, hidden=1024, layers=4)
    exp = experiment(layers_per_ipu=(4,))
    exp.system.num_ipus = 16
    exp.options.replication_factor = 1
    spare = _remedy_lines(memory(exp, g).report)
    assert "layers_per_ipu" in spare[-1] and "15 of its 16 IPUs idle" in spare[-1]

    full = copy.deepcopy(exp)
    full.system.num_ipus = 1
    assert not any("more IPUs" in r for r in _remedy_lines(memory(full, g).report))


def test_fewer_replicas_when_every_ipu_is_in_use():
    g = graph(mbs=256, hidden=1024, layers=4)
    exp = experiment(layers_per_ipu=(4,))
    exp.system.num_ipus = 4
    exp.options.replication_factor = 4
    last = _remedy_lines(memory(exp, g).report)[-1]
    assert "fewer replicas" in last and "options.replication_factor=2" in last


def test_a_remedy_that_frees_a_trifle_is_not_named():
    """A tile 40 KiB over, on an IPU of 1472 such tiles: 148 B of weights in fp32 is not worth a line."""
    tile_memory = 638976
    breakdown = {"weights": 296, "temporary": 900 * 1024 * 1024}
    failing = [FailingIPU(ipu=0, tile=0, tile_bytes=tile_memory + 40 * 1024, tile_memory=tile_memory,
                          breakdown=breakdown, amp=0.6, layers=4, io_overflow=False, io_buffer_bytes=0,
                          io_buffer_limit=0)]
    opts = experiment().options
    opts.precision = "32.32"
    plan = SimpleNamespace(options=opts, micro_batch_size=1, training=True, recompute=True, ipus=(0,), replicas=1,
                           system=SimpleNamespace(num_ipus=4, name="pod4"))
    texts = [text for _, text in _remedies(failing, plan)]
    assert not any("fp16" in t for t in texts), texts
    assert any("available_memory_proportion" in t for t in texts)
    assert oom_lines(failing, plan)[0].startswith("Out of memory on tile 0")
