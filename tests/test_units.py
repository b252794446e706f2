"""Memory figures in binary units, as PopVision prints them."""
from ipuexp.units import GIB, KIB, MIB, column_unit, human_bytes, unit_of


def test_binary_units():
    assert human_bytes(624 * KIB) == "624.0 KiB"
    assert human_bytes(897 * MIB) == "897.0 MiB"
    assert human_bytes(1_000_000_000) == "953.7 MiB"  # a decimal GB is less than a GiB
    assert human_bytes(1.5 * GIB, 2) == "1.50 GiB"
    assert human_bytes(1023) == "1023 B"
    assert unit_of(1 << 30) == "GiB" and unit_of(1 << 20) == "MiB" and unit_of(100) == "B"


def test_one_unit_per_column():
    column = [1_069.5 * MIB, 969.5 * MIB, 1.2 * GIB]
    unit = column_unit(column)
    assert unit == "MiB"
    assert [human_bytes(v, 1, unit) for v in column] == ["1,069.5 MiB", "969.5 MiB", "1,228.8 MiB"]
    assert column_unit([]) == "B" and column_unit([0, 2 * KIB]) == "KiB"
    assert column_unit([1.1 * GIB, 1.5 * GIB]) == "GiB"
    assert column_unit([1.1 * GIB, 1.5 * GIB], largest="MiB") == "MiB"  # IPU memory: MiB, as PopVision
