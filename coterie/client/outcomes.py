"""What a group member does with each error code of JoinGroup, SyncGroup and Heartbeat.

One table per API, in one visible place (the member's code only dispatches on the outcome).
The rules follow seed 1 (rejoin when the coordinator says the generation moved on; raise to
the user what rejoining cannot fix) and Apache Kafka's member where the seed is silent:

- REBALANCE_IN_PROGRESS: a new generation is forming; rejoin with the same member id.
- ILLEGAL_GENERATION: this generation is over; rejoin, keeping the member id (it may still
  be valid, and reusing it spares the coordinator a wait for the old id to expire).
- UNKNOWN_MEMBER_ID: the coordinator forgot this member; forget the id and join as new.
- MEMBER_ID_REQUIRED (JoinGroup v4+, KIP-394): adopt the id the coordinator handed out and
  send JoinGroup again at once.
- COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR: find the coordinator again, then retry;
  COORDINATOR_LOAD_IN_PROGRESS: retry the same coordinator after a backoff.
- INCONSISTENT_GROUP_PROTOCOL, FENCED_INSTANCE_ID, GROUP_AUTHORIZATION_FAILED,
  GROUP_MAX_SIZE_REACHED, INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID: fatal, raised to the user.
- Anything else is unexpected, and fatal too: a loop on an error nobody understands helps
  no one.

Pure: a lookup, no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

E = ErrorCode


class Outcome(enum.Enum):
    OK = "ok"
    #: Send JoinGroup again now, keeping the member id (a held assignment is revoked first).
    REJOIN = "rejoin"
    #: The generation is gone but the id may live: the held assignment is lost; rejoin.
    LOST = "lost"
    #: Forget the member id and join as a new member (a held assignment is lost).
    REJOIN_AS_NEW = "rejoin-as-new"
    #: Take the member id from the response and send JoinGroup again now.
    ADOPT_MEMBER_ID = "adopt-member-id"
    #: Find the coordinator again, then retry after a backoff.
    REDISCOVER = "rediscover"
    #: Retry the same coordinator after a backoff.
    BACKOFF = "backoff"
    #: Stop the member and report the error.
    FATAL = "fatal"


_COORDINATOR: Mapping[ErrorCode, Outcome] = {
    E.coordinator_not_available: Outcome.REDISCOVER,
    E.not_coordinator: Outcome.REDISCOVER,
    E.coordinator_load_in_progress: Outcome.BACKOFF,
}

JOIN_GROUP: Mapping[ErrorCode, Outcome] = {
    E.none: Outcome.OK,
    E.member_id_required: Outcome.ADOPT_MEMBER_ID,
    E.rebalance_in_progress: Outcome.REJOIN,
    E.illegal_generation: Outcome.REJOIN,
    E.unknown_member_id: Outcome.REJOIN_AS_NEW,
    **_COORDINATOR,
    E.inconsistent_group_protocol: Outcome.FATAL,
    E.fenced_instance_id: Outcome.FATAL,
    E.group_authorization_failed: Outcome.FATAL,
    E.group_max_size_reached: Outcome.FATAL,
    E.invalid_session_timeout: Outcome.FATAL,
    E.invalid_group_id: Outcome.FATAL,
    E.unsupported_version: Outcome.FATAL,
}

SYNC_GROUP: Mapping[ErrorCode, Outcome] = {
    E.none: Outcome.OK,
    E.rebalance_in_progress: Outcome.REJOIN,
    E.illegal_generation: Outcome.REJOIN,
    E.unknown_member_id: Outcome.REJOIN_AS_NEW,
    **_COORDINATOR,
    E.inconsistent_group_protocol: Outcome.FATAL,
    E.fenced_instance_id: Outcome.FATAL,
    E.group_authorization_failed: Outcome.FATAL,
}

HEARTBEAT: Mapping[ErrorCode, Outcome] = {
    E.none: Outcome.OK,
    E.rebalance_in_progress: Outcome.REJOIN,
    E.illegal_generation: Outcome.LOST,
    E.unknown_member_id: Outcome.REJOIN_AS_NEW,
    **_COORDINATOR,
    E.fenced_instance_id: Outcome.FATAL,
    E.group_authorization_failed: Outcome.FATAL,
}


def outcome(table: Mapping[ErrorCode, Outcome], code: ErrorCode) -> Outcome:
    """What to do with `code` according to `table`; unknown codes are fatal."""
    return table.get(code, Outcome.FATAL)
