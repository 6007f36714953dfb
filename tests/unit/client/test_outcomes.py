"""The member's reaction to each group error code, as seed 1 and Kafka's member define it."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from coterie.client.errors import (
    FatalGroupError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    InconsistentGroupProtocolError,
    fatal_group_error,
)
from coterie.client.outcomes import HEARTBEAT, JOIN_GROUP, SYNC_GROUP, Outcome, outcome


@pytest.mark.parametrize("table", [JOIN_GROUP, SYNC_GROUP, HEARTBEAT])
def test_the_seeds_rejoin_errors_rejoin(table: dict) -> None:
    assert outcome(table, E.rebalance_in_progress) is Outcome.REJOIN
    assert outcome(table, E.unknown_member_id) is Outcome.REJOIN_AS_NEW
    assert outcome(table, E.illegal_generation) in (Outcome.REJOIN, Outcome.LOST)


def test_illegal_generation_on_a_heartbeat_loses_the_assignment_but_keeps_the_id() -> None:
    assert outcome(HEARTBEAT, E.illegal_generation) is Outcome.LOST


def test_member_id_required_adopts_the_given_id() -> None:
    assert outcome(JOIN_GROUP, E.member_id_required) is Outcome.ADOPT_MEMBER_ID


@pytest.mark.parametrize("table", [JOIN_GROUP, SYNC_GROUP, HEARTBEAT])
def test_coordinator_errors_rediscover_or_back_off(table: dict) -> None:
    assert outcome(table, E.not_coordinator) is Outcome.REDISCOVER
    assert outcome(table, E.coordinator_not_available) is Outcome.REDISCOVER
    assert outcome(table, E.coordinator_load_in_progress) is Outcome.BACKOFF


@pytest.mark.parametrize("code", [E.inconsistent_group_protocol, E.fenced_instance_id,
                                  E.group_authorization_failed])
def test_the_seeds_fatal_errors_are_fatal_for_join_and_sync(code: E) -> None:
    assert outcome(JOIN_GROUP, code) is Outcome.FATAL
    assert outcome(SYNC_GROUP, code) is Outcome.FATAL


def test_unknown_codes_are_fatal_rather_than_looped_on() -> None:
    assert outcome(HEARTBEAT, E.corrupt_message) is Outcome.FATAL
    assert outcome(JOIN_GROUP, E.unknown_server_error) is Outcome.FATAL


def test_fatal_codes_map_to_typed_exceptions() -> None:
    assert isinstance(fatal_group_error(E.inconsistent_group_protocol, "JoinGroup"),
                      InconsistentGroupProtocolError)
    assert isinstance(fatal_group_error(E.fenced_instance_id, "Heartbeat"),
                      FencedInstanceIdError)
    err = fatal_group_error(E.group_authorization_failed, "SyncGroup", "group 'g'")
    assert isinstance(err, GroupAuthorizationFailedError)
    assert err.error_code == E.group_authorization_failed
    assert "GROUP_AUTHORIZATION_FAILED" in str(err) and "group 'g'" in str(err)
    other = fatal_group_error(E.unknown_server_error, "Heartbeat")
    assert type(other) is FatalGroupError
