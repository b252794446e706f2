"""The hardware and system groups: every field set and sourced, and the figures reproduce the published totals."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from ipuexp.config.schema import IPUHardware, SystemConfig
from ipuexp.config.store import CONF_DIR

IPU_FILES = sorted((CONF_DIR / "ipu").glob("*.yaml"))
SYSTEM_FILES = sorted((CONF_DIR / "system").glob("*.yaml"))

# Published per-IPU totals (Graphcore's IPU-M2000 and Bow-2000 datasheets): peak FP16.16 and FP32 FLOP/s,
# SRAM per IPU in MiB, aggregate In-Processor-Memory bandwidth (None: not published for that generation).
PUBLISHED = {
    "mk1": dict(fp16=124.5e12, fp32=31.1e12, sram_mib=304, memory_bw=45e12),   # [a], [f]
    "mk2": dict(fp16=250e12, fp32=62.5e12, sram_mib=897, memory_bw=47.5e12),   # [b], [c], [k], [l]
    "bow": dict(fp16=350e12, fp32=87.1e12, sram_mib=897, memory_bw=None),      # [b2], [d2], [j]
}


def _documented_keys(path: Path) -> dict:
    """key -> True if the key's line has an inline comment or the line above it is a comment."""
    lines = path.read_text().splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = re.match(r"^(\w+):", line)
        if m:
            out[m.group(1)] = "#" in line or (i > 0 and lines[i - 1].lstrip().startswith("#"))
    return out


def test_groups_exist():
    assert {p.stem for p in IPU_FILES} == {"mk1", "mk2", "bow"}
    assert {"pod4", "pod16", "pod64", "pod128", "pod256"} <= {p.stem for p in SYSTEM_FILES}


@pytest.mark.parametrize("path", IPU_FILES + SYSTEM_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_field_is_set_with_its_source(path):
    schema = IPUHardware if path.parent.name == "ipu" else SystemConfig
    documented = _documented_keys(path)
    fields = [f.name for f in dataclasses.fields(schema)]
    assert sorted(documented) == sorted(fields), f"{path.name} must set every {schema.__name__} field"
    undocumented = [k for k, ok in documented.items() if not ok]
    assert not undocumented, f"{path.name}: no source comment for {undocumented}"
    assert yaml.safe_load(path.read_text())["name"] == path.stem


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_ipu_figures_reproduce_published_totals(name, compose_config):
    ipu = compose_config([f"ipu={name}", "system=server16" if name == "mk1" else "system=pod16"]).ipu
    pub = PUBLISHED[name]
    rate = ipu.tiles * ipu.clock_hz
    assert ipu.flops_per_cycle_per_tile_fp16 * rate == pytest.approx(pub["fp16"], rel=0.03)
    assert ipu.flops_per_cycle_per_tile_fp32 * rate == pytest.approx(pub["fp32"], rel=0.03)
    assert ipu.tiles * ipu.memory_per_tile_bytes == pub["sram_mib"] * 2**20
    if pub["memory_bw"]:
        assert ipu.tile_memory_bytes_per_cycle * rate == pytest.approx(pub["memory_bw"], rel=0.01)


def test_exchange_scales_per_tile_and_cycle(compose_config):
    """Mk1/Bow exchange rates are Mk2's published 8 TB/s at the same bytes per tile per cycle."""
    per = {}
    for name, system in (("mk1", "server16"), ("mk2", "pod16"), ("bow", "pod16")):
        ipu = compose_config([f"ipu={name}", f"system={system}"]).ipu
        per[name] = ipu.exchange_bytes_per_s / (ipu.tiles * ipu.clock_hz)
    assert per["mk1"] == pytest.approx(per["mk2"], rel=0.01)
    assert per["bow"] == pytest.approx(per["mk2"], rel=0.01)


@pytest.mark.parametrize("name,ipus,racks,topology", [
    ("pod4", 4, 1, "ladder"), ("pod16", 16, 1, "ladder"), ("pod64", 64, 1, "2d_torus"),
    ("pod128", 128, 2, "2d_torus"), ("pod256", 256, 4, "2d_torus"),
])
def test_pod_systems(name, ipus, racks, topology, compose_config):
    system = compose_config([f"system={name}"]).system
    assert (system.num_ipus, system.num_racks, system.topology) == (ipus, racks, topology)
    assert system.ipus_per_machine == 4 and system.num_ipus % system.ipus_per_machine == 0
    assert racks == 1 or system.num_ipus // racks == 64  # POD128/256 are POD64 racks joined by GW-Links
    assert system.gw_link_bytes_per_s > 0
