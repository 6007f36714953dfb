"""A deterministic simulation of one group coordinator shard under faults (issue 13).

The mixed-groups world of test_mixed_properties.py (consumer-protocol clients and classic
clients, eager or cooperative, joining, leaving, crashing, losing answers, while time passes
and a topic grows) gains the faults of the coordinator's side, in virtual time:

* **a failed append**: the next result whose records the coordinator writes is not
  persisted. As the broker's runtime does (`GroupRuntime.run`), the shard reverts to what
  was durable and every answer of that result carries COORDINATOR_NOT_AVAILABLE; the
  clients retry as their protocol says.
* **a coordinator crash**: the shard is thrown away and a new one loads every persisted
  record (through the bytes) and arms its timers, as after a kill -9. Requests the old one
  had parked are never answered: their clients see the connection drop and retry.
* **offset commits**: a client commits, for the partitions it owns, offsets from one
  increasing counter, with its generation (classic) or member epoch (consumer protocol).

Invariants, checked after every step by the tests that drive it: no partition owned by two
clients (test_mixed_properties.check_safety); every commit the coordinator acknowledged is
still there, after failed appends and crashes (the committed offset of a partition is at
least the highest acknowledged one, and never more than the highest ever sent); and, once
the faults stop, the group comes to rest and replay equals live.
"""

from __future__ import annotations

import itertools
from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.groups import with_error
from coterie.group.classic.group import ClassicState
from coterie.group.offsets.messages import CommitPartition, OffsetCommitRequest, OffsetFetchRequest
from coterie.group.result import Result
from coterie.group.shard import GroupShard, ShardConfig

from .consumer_harness import mid
from .mixed_harness import MixedHarness
from .test_mixed_properties import ClassicClient, ConsumerClient, World, check_replay, play

E = ErrorCode


