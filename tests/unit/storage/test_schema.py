"""The migration list's own rules, without a database."""

from __future__ import annotations

import pytest

from coterie.storage.migrations import _check_ordered
from coterie.storage.schema import MIGRATIONS, Migration, latest_version


def test_migrations_run_one_two_three() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert latest_version() == len(MIGRATIONS)
    _check_ordered(MIGRATIONS)


@pytest.mark.parametrize("versions", [(1, 3), (2,), (1, 1), (2, 1)])
def test_a_gap_or_disorder_is_refused(versions: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="must run 1, 2, 3"):
        _check_ordered(tuple(Migration(v, f"m{v}", "SELECT 1") for v in versions))
