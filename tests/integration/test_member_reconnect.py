"""A broker that goes away: the member gives its generation up when its session lease runs
out (without anyone to tell it), reconnects with backoff when the broker returns and rejoins;
with `unavailable_timeout_ms` it stops with BrokerUnavailableError instead of retrying forever.
coterie only: these tests stop and restart the broker process."""

from __future__ import annotations

import asyncio
import time

import pytest

from coterie.client.errors import BrokerUnavailableError
from coterie.client.member import MemberState
from tests.integration.member_helpers import (
    SESSION_TIMEOUT_MS,
    RecordingProtocol,
    Target,
    eventually,
    member,
    new_group,
    run,
)


def _target(coterie_factory) -> Target:
    broker = coterie_factory(config={"group.initial.rebalance.delay.ms": "0"})
    return Target("coterie", broker.host, broker.port, broker)


def test_broker_restart_the_member_loses_its_lease_reconnects_and_rejoins(
        coterie_factory) -> None:
    target = _target(coterie_factory)
    group = new_group()

    async def scenario() -> None:
        m = member(target, group, "survivor")
        proto = m.protocol
        assert isinstance(proto, RecordingProtocol)
        await m.start()
        first = (await m.wait_stable(30)).generation_id
        stopped = time.monotonic()
        await asyncio.to_thread(target.handle.stop)
        # Nobody can tell the member; its own lease ends its generation in time.
        took = await eventually(lambda: ("lost", first, m.member_id) in proto.events,
                                "the lease to run out", 15)
        assert time.monotonic() - stopped <= SESSION_TIMEOUT_MS / 1000 + 1.0, took
        assert m.state is MemberState.JOINING and not m.lease_valid()
        await asyncio.sleep(1.5)  # retries go on, spaced by the backoff
        await asyncio.to_thread(target.handle.start)
        await eventually(lambda: m.state is MemberState.STABLE and m.generation_id > first,
                         "the member to rejoin after the restart", 30)
        assert m.coordinator_connects >= 2
        await m.close()
        assert m.error is None

    run(scenario())


def test_with_an_unavailable_bound_the_member_stops_with_a_clear_error(coterie_factory) -> None:
    target = _target(coterie_factory)

    async def scenario() -> None:
        m = member(target, new_group(), "bounded", unavailable_timeout_ms=2500)
        proto = m.protocol
        assert isinstance(proto, RecordingProtocol)
        await m.start()
        generation = (await m.wait_stable(30)).generation_id
        await asyncio.to_thread(target.handle.stop)
        start = time.monotonic()
        with pytest.raises(BrokerUnavailableError):
            await asyncio.wait_for(m.wait_closed(), 20)
        assert time.monotonic() - start < 2.5 + 2.0
        assert m.state is MemberState.FAILED
        assert ("lost", generation, m.member_id) in proto.events
        await m.close()

    run(scenario())
