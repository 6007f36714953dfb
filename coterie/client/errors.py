"""The exceptions of the client library, in one place so that callers can catch by kind.

    ClientError
    ├── BrokerConnectionError         the TCP side: could not connect, closed, timed out
    │   ├── ConnectionClosedError
    │   └── RequestTimeoutError
    ├── BrokerUnavailableError        no broker / coordinator reachable within the bound
    ├── UnsupportedVersionError       broker, kio and client share no version of an API
    ├── SecuritySettingError          a security setting is missing or wrong (also ValueError)
    ├── AuthenticationError           the broker and the client do not accept each other:
    │   ├── SslAuthenticationError    the TLS handshake failed (certificate not trusted ...)
    │   └── SaslAuthenticationError   SASL failed (wrong password, mechanism not offered ...)
    ├── BrokerError                   a broker answered with an error code (.error_code)
    │   ├── CommitFailedError         OffsetCommit from a generation the group has left
    │   └── FatalGroupError           a group error that rejoining cannot fix
    │       ├── InconsistentGroupProtocolError
    │       ├── FencedInstanceIdError
    │       ├── GroupAuthorizationFailedError
    │       ├── GroupMaxSizeReachedError
    │       ├── InvalidSessionTimeoutError
    │       ├── InvalidGroupIdError
    │       ├── UnsupportedAssignorError       (consumer protocol: no such server assignor)
    │       ├── InvalidRegularExpressionError  (consumer protocol: the coordinator's RE2 says no)
    │       ├── UnreleasedInstanceIdError      (consumer protocol: the static id is still held)
    │       ├── InvalidGroupRequestError       (consumer protocol: INVALID_REQUEST)
    │       └── GroupIdNotFoundError           (consumer protocol: e.g. a classic group's id)
    ├── MemberCallbackError           the embedded protocol's own code failed
    │   ├── MetadataError             metadata() raised
    │   ├── AssignorError             assign() raised (this member was the leader)
    │   └── AssignmentError           on_assignment() raised, e.g. undecodable bytes
    └── ConsumerError                 the consumer cannot go on with a partition or callback
        ├── NoOffsetForPartitionError auto_offset_reset="none" and nothing committed
        ├── OffsetOutOfRangeError     the position left the log and auto_offset_reset="none"
        ├── CorruptRecordsError       fetched bytes that are not valid record batches
        └── RebalanceListenerError    a rebalance listener callback raised

Errors the group protocol recovers from by itself (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED, FENCED_MEMBER_EPOCH, the coordinator errors) never
reach user code: the member rejoins or rediscovers. Everything here does, through
`GroupMember.error` (and the consumer's `poll()`).

An AuthenticationError is not a BrokerConnectionError on purpose: every reconnect loop
retries BrokerConnectionError, and retrying a wrong password or an untrusted certificate
would only hide it (and, on Kafka, meet the broker's failed-authentication delay again and
again); it ends the member instead, as Kafka's clients raise their AuthenticationException.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    from coterie.client.protocol import Generation


class ClientError(Exception):
    """Base class of every error raised by coterie.client."""


class BrokerConnectionError(ClientError):
    """A connection to a broker could not be opened or was lost."""


class ConnectionClosedError(BrokerConnectionError):
    """The connection closed (by either side) while a request was outstanding."""


class RequestTimeoutError(BrokerConnectionError):
    """No response within the request timeout; the connection is closed, as Kafka does."""


class BrokerUnavailableError(ClientError):
    """No broker (or no coordinator) could be reached before the configured bound passed."""


class UnsupportedVersionError(ClientError):
    """The broker, kio and the calling code have no version of an API in common."""


class SecuritySettingError(ClientError, ValueError):
    """A security setting (Kafka's property name in `.setting`) is missing, malformed,
    contradicts another or names something coterie does not support."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting} {problem}")
        self.setting = setting
        self.problem = problem


class AuthenticationError(ClientError):
    """The broker refused who the client is, or the client refused the broker: not retried
    (see the module docstring)."""


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed: the broker's certificate is not from a trusted CA or does
    not name the host, or the broker refused the client's certificate (or its absence)."""


class SaslAuthenticationError(AuthenticationError):
    """SASL authentication failed: wrong credentials, a mechanism the broker does not
    offer, or a SCRAM server that could not prove it knows the password."""


