"""Share sessions (coterie/broker/share_sessions.py): the epochs of KIP-932's ShareFetch and
ShareAcknowledge, as Kafka 4.2's ShareSessionCache answers them."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coterie.broker.share_sessions import ShareSessionError, ShareSessions, next_epoch

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def _error(call) -> ErrorCode:
    with pytest.raises(ShareSessionError) as raised:
        call()
    return raised.value.code


def test_epoch_zero_opens_a_session_with_exactly_the_partitions_named():
    sessions = ShareSessions()
    ctx = sessions.fetch("g", "m", 0, [A, B], [], False, "conn")
    assert ctx.full and not ctx.final and ctx.partitions == (A, B)
    assert sessions.get("g", "m").epoch == 1


def test_later_epochs_add_and_forget_partitions_and_move_on():
    sessions = ShareSessions()
    sessions.fetch("g", "m", 0, [A, B], [], False, "conn")
    ctx = sessions.fetch("g", "m", 1, [C], [A], False, "conn")
    assert not ctx.full and ctx.partitions == (B, C)
    assert sessions.get("g", "m").epoch == 2
    assert sessions.fetch("g", "m", 2, [], [], True, "conn").partitions == (B, C)


def test_a_wrong_epoch_is_invalid_and_leaves_the_session_as_it_was():
    sessions = ShareSessions()
    sessions.fetch("g", "m", 0, [A], [], False, "conn")
    assert _error(lambda: sessions.fetch("g", "m", 5, [B], [], False, "conn")) == \
        ErrorCode.invalid_share_session_epoch
    assert sessions.get("g", "m").epoch == 1
    assert sessions.get("g", "m").partitions == {A: None}


def test_an_unknown_session_is_not_found():
    sessions = ShareSessions()
    assert _error(lambda: sessions.fetch("g", "m", 3, [A], [], False, "c")) == \
        ErrorCode.share_session_not_found
    assert _error(lambda: sessions.fetch("g", "m", -1, [], [], True, "c")) == \
        ErrorCode.share_session_not_found
    assert _error(lambda: sessions.acknowledge("g", "m", 1)) == \
        ErrorCode.share_session_not_found


def test_opening_with_acknowledgements_is_an_invalid_request():
    sessions = ShareSessions()
    assert _error(lambda: sessions.fetch("g", "m", 0, [A], [], True, "c")) == \
        ErrorCode.invalid_request
    assert sessions.get("g", "m") is None


def test_epoch_zero_replaces_the_members_session():
    sessions = ShareSessions()
    sessions.fetch("g", "m", 0, [A, B], [], False, "c1")
    sessions.fetch("g", "m", 1, [], [], False, "c1")
    ctx = sessions.fetch("g", "m", 0, [C], [], False, "c2")
    assert ctx.partitions == (C,) and sessions.get("g", "m").epoch == 1
    assert sessions.disconnected("c1") == []  # the old connection no longer owns it
    assert sessions.get("g", "m") is not None


def test_the_session_limit():
    sessions = ShareSessions(max_sessions=2)
    sessions.fetch("g", "a", 0, [A], [], False, "c")
    sessions.fetch("g", "b", 0, [A], [], False, "c")
    assert _error(lambda: sessions.fetch("g", "c", 0, [A], [], False, "c")) == \
        ErrorCode.share_session_limit_reached
    sessions.fetch("g", "a", 0, [B], [], False, "c")  # a member reopening its own fits
    assert len(sessions) == 2


def test_acknowledge_epochs():
    sessions = ShareSessions()
    sessions.fetch("g", "m", 0, [A], [], False, "c")
    assert _error(lambda: sessions.acknowledge("g", "m", 0)) == \
        ErrorCode.invalid_share_session_epoch
    assert sessions.acknowledge("g", "m", 1) is False
    assert _error(lambda: sessions.acknowledge("g", "m", 1)) == \
        ErrorCode.invalid_share_session_epoch
    assert sessions.acknowledge("g", "m", 2) is False
    assert sessions.acknowledge("g", "m", -1) is True


def test_final_epoch_fetches_nothing():
    sessions = ShareSessions()
    sessions.fetch("g", "m", 0, [A], [], False, "c")
    ctx = sessions.fetch("g", "m", -1, [B], [], True, "c")
    assert ctx.final and ctx.partitions == ()


def test_a_closed_connection_takes_its_sessions_with_it():
    sessions = ShareSessions()
    sessions.fetch("g", "a", 0, [A], [], False, "c1")
    sessions.fetch("h", "b", 0, [A], [], False, "c1")
    sessions.fetch("g", "c", 0, [A], [], False, "c2")
    gone = sessions.disconnected("c1")
    assert sorted((s.group_id, s.member_id) for s in gone) == [("g", "a"), ("h", "b")]
    assert len(sessions) == 1 and sessions.get("g", "c") is not None
    assert sessions.disconnected("c1") == []


def test_epochs_wrap_past_int32_to_one():
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(0x7FFFFFFF) == 1
