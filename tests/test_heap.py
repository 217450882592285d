"""runtime.heap: freed heap pages go back to the operating system (glibc's malloc_trim)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from riskrank_jax.runtime.heap import release_freed_heap


def _rss_mib() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS")) / 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads resident memory from /proc (Linux)")
def test_freed_small_blocks_go_back_to_the_os():
    if not release_freed_heap():
        pytest.skip("the C library has no malloc_trim (not glibc)")
    before = _rss_mib()
    blocks = [np.ones(1000) for _ in range(40_000)]  # ~330 MB of 8 KB blocks: kept in malloc's pools when freed
    held = _rss_mib()
    del blocks
    kept = _rss_mib()
    assert held - before > 250, (before, held)
    assert kept - before > 150, ("glibc already returned the pages: nothing left to test", before, kept)
    assert release_freed_heap() is True
    assert _rss_mib() - before < 60, (before, kept, _rss_mib())
