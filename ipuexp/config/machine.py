"""The ``ipu`` and ``system`` nodes of the configuration: one IPU generation and the system of IPUs around it.

Every figure carries its source in ``conf/ipu/*.yaml`` and ``conf/system/*.yaml``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class IPUHardware:
    """One IPU generation (config group ``ipu``). Every figure carries its source in ``conf/ipu/*.yaml``."""

    name: str = "mk2"
    """Generation name: mk1, mk2 or bow."""
    tiles: int = 1472
    """Tiles (cores) per IPU."""
    workers_per_tile: int = 6
    """Hardware worker threads per tile."""
    memory_per_tile_bytes: int = 638976
    """SRAM per tile in bytes."""
    clock_hz: float = 1.33e9
    """Tile clock frequency."""
    flops_per_cycle_per_tile_fp16: float = 128.0
    """Peak AMP FLOPs per cycle per tile with fp16 inputs and fp16 partials."""
    flops_per_cycle_per_tile_fp32: float = 32.0
    """Peak AMP FLOPs per cycle per tile with fp32 inputs."""
    tile_memory_bytes_per_cycle: float = 24.0
    """Bytes a tile can load/store per cycle from its own SRAM (aggregate bandwidth / tiles / clock)."""
    exchange_bytes_per_s: float = 8.0e12
    """On-chip tile-to-tile exchange bandwidth per IPU."""
    ipu_link_bytes_per_s: float = 320.0e9
    """Total IPU-Link bandwidth per IPU (all links), per direction."""
    ipu_links: int = 10
    """Number of IPU-Links per IPU."""
    host_link_bytes_per_s: float = 64.0e9
    """Host link bandwidth (PCIe Gen4 x16 or RoCE via the gateway) per IPU-Machine, per direction."""
    streaming_memory_bytes_per_s: float = 20.0e9
    """Bandwidth between an IPU and its Streaming Memory (off-chip DRAM), per direction."""
    sync_cycles: float = 150.0
    """Cycles of one on-chip BSP synchronisation."""
    calibration: Any = field(default_factory=dict)
    """Fitted constants for this generation (name -> value); see the fitting notes in the YAML."""


@dataclass
class SystemConfig:
    """An IPU-POD system (config group ``system``)."""

    name: str = "pod16"
    """System name: pod4, pod16, pod64, pod128, pod256."""
    num_ipus: int = 16
    """IPUs in the system."""
    ipus_per_machine: int = 4
    """IPUs per IPU-Machine (M2000 / Bow-2000)."""
    num_hosts: int = 1
    """Host servers."""
    num_racks: int = 1
    """IPU-POD64 racks (logical); collectives between racks go over GW-Links."""
    topology: str = "ladder"
    """IPU-Link topology inside a rack: ladder (POD4/16, IPU-Server cards) or 2d_torus (POD64)."""
    gw_link_bytes_per_s: float = 25.0e9
    """Gateway-link bandwidth per IPU-Machine between racks."""

