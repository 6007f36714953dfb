"""coterie.broker.heap: the broker hands freed C-heap pages back on its housekeeping tick."""

import platform

from coterie.broker import heap


def test_trim_works_where_the_c_library_is_glibc():
    # After a burst of large allocations freed again, trimming must not fail, and it says
    # whether it could act: glibc has malloc_trim, other C libraries do not.
    blocks = [bytearray(4096) for _ in range(10_000)]
    del blocks[::2]
    assert heap.trim() is (platform.libc_ver()[0] == "glibc")
    assert heap.trim() is heap.trim()  # and again: cheap and idempotent
