"""The cache folder's one warning: the graph captures and layer flags kept there only save time, so a folder that
cannot be used (a file in its place, a read-only file system, a full disk) is said once and the run goes on."""
from __future__ import annotations

import logging
from typing import Set

log = logging.getLogger("ipuexp.cache")
_warned: Set[str] = set()


def unusable(folder: object, err: OSError) -> None:
    """Warn, once per folder and process, that ``folder`` cannot hold the cache (``err`` says why)."""
    if str(folder) in _warned:
        return
    _warned.add(str(folder))
    why = err.strerror or str(err)
    log.warning("the cache folder %s cannot be used (%s; engine.cache_dir or IPUEXP_CACHE_DIR): the run goes on "
                "without it", folder, why)
