"""Freed heap memory handed back to the operating system (``release_freed_heap``), where the C library can.

    step(...); release_freed_heap()        # after a compilation, a checkpoint save, a stage

Why: XLA compiles in threads of its own and a checkpoint save copies the state; both free their memory when
done, but glibc's allocator keeps the freed pages in its pools (one pool per thread), so the process's resident
memory only grows, and a later allocation that does not fit a pool's holes adds to it. ``malloc_trim(0)``
returns the free pages; it costs milliseconds. Elsewhere (macOS, musl) this is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def release_freed_heap() -> bool:
    """Return the heap's free pages to the operating system; True where the C library could (glibc)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


__all__ = ["release_freed_heap"]
