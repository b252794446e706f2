"""Spread an IPU's memory over its tiles and find the fullest tile.

Imbalance model. Variables, stash FIFOs and buffers are mapped linearly in whole grains, a tile that gets part
of a tensor getting at least ``minBytesPerTile = 128`` bytes of it (graphcore/poplibs
``lib/poputil/TileMapping.cpp``, ``calcLinearTileMapping``). Poplar's own mapping always starts at tile 0, but the
frameworks rotate the start of each tensor past the tiles the previous one used (graphcore/popart
``willow/src/popx/linearmapper.cpp``, "shift the mapping to prevent always starting at tile 0"; TensorFlow's
``MappingHelper`` does the same), so the remainders of successive tensors go round the tiles and a tile holds at
most one minimum slot of a category above the category's mean. The round starts at tile 0, which is therefore the
fullest compute tile (and where Poplar most often reports running out of memory, IPU optimisation guide section
6.1: "Out of memory on tile 0"). Code is spread evenly over the compute tiles (each runs the vertices of every
compute set), and the planner keeps each tile's share of a product's temporaries within the available memory
proportion of that tile's memory (``engine.temporary``).

IO tiles (IPU optimisation guide section 4.4.2) are the last ``num_io_tiles`` tiles of each IPU: they hold no
compute data, only the host stream buffers of a micro-batch and their exchange code ("typically ~5% is used for
the exchange code and buffers"); ``io_tiles_available_memory_proportion`` (TensorFlow ``IPUConfig.io_tiles``) is
the share of an IO tile the stream buffers may use.
"""
from __future__ import annotations

from dataclasses import dataclass

LINEAR_MAP_MIN_BYTES = 128
"""Bytes a tile gets at least of a linearly mapped tensor (poplibs TileMapping.cpp ``minBytesPerTile = 128``)."""
IO_TILE_EXCHANGE_SHARE = 0.05
"""Share of an IO tile taken by exchange code and buffers (IPU optimisation guide section 4.4.2, "typically ~5%")."""


def tile0_excess(linear_categories: int) -> int:
    """Bytes tile 0 holds above the mean: one minimum slot per linearly mapped category (module docstring)."""
    return linear_categories * LINEAR_MAP_MIN_BYTES


@dataclass
class TileLoad:
    """Memory of one IPU's tiles."""

    compute_tiles: int
    """Tiles holding compute data (all tiles minus IO tiles)."""
    mean_compute_tile_bytes: float
    """Mean bytes per compute tile."""
    tile0_bytes: int
    """Bytes on tile 0, the fullest compute tile."""
    io_tile_bytes: int
    """Bytes on the fullest IO tile (0 without IO tiles)."""
    io_buffer_bytes: int
    """Stream-buffer bytes on the fullest IO tile."""
    io_buffer_limit: int
    """Stream-buffer bytes an IO tile may hold (``io_tiles_available_memory_proportion``)."""
    max_tile: int
    """Index (within the IPU) of the fullest tile."""
    max_tile_bytes: int
    """Bytes on the fullest tile."""


def tile_load(compute_bytes: int, tile0_extra: int, io_bytes: int, tiles: int, num_io_tiles: int,
              memory_per_tile: int, io_proportion: float) -> TileLoad:
    """Per-tile memory of an IPU.

    ``compute_bytes`` is spread over the compute tiles, tile 0 carrying ``tile0_extra`` more; ``io_bytes`` (host
    stream buffers) goes to the IO tiles when there are any, else to the compute tiles.
    """
    compute_tiles = tiles - num_io_tiles
    assert compute_tiles >= 1, (tiles, num_io_tiles)  # validated with the config
    io_tile_bytes = io_buffer = io_limit = 0
    if num_io_tiles > 0:
        # Each IO tile takes its share of the stream buffers, at least 128 B of each (linear mapping).
        io_buffer = -(-io_bytes // num_io_tiles) if io_bytes else 0
        io_limit = int(io_proportion * memory_per_tile)
        io_tile_bytes = int(IO_TILE_EXCHANGE_SHARE * memory_per_tile) + io_buffer
    else:
        compute_bytes += io_bytes
    mean = compute_bytes / compute_tiles
    tile0 = int(mean + tile0_extra)
    if io_tile_bytes > tile0:
        max_tile, max_bytes = tiles - num_io_tiles, io_tile_bytes
    else:
        max_tile, max_bytes = 0, tile0
    return TileLoad(compute_tiles=compute_tiles, mean_compute_tile_bytes=mean, tile0_bytes=tile0,
                    io_tile_bytes=io_tile_bytes, io_buffer_bytes=io_buffer, io_buffer_limit=io_limit,
                    max_tile=max_tile, max_tile_bytes=max_bytes)
