"""Swept values written short and ordered: numbers, lists per IPU, paths."""
from ipuexp.report.option_values import compact, is_integer, order, parse


def test_parse_and_compact():
    assert parse("32") == 32 and parse("0.3") == 0.3 and parse("[0.2, 0.4]") == [0.2, 0.4]
    assert parse("grouped") == "grouped"
    assert is_integer("32") and not is_integer("0.3") and not is_integer("[1]")
    assert compact("0.30") == "0.3"
    assert compact("[0.15, 0.25, 0.25, 0.25]") == "[0.15, 0.25 x3]"
    assert compact("[3, 7, 7, 7]") == "[3, 7 x3]"
    assert compact("/home/me/configs/optimum/bert-large/ipu_config.json") == ".../ipu_config.json"
    assert compact("/home/someone/bert/ipu_config.json") == ".../bert/ipu_config.json"
    assert compact(None) == "-"


def test_scalars_before_lists_before_text():
    values = ["[0.3, 0.5, 0.5, 0.5]", "grouped", "0.3", "[0.2, 0.4, 0.4, 0.4]", "0.25", "[0.1, 0.1]"]
    assert sorted(values, key=order) == ["0.25", "0.3", "[0.1, 0.1]", "[0.2, 0.4, 0.4, 0.4]",
                                         "[0.3, 0.5, 0.5, 0.5]", "grouped"]