class BrokerError(ClientError):
    """A broker answered a request with an error code."""

    def __init__(self, error_code: ErrorCode, api: str, detail: str = "") -> None:
        text = f"{api} failed with {error_code.name.upper()} ({int(error_code)})"
        super().__init__(f"{text}: {detail}" if detail else text)
        self.error_code = error_code
        self.api = api


class CommitFailedError(BrokerError):
    """OffsetCommit refused because the committing generation is over (REBALANCE_IN_PROGRESS,
    ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID; in a consumer group
    STALE_MEMBER_EPOCH once the member has no newer epoch): the partitions may already belong
    to another member, so the records since the last commit may be read again."""


class FatalGroupError(BrokerError):
    """A group error that rejoining would not fix: the member stops and reports it."""


class InconsistentGroupProtocolError(FatalGroupError):
    """The group uses another protocol type, or no protocol that this member offers."""


class FencedInstanceIdError(FatalGroupError):
    """Another process registered with the same group.instance.id (KIP-345)."""


class GroupAuthorizationFailedError(FatalGroupError):
    """The principal may not use this group."""


class GroupMaxSizeReachedError(FatalGroupError):
    """The group already has group.max.size members."""


class InvalidSessionTimeoutError(FatalGroupError):
    """The session timeout is outside the broker's group.min/max.session.timeout.ms."""


class InvalidGroupIdError(FatalGroupError):
    """The group id is empty or otherwise invalid."""


class UnsupportedAssignorError(FatalGroupError):
    """The coordinator has no server-side assignor of the name the member asked for."""


class InvalidRegularExpressionError(FatalGroupError):
    """The coordinator refused the subscribed regular expression (RE2 syntax)."""


class UnreleasedInstanceIdError(FatalGroupError):
    """A static member joined while its instance id is still held by a member that has not
    left (epoch -2) or timed out."""


class InvalidGroupRequestError(FatalGroupError):
    """The coordinator found the heartbeat malformed (INVALID_REQUEST); retrying the same
    request cannot help."""


class GroupIdNotFoundError(FatalGroupError):
    """The coordinator has no consumer group of this id (e.g. it is a classic group of
    another protocol type)."""


_FATAL: dict[ErrorCode, type[FatalGroupError]] = {
    ErrorCode.inconsistent_group_protocol: InconsistentGroupProtocolError,
    ErrorCode.fenced_instance_id: FencedInstanceIdError,
    ErrorCode.group_authorization_failed: GroupAuthorizationFailedError,
    ErrorCode.group_max_size_reached: GroupMaxSizeReachedError,
    ErrorCode.invalid_session_timeout: InvalidSessionTimeoutError,
    ErrorCode.invalid_group_id: InvalidGroupIdError,
    ErrorCode.unsupported_assignor: UnsupportedAssignorError,
    ErrorCode.invalid_regular_expression: InvalidRegularExpressionError,
    ErrorCode.unreleased_instance_id: UnreleasedInstanceIdError,
    ErrorCode.invalid_request: InvalidGroupRequestError,
    ErrorCode.group_id_not_found: GroupIdNotFoundError,
}


def fatal_group_error(error_code: ErrorCode, api: str, detail: str = "") -> FatalGroupError:
    """The typed exception for a group error code that ends the member's life."""
    return _FATAL.get(error_code, FatalGroupError)(error_code, api, detail)


class MemberCallbackError(ClientError):
    """The embedded protocol raised; the original exception is the `__cause__`."""

    def __init__(self, message: str, generation: Generation | None = None) -> None:
        super().__init__(message)
        self.generation = generation


class MetadataError(MemberCallbackError):
    """The protocol could not produce its JoinGroup metadata."""


class AssignorError(MemberCallbackError):
    """This member led the group and its protocol could not compute an assignment."""


class AssignmentError(MemberCallbackError):
    """The protocol could not use the assignment it received (undecodable bytes, say)."""


class ConsumerError(ClientError):
    """The consumer met something it cannot decide for the user; raised from `poll()`."""


class NoOffsetForPartitionError(ConsumerError):
    """A partition has no committed offset and the reset policy is "none"."""


class OffsetOutOfRangeError(ConsumerError):
    """The position is outside the partition's log and the reset policy is "none"."""


class CorruptRecordsError(ConsumerError):
    """A fetch returned bytes that do not decode as record batches; the partition stops at
    that position until the user seeks past it."""


class RebalanceListenerError(ConsumerError):
    """A rebalance listener callback raised; the original exception is the `__cause__`."""
