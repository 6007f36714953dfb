"""Producer ids are never handed out twice by one data directory (coterie.broker.producer_ids)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coterie.broker.producer_ids import FILE_NAME, ProducerIdAllocator
from coterie.log.errors import StorageError


def test_ids_are_consecutive_within_a_block(tmp_path: Path) -> None:
    ids = ProducerIdAllocator(tmp_path, block_size=10)
    assert [ids.next_id() for _ in range(25)] == list(range(25))
    # The reserved end of the third block is on disk before any id of it was given out.
    assert (tmp_path / FILE_NAME).read_text().strip() == "30"


def test_a_restart_skips_the_rest_of_the_block_in_use(tmp_path: Path) -> None:
    first = ProducerIdAllocator(tmp_path, block_size=10)
    given = [first.next_id() for _ in range(3)]  # then the process dies: no close, no flush
    second = ProducerIdAllocator(tmp_path, block_size=10)
    later = [second.next_id() for _ in range(12)]
    assert not set(given) & set(later)
    assert later[0] == 10 and later == sorted(later)


def test_a_fresh_directory_starts_at_zero_and_writes_nothing_until_asked(tmp_path: Path) -> None:
    ids = ProducerIdAllocator(tmp_path)
    assert not (tmp_path / FILE_NAME).exists()
    assert ids.next_id() == 0
    assert (tmp_path / FILE_NAME).exists()


@pytest.mark.parametrize("content", ["garbage\n", "-5\n"])
def test_a_damaged_file_is_an_operator_error_not_a_reuse(tmp_path: Path, content: str) -> None:
    (tmp_path / FILE_NAME).write_text(content)
    with pytest.raises(StorageError, match=FILE_NAME):
        ProducerIdAllocator(tmp_path)
