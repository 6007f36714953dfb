"""A share partition with its `__share_group_state` log: every operation's records are kept,
through the codec's bytes, as the broker would append them, so a test can restart the
partition from what was written."""

from __future__ import annotations

import uuid

from coterie.share import (
    Outcome,
    ShareConfig,
    SharePartition,
    ShareStateRecord,
    decode,
    encode,
    replay,
)

TOPIC = uuid.UUID("6d3c0b8e-4f3a-4d7e-9a51-3c2f1e0d9b8a")


class Harness:
    def __init__(self, config: ShareConfig | None = None, start: int = 0, now: int = 0) -> None:
        self.config = config or ShareConfig()
        self.sp, outcome = SharePartition.initialize("g", TOPIC, 0, start, now,
                                                     config=self.config, leader_epoch=3)
        self.log: list[tuple[bytes, bytes | None]] = []
        self.keep(outcome)

    def keep(self, outcome: Outcome) -> Outcome:
        for record in outcome.records:
            self.log.append(encode(record))
        return outcome

    def records(self) -> list[ShareStateRecord]:
        return [decode(k, v) for k, v in self.log]

    def acquire(self, member: str, first: int, last: int, max_records: int = 500,
                now: int = 0) -> list[tuple[int, int, int]]:
        outcome = self.keep(self.sp.acquire(member, [(first, last)], max_records, now))
        assert not outcome.error, outcome
        return [(r.first_offset, r.last_offset, r.delivery_count) for r in outcome.acquired]

    def ack(self, member: str, *batches: tuple[int, int, list[int]], now: int = 0) -> Outcome:
        return self.keep(self.sp.acknowledge(member, batches, now))

    def release(self, member: str, now: int = 0) -> Outcome:
        return self.keep(self.sp.release_member(member, now))

    def expire(self, now: int) -> Outcome:
        return self.keep(self.sp.expire(now))

    def log_start(self, offset: int, now: int = 0) -> Outcome:
        return self.keep(self.sp.advance_log_start(offset, now))

    def restart(self) -> SharePartition:
        """The partition a new leader loads from the log; it replaces the live one."""
        sp = replay(self.records(), config=self.config)
        assert sp is not None
        self.sp = sp
        return sp

    def states(self) -> dict[int, tuple[str, int, str | None]]:
        return {v.offset: (v.state.name, v.delivery_count, v.member_id)
                for v in self.sp.in_flight()}
