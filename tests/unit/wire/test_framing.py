import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coterie.wire.framing import FrameBuffer, FrameTooLarge, frame


@given(st.lists(st.binary(max_size=300), max_size=20), st.integers(1, 50))
def test_frames_survive_any_chunking(payloads, chunk):
    stream = b"".join(frame(p) for p in payloads)
    buf = FrameBuffer(1 << 20)
    out = []
    for i in range(0, len(stream), chunk):
        buf.feed(stream[i:i + chunk])
        while (f := buf.next_frame()) is not None:
            out.append(f)
    assert out == payloads
    assert buf.pending == 0


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