class FaultyHarness(MixedHarness):
    """MixedHarness with persisted-or-failed appends and coordinator restarts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Member ids stay unique across coordinator restarts (a real broker draws UUIDs).
        self._classic_ids = itertools.count(1)
        self._consumer_ids = itertools.count(1)
        self.fail_next = False
        self.failed_appends = 0
        self.crashes = 0
        super().__init__(*args, **kwargs)

    def _build(self) -> GroupShard:
        return GroupShard(0, ShardConfig(self.classic_config, self.config),
                          lambda client: f"{client or 'member'}-{next(self._classic_ids)}",
                          lambda: mid(f"gen{next(self._consumer_ids)}"))

    def apply(self, result: Result) -> Any:
        if not result.records:
            return super().apply(result)
        if not self.fail_next:
            response = super().apply(result)
            self.shard.committed(result.records, result.producer)
            return response
        self.fail_next = False
        self.failed_appends += 1
        group_id = result.records[0].key.group_id
        assert all(r.key.group_id == group_id for r in result.records)
        revert = self.shard.revert(group_id, list(result.records), self.now, result.producer)
        error = E.coordinator_not_available
        response = with_error(result.response, error)
        super().apply(Result(response, timers=result.timers, completed=[
            (token, with_error(answer, error)) for token, answer in result.completed]))
        if revert.rebuilt:
            for key in [k for k in self.timers if k.group_id == group_id]:
                del self.timers[key]
        super().apply(Result(timers=revert.result.timers, completed=revert.result.completed))
        return response

    def crash_coordinator(self) -> None:
        """kill -9 and restart: a new shard loads the persisted records; parked requests
        are lost with their connections."""
        self.crashes += 1
        topics = {n: info.partitions for n, info in self.coordinator.consumer.image.by_name.items()}
        fresh = self.replayed_shard()
        for record in self.records:
            fresh.committed([record], None)
        self.shard, self.coordinator = fresh, fresh.coordinator
        self.timers = {}
        super().apply(Result(timers=fresh.timers_after_load(self.now)))
        # As the broker does once loading is done (`GroupRuntime.topics_changed`): the
        # topics as they are now, so groups whose durable epoch predates a change bump it.
        self.set_topics(topics)


class FaultyWorld(World):
    def __init__(self, cooperative: bool) -> None:
        super().__init__(cooperative)
        self.h = FaultyHarness({"foo": 3, "bar": 2}, config=self.h.config,
                               classic_config=self.h.classic_config)
        self.offsets = itertools.count(1)
        self.acked: dict[tuple[str, int], int] = {}
        self.sent: dict[tuple[str, int], int] = {}

    # -- faults -----------------------------------------------------------------------------
    def fail_next_append(self) -> None:
        self.h.fail_next = True

    def crash_coordinator(self) -> None:
        self.h.fail_next = False
        answered = set(self.h.answers)
        self.h.crash_coordinator()
        for c in self.classics:
            if c.phase in ("joining", "syncing") and c.token not in answered:
                # The connection dropped under the parked request: try again.
                c.phase, c.rejoin = "stable", True

    # -- clients retry what the coordinator could not persist -------------------------------
    def on_join(self, c: ClassicClient, answer: Any) -> None:
        if answer.error == E.coordinator_not_available:
            c.phase, c.rejoin = "stable", True
            return
        super().on_join(c, answer)

    def on_sync(self, c: ClassicClient, answer: Any) -> None:
        if answer.error == E.coordinator_not_available:
            c.phase, c.rejoin = "stable", True
            return
        super().on_sync(c, answer)

    def lost(self, c: ClassicClient, code: ErrorCode) -> None:
        if code == E.coordinator_not_available:
            return
        super().lost(c, code)

    # -- offsets ----------------------------------------------------------------------------
    def commit(self, i: int) -> None:
        """Client i commits the next offset for every partition it owns."""
        c = self.client(i)
        if not c.running or c.silent or not c.owned:
            return
        if isinstance(c, ConsumerClient):
            if not c.joined:
                return
            epoch, names = c.epoch, sorted(self.h.names(c.owned))
        else:
            if c.phase != "stable":
                return
            epoch, names = c.generation, sorted(c.owned)
        partitions = []
        for name in names:
            topic, _, p = name.rpartition("-")
            offset = next(self.offsets)
            self.sent[(topic, int(p))] = offset
            partitions.append(CommitPartition(topic, int(p), offset))
        response = self.h.apply(self.h.shard.offset_commit(OffsetCommitRequest(
            "g", c.member_id, epoch, tuple(partitions),
            instance_id=getattr(c, "instance_id", None)), self.h.now))
        for part, code in zip(partitions, response.codes, strict=True):
            if code == E.none:
                key = (part.topic, part.partition)
                self.acked[key] = max(self.acked.get(key, 0), part.offset)

    def check_commits(self) -> None:
        """Every acknowledged commit survives; nothing is committed that was never sent."""
        fetched = self.h.shard.offset_fetch(OffsetFetchRequest("g"))
        committed = {(o.topic, o.partition): o.value.offset for o in fetched.offsets
                     if o.value is not None}
        for key, offset in self.acked.items():
            assert committed.get(key, -1) >= offset, (
                f"acknowledged commit {key}@{offset} lost: committed {committed.get(key)}")
        for key, offset in committed.items():
            assert offset <= self.sent.get(key, -1), f"{key}@{offset} was never sent"

    def after_step(self) -> None:
        super().after_step()
        self.check_commits()


def check_replay_after_faults(w: FaultyWorld) -> None:
    """Replay equals live, with the one difference Kafka accepts: a classic group that became
    Empty when its last member left or expired, whose Empty record then failed to persist,
    is Empty live and at its previous generation on disk (Kafka's classic join completion
    says so: after a restart the previous generation is active again and times out, which is
    safe with no active members). The next record the group writes is a whole snapshot and
    makes disk and memory agree again."""
    live = w.h.coordinator.classic.groups.get("g")
    if live is not None and live.state is ClassicState.EMPTY and w.h.failed_appends:
        fresh = w.h.replayed().classic.groups.get("g")
        if fresh is not None and fresh.generation < live.generation:
            return
    check_replay(w)


def run_faulty(sequence: list[tuple[str, Any, Any]], cooperative: bool) -> FaultyWorld:
    """Play `sequence`: the operations of test_mixed_properties.run plus "commit",
    "fail" (the next append fails) and "crash" (the coordinator restarts)."""
    w = FaultyWorld(cooperative)
    for op, arg, extra in sequence:
        if op == "commit":
            w.commit(arg)
            w.after_step()
        elif op == "fail":
            w.fail_next_append()
            w.after_step()
        elif op == "coordinator_crash":
            w.crash_coordinator()
            w.after_step()
        else:
            play(w, op, arg, extra)
    w.h.fail_next = False
    return w
