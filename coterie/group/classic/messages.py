"""Version-independent requests and answers of the classic group protocol.

The broker translates each wire version of JoinGroup, SyncGroup, Heartbeat and LeaveGroup into
these, and back. The core never sees wire versions; where behaviour depends on one (v4+
requires a known member id), the request says so with a flag.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

UNKNOWN_MEMBER_ID = ""


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    require_known_member_id: bool = True
    client_id: str = ""
    client_host: str = ""
    reason: str | None = None
    token: Hashable = None  # identifies a parked request when it completes later
    # JoinGroup v9+ (KIP-814): the client understands `skip_assignment`, so a static leader
    # that rejoins a stable group can be told it leads (with the members) without a rebalance.
    supports_skip_assignment: bool = False

    def refused(self, code: ErrorCode) -> JoinGroupResponse:
        return JoinGroupResponse(code, member_id=self.member_id)


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinMember, ...] = ()
    skip_assignment: bool = False
    # Not on the wire (JoinGroup has no error message): why a request was refused, for the
    # broker's log, so an operator can tell which check an INVALID_REQUEST came from.
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    # Not on the wire: lets the broker report that the leader's assignment could not be
    # completed (the seed's "assignment failure"), which every waiting member then receives.
    error: ErrorCode = ErrorCode.none
    token: Hashable = None

    def refused(self, code: ErrorCode) -> SyncGroupResponse:
        return SyncGroupResponse(code)


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None

    def refused(self, code: ErrorCode) -> ErrorCode:
        return code


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[LeavingMember, ...]

    def refused(self, code: ErrorCode) -> LeaveGroupResponse:
        return LeaveGroupResponse(code)


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error: ErrorCode
    members: tuple[tuple[LeavingMember, ErrorCode], ...] = field(default=())


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[DescribedMember, ...] = ()
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class DescribeGroupRequest:
    """One group of a DescribeGroups request; `version` decides how a group that is not
    classic, or no group, is answered."""

    group_id: str
    version: int

    def refused(self, code: ErrorCode) -> DescribedGroup:
        return DescribedGroup(code, self.group_id, "", "", "")
