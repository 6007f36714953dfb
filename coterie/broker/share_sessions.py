"""Share sessions (KIP-932): which partitions a share consumer fetches from, by epoch.

Why sessions: a share consumer's ShareFetch names only what changed since its last one (the
partitions it adds, those it forgets, and acknowledgements), the way an incremental fetch
session does (KIP-227). The broker keeps, per (group id, member id), the set of partitions
the member fetches and the epoch it expects next:

- epoch 0 opens a session afresh (replacing any the member had), with exactly the partitions
  named; it may not carry acknowledgements (nothing can have been acquired in it yet):
  INVALID_REQUEST. When the broker already holds `max_sessions` sessions,
  SHARE_SESSION_LIMIT_REACHED.
- epoch n > 0 must be the session's next epoch (INVALID_SHARE_SESSION_EPOCH otherwise, a
  session unknown to the broker is SHARE_SESSION_NOT_FOUND); the named partitions join the
  session, the forgotten ones leave it, and the epoch moves on (wrapping past 2**31 - 1 to 1).
- epoch -1 closes the session: the request only acknowledges, and what the member still has
  acquired is released.

A ShareAcknowledge carries the session epoch too (moving it on, never opening a session with
0). When the connection that opened a session closes, the session goes and the member's
acquired records are released at once, rather than when their locks expire: Kafka 4.2 does
the same. Nothing here does I/O: the broker calls it and acts on what it answers.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "ShareSession", "ShareSessionError",
           "ShareSessions", "next_epoch"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 0x7FFFFFFF

SessionKey = tuple[str, str]  # (group id, member id)


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: 1 after 0 and after the largest int32 (0 opens sessions)."""
    return 1 if epoch >= _MAX_EPOCH or epoch < 0 else epoch + 1


class ShareSessionError(Exception):
    """The request cannot use the session: its whole answer is `code`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class ShareSession:
    """One member's session: its partitions in the order they joined, the epoch expected
    next, and the connection that opened it."""

    group_id: str
    member_id: str
    epoch: int
    connection: Hashable
    partitions: dict[Hashable, None] = field(default_factory=dict)  # ordered set


@dataclass(frozen=True, slots=True)
class FetchContext:
    """What one ShareFetch may do: the partitions to fetch from (none when closing), whether
    it closes the session, and whether it is the first of a session (whose answer lists every
    partition asked for, where a later one lists only those with news)."""

    partitions: tuple[Hashable, ...]
    final: bool
    full: bool


class ShareSessions:
    """The broker's share sessions, at most `max_sessions` of them (Kafka's
    group.share.max.share.sessions)."""

    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[SessionKey, ShareSession] = {}
        self._by_connection: dict[Hashable, set[SessionKey]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def has_group(self, group_id: str) -> bool:
        """Whether any member of `group_id` has a session here."""
        return any(g == group_id for g, _ in self._sessions)

    def fetch(self, group_id: str, member_id: str, epoch: int,
              partitions: Iterable[Hashable], forgotten: Iterable[Hashable],
              acknowledges: bool, connection: Hashable) -> FetchContext:
        """The session a ShareFetch works in, opened, moved on or closing (module
        docstring); raises ShareSessionError with the request's error."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            if key not in self._sessions:
                raise ShareSessionError(ErrorCode.share_session_not_found,
                                        f"no share session for member {member_id}")
            return FetchContext((), final=True, full=False)
        if epoch == INITIAL_EPOCH:
            if acknowledges:
                raise ShareSessionError(
                    ErrorCode.invalid_request,
                    "a ShareFetch opening a share session (epoch 0) cannot acknowledge")
            self.remove(group_id, member_id)
            if len(self._sessions) >= self.max_sessions:
                raise ShareSessionError(
                    ErrorCode.share_session_limit_reached,
                    f"this broker already holds {self.max_sessions} share sessions")
            session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), connection,
                                   dict.fromkeys(partitions))
            self._sessions[key] = session
            self._by_connection.setdefault(connection, set()).add(key)
            return FetchContext(tuple(session.partitions), final=False, full=True)
        session = self._expected(key, epoch)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp in partitions:
            session.partitions.setdefault(tp, None)
        session.epoch = next_epoch(epoch)
        return FetchContext(tuple(session.partitions), final=False, full=False)

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> bool:
        """Check a ShareAcknowledge's epoch and move the session on; True when it closes the
        session (epoch -1). Raises ShareSessionError."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch,
                                    "a ShareAcknowledge cannot open a share session (epoch 0)")
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            if key not in self._sessions:
                raise ShareSessionError(ErrorCode.share_session_not_found,
                                        f"no share session for member {member_id}")
            return True
        session = self._expected(key, epoch)
        session.epoch = next_epoch(epoch)
        return False

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        """Close a session (epoch -1 answered, or replaced by a new epoch 0)."""
        key = (group_id, member_id)
        session = self._sessions.pop(key, None)
        if session is not None:
            keys = self._by_connection.get(session.connection)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_connection[session.connection]
        return session

    def disconnected(self, connection: Hashable) -> list[ShareSession]:
        """The sessions a closed connection opened, removed: their members' acquired records
        are to be released."""
        gone = []
        for group_id, member_id in sorted(self._by_connection.pop(connection, ())):
            session = self._sessions.pop((group_id, member_id), None)
            if session is not None:
                gone.append(session)
        return gone

    def _expected(self, key: SessionKey, epoch: int) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.share_session_not_found,
                                    f"no share session for member {key[1]}")
        if session.epoch != epoch:
            raise ShareSessionError(
                ErrorCode.invalid_share_session_epoch,
                f"share session epoch {epoch} is not the expected {session.epoch}")
        return session
