import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coterie.wire.framing import SMALL_FRAME, FrameBuffer, FrameTooLarge, frame


@given(st.lists(st.binary(max_size=300), max_size=20), st.integers(1, 50))
def test_frames_survive_any_chunking(payloads, chunk):
    buf = FrameBuffer(1 << 20)
    assert _frames_of(payloads, chunk, buf) == payloads
    assert buf.pending == 0


def _frames_of(payloads: list[bytes], chunk: int, buf: FrameBuffer) -> list[bytes]:
    """The frames `buf` gives when the framed payloads are fed `chunk` bytes at a time."""
    stream = b"".join(frame(p) for p in payloads)
    out = []
    for i in range(0, len(stream), chunk):
        buf.feed(stream[i:i + chunk])
        while (f := buf.next_frame()) is not None:
            out.append(f)
    return out


def test_oversized_frame_rejected_from_prefix_alone():
    buf = FrameBuffer(1000)
    buf.feed(struct.pack(">i", 1001))
    with pytest.raises(FrameTooLarge):
        buf.next_frame()


def test_negative_size_rejected():
    buf = FrameBuffer(1000)
    buf.feed(struct.pack(">i", -5) + b"xx")
    with pytest.raises(FrameTooLarge):
        buf.next_frame()


# -- large frames and the request memory pool (issue 23) ------------------------------------
class Pool:
    """RequestMemory's rule (coterie.broker.request_memory), counted."""

    def __init__(self, capacity: int) -> None:
        from coterie.broker.request_memory import RequestMemory
        self.memory = RequestMemory(capacity)

    def reserve(self, size: int) -> bool:
        return self.memory.reserve(size)

    def release(self, size: int) -> None:
        self.memory.release(size)

    @property
    def used(self) -> int:
        return self.memory.used


@given(st.lists(st.one_of(st.binary(max_size=300),
                          st.integers(SMALL_FRAME + 1, SMALL_FRAME + 5000).map(
                              lambda n: bytes([n % 251]) * n)), max_size=6),
       st.sampled_from([1, 7, 1000, 70_000, 1 << 20]))
@settings(deadline=None, max_examples=40)
def test_large_frames_through_a_pool_survive_any_chunking(payloads, chunk):
    pool = Pool(1 << 30)
    buf = FrameBuffer(1 << 22, pool)
    assert _frames_of(payloads, chunk, buf) == payloads
    assert buf.pending == 0
    assert pool.used == 0  # every reservation given back


def test_a_large_frame_reserves_its_size_and_gives_it_back_on_close():
    pool = Pool(1 << 30)
    buf = FrameBuffer(1 << 22, pool)
    buf.feed(frame(b"a" * 100_000)[:5000])
    assert buf.next_frame() is None
    assert pool.used == 100_004
    buf.close()
    assert pool.used == 0


def test_a_large_frame_waits_while_the_pool_is_spent():
    pool = Pool(150_000)
    first, second = FrameBuffer(1 << 22, pool), FrameBuffer(1 << 22, pool)
    first.feed(frame(b"a" * 200_000)[:10])
    assert first.next_frame() is None and not first.blocked  # the pool was not spent yet
    second.feed(frame(b"b" * 100_000)[:10])
    assert second.next_frame() is None and second.blocked
    first.close()
    assert second.next_frame() is None and not second.blocked
    assert pool.used == 100_004
    second.feed(frame(b"b" * 100_000)[10:])
    assert second.next_frame() == b"b" * 100_000
    assert pool.used == 0


def test_small_frames_never_touch_the_pool():
    pool = Pool(1)
    pool.reserve(10)  # spent
    buf = FrameBuffer(1 << 22, pool)
    buf.feed(frame(b"s" * SMALL_FRAME)[:100])
    assert buf.next_frame() is None and not buf.blocked
    buf.feed(frame(b"s" * SMALL_FRAME)[100:])
    assert buf.next_frame() == b"s" * SMALL_FRAME
