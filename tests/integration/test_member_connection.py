"""coterie.client's Connection and Cluster against real brokers: version negotiation,
pipelined requests matched by correlation id, clear errors when the broker goes away or
stays silent, bootstrap lists with dead entries, FindCoordinator."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from coterie.client.cluster import Cluster
from coterie.client.connection import Connection
from coterie.client.errors import (
    BrokerConnectionError,
    BrokerUnavailableError,
    ConnectionClosedError,
    RequestTimeoutError,
)
from coterie.client.versions import MEMBER_API_RANGES, ApiKey
from tests.fixtures.coterie_broker import free_port
from tests.integration import member_helpers
from tests.integration.member_helpers import Target, new_group, run

group_broker = member_helpers.group_broker


def test_versions_are_the_highest_both_sides_and_kio_support(coterie_factory) -> None:
    broker = coterie_factory()

    async def scenario() -> None:
        conn = await Connection.open(broker.host, broker.port)
        try:
            got = {api.name: conn.version(api) for api in (
                ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.FIND_COORDINATOR,
                ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP)}
            assert got == {"API_VERSIONS": 3, "METADATA": 13, "FIND_COORDINATOR": 6,
                           "JOIN_GROUP": 9, "SYNC_GROUP": 5, "HEARTBEAT": 4, "LEAVE_GROUP": 5}
            assert conn.version(ApiKey.JOIN_GROUP, (0, 5)) == 5
        finally:
            await conn.aclose()

    run(scenario())


def test_an_api_versions_version_the_broker_lacks_falls_back_to_one_it_has(
        coterie_factory) -> None:
    """coterie speaks ApiVersions v0-3; asked in v4 it answers UNSUPPORTED_VERSION in the v0
    layout with its ranges, and the connection asks again in v3."""
    broker = coterie_factory()

    async def scenario() -> None:
        ranges = {**MEMBER_API_RANGES, ApiKey.API_VERSIONS: (0, 4)}
        conn = await Connection.open(broker.host, broker.port, api_ranges=ranges)
        try:
            assert conn.broker_ranges[ApiKey.API_VERSIONS] == (0, 3)
            assert conn.version(ApiKey.API_VERSIONS) == 3
            assert conn.version(ApiKey.JOIN_GROUP) == 9
        finally:
            await conn.aclose()

    run(scenario())


def test_pipelined_requests_each_get_their_own_answer(group_broker: Target) -> None:
    async def scenario() -> None:
        conn = await Connection.open(group_broker.host, group_broker.port)
        try:
            keys = [f"group-{i}" for i in range(150)]
            answers = await asyncio.gather(*(
                conn.call(ApiKey.FIND_COORDINATOR, {"key": k, "coordinator_keys": [k]})
                for k in keys))
            assert [a.coordinators[0].key for a in answers] == keys
            mixed = await asyncio.gather(
                conn.call(ApiKey.METADATA, {"topics": None}),
                conn.call(ApiKey.API_VERSIONS, {"client_software_name": "t",
                                                "client_software_version": "1"}),
                conn.call(ApiKey.FIND_COORDINATOR, {"coordinator_keys": ["solo"]}))
            assert [type(m).__name__ for m in mixed] == [
                "MetadataResponse", "ApiVersionsResponse", "FindCoordinatorResponse"]
        finally:
            await conn.aclose()

    run(scenario())


def test_a_broker_that_dies_fails_the_outstanding_request_at_once(coterie_factory) -> None:
    broker = coterie_factory()  # the default 3 s initial rebalance delay parks JoinGroup

    async def scenario() -> None:
        conn = await Connection.open(broker.host, broker.port, request_timeout_ms=20_000)
        parked = asyncio.ensure_future(conn.call(ApiKey.JOIN_GROUP, {
            "group_id": new_group(), "session_timeout": 6000, "rebalance_timeout": 10_000,
            "member_id": "", "protocol_type": "x", "protocols": [{"name": "v", "metadata": b""}],
        }, versions=(0, 3)))  # v0-3: no MEMBER_ID_REQUIRED round, the request parks
        await asyncio.sleep(0.5)
        assert not parked.done()
        start = time.monotonic()
        await asyncio.to_thread(broker.kill9)
        with pytest.raises(ConnectionClosedError) as info:
            await parked
        assert time.monotonic() - start < 5
        assert "JOIN_GROUP v3" in str(info.value) and broker.bootstrap in str(info.value)
        assert conn.closed
        with pytest.raises(ConnectionClosedError):
            await conn.call(ApiKey.METADATA, {"topics": None})

    run(scenario())


def test_a_silent_broker_times_out_and_the_connection_is_closed() -> None:
    async def scenario() -> None:
        accepted: list[asyncio.StreamWriter] = []

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        start = time.monotonic()
        with pytest.raises(RequestTimeoutError) as info:
            await Connection.open("127.0.0.1", port, connect_timeout_ms=400)
        assert 0.3 < time.monotonic() - start < 3
        assert "API_VERSIONS" in str(info.value)
        assert accepted
        server.close()
        await server.wait_closed()

    run(scenario())


def test_a_refused_connection_is_a_connection_error() -> None:
    async def scenario() -> None:
        with pytest.raises(BrokerConnectionError, match="cannot connect"):
            await Connection.open("127.0.0.1", free_port())

    run(scenario())


def test_cluster_skips_dead_bootstrap_entries_and_finds_the_coordinator(
        group_broker: Target) -> None:
    dead = free_port()

    async def scenario() -> None:
        cluster = Cluster(f"127.0.0.1:{dead},{group_broker.bootstrap}", retry_backoff_ms=20)
        try:
            md = await cluster.metadata(deadline=asyncio.get_running_loop().time() + 30)
            assert [(n.host, n.port) for n in md.brokers.values()] == [
                (group_broker.host, group_broker.port)]
            node = await cluster.find_coordinator(new_group())
            assert (node.host, node.port) == (group_broker.host, group_broker.port)
        finally:
            await cluster.close()

    run(scenario())


def test_a_listener_that_drops_every_connection_is_retried_with_backoff() -> None:
    """Reconnects are spaced by a growing, capped delay, and end at the deadline."""
    attempts: list[float] = []

    async def scenario() -> None:
        async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            attempts.append(time.monotonic())
            writer.close()

        server = await asyncio.start_server(drop, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        cluster = Cluster(f"127.0.0.1:{port}", retry_backoff_ms=50, retry_backoff_max_ms=400)
        loop = asyncio.get_running_loop()
        with pytest.raises(BrokerUnavailableError):
            await cluster.metadata(deadline=loop.time() + 2.0)
        await cluster.close()
        server.close()
        await server.wait_closed()

    run(scenario())
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert 4 <= len(attempts) <= 20, attempts
    assert max(gaps) <= 0.4 * 1.25 + 0.2  # capped (jitter and scheduling aside)
    # and grown (the last gap may be cut short by the deadline, so the largest is compared)
    assert max(gaps) > 2 * gaps[0]

