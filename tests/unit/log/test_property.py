"""Property: whatever mix of appends, reads and reopens, the log returns exactly the
appended batches, numbered consecutively."""

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coterie.log.batch import validate_batches
from coterie.log.config import LogConfig
from coterie.log.errors import RecordTooLargeError
from coterie.log.partition import PartitionLog

from .batches import make_batch, split_batches, without_offset

NOW = 1_700_000_000_000

append_op = st.tuples(
    st.just("append"),
    st.lists(
        st.lists(st.binary(min_size=0, max_size=120), min_size=1, max_size=5),
        min_size=1,
        max_size=3,
    ),
)
read_op = st.tuples(st.just("read"), st.integers(0, 10_000), st.integers(0, 2_000))
reopen_op = st.tuples(st.sampled_from(["reopen_clean", "reopen_crash", "reopen_torn"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(st.one_of(append_op, read_op, reopen_op), max_size=25),
    segment_bytes=st.integers(150, 3000),
    index_interval=st.integers(0, 500),
)
def test_random_appends_reads_and_reopens(ops, segment_bytes, index_interval):
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval)
    directory = Path(tempfile.mkdtemp()) / "p-0"
    model: list[tuple[int, bytes]] = []  # (base offset, batch content without offset)
    next_offset = 0
    log = PartitionLog.open(directory, config, NOW)
    try:
        for op in ops:
            if op[0] == "append":
                batches = [make_batch(values) for values in op[1]]
                if sum(map(len, batches)) > segment_bytes:
                    with pytest.raises(RecordTooLargeError):
                        log.append(b"".join(batches), 3, NOW)
                    assert log.log_end_offset == next_offset
                    continue
                info = log.append(b"".join(batches), 3, NOW)
                assert info.first_offset == next_offset
                for b in batches:
                    model.append((next_offset, without_offset(b)))
                    next_offset += validate_batches(b)[0].records_count
                assert info.last_offset == next_offset - 1
            elif op[0] == "read":
                if not model:
                    assert log.read(0, op[2]) == b""
                    continue
                offset, max_bytes = op[1] % (next_offset + 1), op[2]
                data = log.read(offset, max_bytes)
                if offset == next_offset:
                    assert data == b""
                    continue
                got = split_batches(data)
                # Starts at the batch containing offset; consecutive; at least one batch.
                first = max(i for i, (base, _) in enumerate(model) if base <= offset)
                expected = model[first : first + len(got)]
                assert got
                assert [
                    (validate_batches(g)[0].base_offset, without_offset(g)) for g in got
                ] == expected
                assert len(got) == 1 or len(data) <= max_bytes
            else:
                if op[0] == "reopen_clean":
                    log.close()
                else:
                    log.close_unclean()
                if op[0] == "reopen_torn":  # a crash in the middle of writing a batch
                    last = max(directory.glob("*.log"))
                    torn = make_batch([b"torn"] * 3, base_offset=next_offset)
                    with last.open("ab") as f:
                        f.write(torn[: len(torn) - 1 - next_offset % 20])
                log = PartitionLog.open(directory, config, NOW)
                assert log.log_end_offset == next_offset
        # Finally everything reads back in order.
        offset, seen = 0, []
        while offset < log.log_end_offset:
            for g in split_batches(log.read(offset, 5_000)):
                h = validate_batches(g)[0]
                seen.append((h.base_offset, without_offset(g)))
                offset = h.next_offset
        assert seen == model
    finally:
        log.close()
        shutil.rmtree(directory.parent)
