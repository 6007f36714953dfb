"""The broker's own socket layer (coterie.broker.sockets), with both of its pollers.

Linux brokers watch every client socket through one epoll set (`Poller`); elsewhere the
asyncio loop watches each socket (`LoopPoller`). CI runs on Linux, so these scenarios run a
real broker in-process (its asyncio loop on a thread, a loopback port) with each poller in
turn and talk to it over TCP: pipelined requests answered in order, a client's half close
answered before the broker closes, a Fetch answer sent by sendfile to a client that reads it
slowly, and a reset client that touches no one else.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.records.readers import read_batch
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v16.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v16.response import FetchResponse

from coterie.broker import server
from coterie.broker.config import BrokerConfig
from coterie.broker.server import Broker
from coterie.broker.sockets import LoopPoller, Poller
from coterie.wire.codec import encode_request
from tests.integration.test_data_plane_raw import create, produce
from tests.kafka_raw import RawConnection, make_batch

API_VERSIONS = ApiVersionsRequest(client_software_name="t", client_software_version="1")


class _Running:
    """A broker serving on a thread of its own until `stop`."""

    def __init__(self, data_dir: Path, poller: Callable[[asyncio.AbstractEventLoop], Any]):
        self.loop = asyncio.new_event_loop()
        self.broker = Broker(BrokerConfig.load("127.0.0.1", 0, data_dir))
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(self._start(poller))
            started.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert started.wait(30)
        self.port = self.broker.port

    async def _start(self, poller: Callable[[asyncio.AbstractEventLoop], Any]) -> None:
        original = server.make_poller
        server.make_poller = poller
        try:
            await self.broker.start()
        finally:
            server.make_poller = original
        while not self.broker.groups.loaded:
            await asyncio.sleep(0.01)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


@pytest.fixture(params=[Poller, LoopPoller], ids=["epoll", "loop"])
def broker(request: Any, tmp_path: Path) -> Iterator[_Running]:
    running = _Running(tmp_path / "data", request.param)
    assert type(running.broker.poller) is request.param
    try:
        yield running
    finally:
        running.stop()


def _read_frames(sock: socket.socket, count: int) -> list[bytes]:
    data = bytearray()
    frames: list[bytes] = []
    while len(frames) < count:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        while len(data) >= 4:
            (size,) = struct.unpack_from(">i", data, 0)
            if len(data) < 4 + size:
                break
            frames.append(bytes(data[4:4 + size]))
            del data[:4 + size]
    return frames


def test_pipelined_requests_are_answered_in_order(broker: _Running) -> None:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(b"".join(encode_request(i, API_VERSIONS) for i in range(500)))
        frames = _read_frames(sock, 500)
    assert [struct.unpack_from(">i", f, 0)[0] for f in frames] == list(range(500))


def test_a_half_closed_client_gets_its_answers_then_the_end(broker: _Running) -> None:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(b"".join(encode_request(i, API_VERSIONS) for i in range(3)))
        sock.shutdown(socket.SHUT_WR)
        frames = _read_frames(sock, 4)  # asks for one more than will come: reads to EOF
    assert [struct.unpack_from(">i", f, 0)[0] for f in frames] == [0, 1, 2]


def test_a_fetch_sent_by_sendfile_reaches_a_slow_reader_whole(broker: _Running) -> None:
    value = bytes(range(256)) * 64  # 16 KiB a record, 8 MiB in all: more than a socket buffer
    with RawConnection("127.0.0.1", broker.port, timeout=30) as conn:
        topic_id = create(conn, "slow").topic_id
        for _ in range(16):
            assert produce(conn, "slow", 0, make_batch([value] * 32)).error_code == 0
        got = 0
        offset = 0
        while offset < 512:
            # Asked for 8 MiB, more than the socket holds; read only after a pause, so the
            # broker's sendfile finds the socket full and must wait until it can send.
            correlation_id = conn.send(_fetch_request(topic_id, offset))
            time.sleep(0.2)
            got_id, answer = conn.recv(FetchResponse)
            assert got_id == correlation_id
            part = answer.responses[0].partitions[0]
            assert part.error_code == ErrorCode.none
            records = [r for batch in _batches(part.records) for r in batch]
            assert records and all(r == value for r in records)
            got += len(records)
            offset += len(records)
    assert got == 512


def _fetch_request(topic_id: Any, offset: int) -> FetchRequest:
    return FetchRequest(
        max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=8 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, topics=(FetchTopic(topic_id=topic_id, partitions=(
            FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                           last_fetched_epoch=-1, log_start_offset=-1,
                           partition_max_bytes=8 << 20),)),),
        forgotten_topics_data=(), rack_id="")


def _batches(data: bytes | None) -> Iterator[list[bytes]]:
    """The whole batches of a Fetch answer (a last one cut short by max_bytes is left)."""
    data = data or b""
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        if pos + 12 + length > len(data):
            return
        batch, size = read_batch(data, pos)
        yield [record.value for record in batch.records]
        pos += size


def test_a_client_that_resets_does_not_disturb_another(broker: _Running) -> None:
    with RawConnection("127.0.0.1", broker.port) as healthy:
        for _ in range(20):
            rude = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
            rude.sendall(encode_request(1, API_VERSIONS) * 50)
            rude.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            rude.close()  # a reset, with answers still on their way
            answer = healthy.request(API_VERSIONS)
            assert isinstance(answer, ApiVersionsResponse)
            assert answer.error_code == ErrorCode.none
    deadline = time.monotonic() + 10
    while len(broker.broker.connections) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(broker.broker.connections) == 0
