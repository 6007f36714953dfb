"""Handing freed C-heap memory back to the system (glibc's `malloc_trim`).

Python objects larger than 512 bytes (a set of ten partitions, a dict of a group's members,
a request's buffers) come from the C allocator. A burst of joins frees many of them again,
and glibc keeps the freed pages inside its heap, between live blocks, so the broker's
resident memory stays at its peak. `malloc_trim(0)` returns the whole free pages in the
middle of the heap to the kernel (madvise), which is what measuring memory per member at
10,000 members showed to matter. The broker calls it on its housekeeping schedule; it costs
a few milliseconds on a heap of a few hundred megabytes.

Where the C library is not glibc (musl, macOS), there is no such call and `trim` does
nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache
from typing import Any


@cache
def _malloc_trim() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


def trim() -> bool:
    """Return free C-heap pages to the system; False when this C library cannot."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
