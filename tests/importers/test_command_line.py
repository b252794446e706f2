"""A ``benchmarks.yml`` command line reads as the applications' argument parsers read it."""
from __future__ import annotations

from ipuexp.importers.command_line import parse_command


def test_command_lines_parse_like_argparse():
    script, flags, poprun = parse_command("poprun --num-replicas=16 --num-instances=8 python3 pretrain.py "
                                          "--config b16 --byteio true --matmul-proportion 0.3 0.2 --x ''")
    assert script == "pretrain.py" and poprun == {"num_replicas": 16, "num_instances": 8}
    assert flags == {"config": "b16", "byteio": True, "matmul_proportion": [0.3, 0.2], "x": None}
