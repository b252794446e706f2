"""The model line's FLOPs keep a readable figure: a unit for small models, thousands separated for large ones."""
from __future__ import annotations

import pytest

from ipuexp.report.console import flops_text


@pytest.mark.parametrize("flops, text", [(13.7e6, "13.7 MFLOPs"), (240.6e9, "240.6 GFLOPs"),
                                         (1019.8e9, "1,019.8 GFLOPs"), (2.5e3, "2.5 kFLOPs"), (12, "12 FLOPs")])
def test_flops_text(flops, text):
    assert flops_text(flops) == text
