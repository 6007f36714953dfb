"""The consumer's embedded protocol, hook by hook, without a broker: what it advertises in
JoinGroup (owned partitions, generation, sticky user data) and what eager and cooperative
rebalancing do with an assignment (who is revoked, who is added, when the KIP-429 follow-up
rebalance is asked for), in the order a GroupMember calls the hooks. Auto commit is off, so
no hook needs the network."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from coterie.assign.sticky_userdata import decode_user_data
from coterie.client import Consumer, Generation, TopicPartition
from coterie.client.errors import RebalanceListenerError
from coterie.client.records import ConsumerRecord, Decoded
from coterie.wire.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
)

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


class Recorder:
    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []
        self.fail_on = fail_on
        self.probe: Any = None  # called inside on_partitions_revoked
        self.probed: list[Any] = []

    def _record(self, kind: str, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append((kind, partitions))
        if kind == self.fail_on:
            raise RuntimeError(f"listener fails on {kind}")

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self._record("assigned", partitions)

    async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        if self.probe is not None:
            self.probed.append(self.probe())
        self._record("revoked", partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self._record("lost", partitions)


def make(assignors: list[str], listener: Recorder) -> Consumer:
    return Consumer("127.0.0.1:1", "g", topics=["t"], assignors=assignors, listener=listener,
                    auto_commit=False, rack="r1")


def gen(n: int, protocol: str) -> Generation:
    return Generation(n, "me", "other", "consumer", protocol)


def assignment(*tps: TopicPartition) -> bytes:
    return encode_assignment(Assignment(frozenset(tps)))


def rejoin_asked(c: Consumer) -> bool:
    signal = c.member._signal
    return signal is not None and "follow-up" in signal.reason


def test_cooperative_keeps_what_stays_and_rejoins_after_revoking() -> None:
    listener = Recorder()

    async def scenario() -> None:
        c = make(["cooperative-sticky"], listener)
        p = c._protocol
        assert c.cooperative
        (name, md), = await p.metadata()
        first = decode_subscription(md)
        assert (name, first.topics, first.owned_partitions, first.generation_id,
                first.rack_id) == ("cooperative-sticky", ("t",), frozenset(), -1, "r1")
        await p.on_assignment(gen(1, name), assignment(T0, T1))
        assert c.assignment() == {T0, T1} and not rejoin_asked(c)
        await p.on_revoke(gen(1, name))  # a rebalance begins: nothing is given up
        assert c.assignment() == {T0, T1} and c.generation_id == 1
        sub = decode_subscription((await p.metadata())[0][1])
        assert (sub.owned_partitions, sub.generation_id) == ({T0, T1}, 1)
        assert decode_user_data(sub.user_data or b"").generation == 1
        # Records of the partition about to move, fetched but not delivered, are gone by the
        # time its revocation is announced; the partition that stays keeps its records.
        for tp in (T0, T1):
            ps = c._assignment.parts[tp]
            ps.seek(0)
            c._assignment.deliver(ps, 0, Decoded([ConsumerRecord(
                tp.topic, tp.partition, 0, 0, 0, None, b"x")], 1))
        listener.probe = lambda: {(r.topic, r.partition) for r in c._assignment.take(10)[0]}
        await p.on_assignment(gen(2, name), assignment(T1, T2))
        assert listener.probed == [{T1}]
        assert c.assignment() == {T1, T2} and rejoin_asked(c)
        assert listener.calls == [("assigned", frozenset({T0, T1})),
                                  ("revoked", frozenset({T0})),
                                  ("assigned", frozenset({T2}))]
        await p.on_lost(gen(2, name))
        assert c.assignment() == frozenset() and c.generation_id == -1
        assert listener.calls[-1] == ("lost", frozenset({T1, T2}))
        sub = decode_subscription((await p.metadata())[0][1])
        assert (sub.owned_partitions, sub.generation_id) == (frozenset(), -1)

    run(scenario())


def test_eager_revokes_everything_before_rejoining() -> None:
    listener = Recorder()

    async def scenario() -> None:
        c = make(["sticky", "range"], listener)
        p = c._protocol
        assert not c.cooperative
        names = [n for n, _ in await p.metadata()]
        assert names == ["sticky", "range"]
        assert decode_subscription((await p.metadata())[0][1]).user_data is None
        await p.on_assignment(gen(4, "sticky"), assignment(T0, T1))
        await p.on_revoke(gen(4, "sticky"))
        assert c.assignment() == frozenset() and c.generation_id == -1
        sticky, plain = [decode_subscription(md) for _, md in await p.metadata()]
        assert sticky.owned_partitions == frozenset()  # eager: already revoked
        assert sticky.generation_id == 4
        decoded = decode_user_data(sticky.user_data or b"")
        assert (decoded.owned, decoded.generation) == ({T0, T1}, 4)
        assert plain.user_data is None
        await p.on_assignment(gen(5, "sticky"), assignment(T1, T2))
        assert not rejoin_asked(c)
        assert listener.calls == [("assigned", frozenset({T0, T1})),
                                  ("revoked", frozenset({T0, T1})),
                                  ("assigned", frozenset({T1, T2}))]

    run(scenario())


def test_mixing_eager_and_cooperative_assignors_rebalances_eagerly() -> None:
    c = make(["cooperative-sticky", "range"], Recorder())
    assert not c.cooperative


def test_an_undecodable_assignment_raises_and_changes_nothing() -> None:
    listener = Recorder()

    async def scenario() -> None:
        c = make(["range"], listener)
        with pytest.raises(ConsumerProtocolError):
            await c._protocol.on_assignment(gen(1, "range"), b"\x00\x01garbage")
        assert c.assignment() == frozenset() and listener.calls == []

    run(scenario())


def test_a_failing_listener_is_reported_from_poll_and_the_rebalance_goes_on() -> None:
    listener = Recorder(fail_on="revoked")

    async def scenario() -> None:
        c = make(["range"], listener)
        await c._protocol.on_assignment(gen(1, "range"), assignment(T0))
        await c._protocol.on_revoke(gen(1, "range"))
        assert c.assignment() == frozenset()
        with pytest.raises(RebalanceListenerError, match="on_partitions_revoked"):
            c._check()

    run(scenario())


def test_the_coordinator_choosing_an_unknown_assignor_is_an_error() -> None:
    c = make(["range"], Recorder())
    with pytest.raises(ValueError, match="roundrobin"):
        c._protocol.assignor("roundrobin")
