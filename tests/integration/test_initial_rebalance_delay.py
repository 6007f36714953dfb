"""group.initial.rebalance.delay.ms=0 over TCP: JoinGroups that reach the broker together
land in one generation, as in Kafka, which schedules a 0 ms delayed join rather than closing
the first generation inside the JoinGroup that opens it (issue 10, item 10).

"Together" on the broker's asyncio loop means read off their sockets before the loop turn in
which the 0 ms join timer fires. Sending two requests quickly cannot promise that: on a
loaded machine the broker may run between the two sends and answer the first alone. So each
test pauses the broker (SIGSTOP), sends both JoinGroups, waits until the kernel holds every
byte of both in the broker's sockets, and lets it go (SIGCONT): its next poll returns both
connections, and both requests are handled before the timer the first one arms can fire.
Nothing here waits for a fixed time. Linux only (process state and socket queues are read
from /proc).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol

from coterie.wire.codec import encode_request
from tests.fixtures.coterie_broker import CoterieBroker
from tests.integration.clients import broker_log_on_failure
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(),
                                reason="reads process state and socket queues from /proc")

NO_DELAY = {"group.initial.rebalance.delay.ms": "0"}
WAIT_S = 15.0


def _join(group: str, member_id: str = "", instance_id: str | None = None,
          metadata: bytes = b"") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group, session_timeout=datetime.timedelta(milliseconds=10_000),
        rebalance_timeout=datetime.timedelta(milliseconds=10_000), member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=metadata),))


def _member_id(conn: RawConnection, group: str) -> str:
    """The MEMBER_ID_REQUIRED round (KIP-394), retried while the broker is still loading
    its group coordinator."""
    deadline = time.monotonic() + WAIT_S
    while True:
        resp = conn.request(_join(group))
        if resp.error_code == ErrorCode.member_id_required:
            return resp.member_id
        assert resp.error_code in (ErrorCode.coordinator_load_in_progress,
                                   ErrorCode.coordinator_not_available), resp
        assert time.monotonic() < deadline, "the group coordinator never finished loading"
        time.sleep(0.1)


def _until(what: str, predicate: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, f"not within {WAIT_S}s: {what}"
        time.sleep(0.001)


def _stopped(pid: int) -> bool:
    # The state follows the command name, which is in parentheses and may hold spaces.
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


def _received(broker_port: int, client_port: int) -> int:
    """Bytes the kernel holds, not yet read by the broker, in its end of one connection."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, remote, queues = fields[1], fields[2], fields[4]
                if (int(local.rsplit(":", 1)[1], 16) == broker_port
                        and int(remote.rsplit(":", 1)[1], 16) == client_port):
                    return int(queues.split(":")[1], 16)
    return 0


@contextlib.contextmanager
def _paused(broker: CoterieBroker) -> Iterator[None]:
    """The broker process stopped (SIGSTOP) for the block: it reads nothing meanwhile."""
    assert broker.proc is not None
    pid = broker.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        _until("the broker stops", lambda: _stopped(pid))
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _join_together(broker: CoterieBroker,
                   sends: list[tuple[RawConnection, JoinGroupRequest]]) -> list[Any]:
    """Send each JoinGroup on its own connection so that the broker's next poll returns
    them all; return the answers in order."""
    sent = []
    with _paused(broker):
        for conn, request in sends:
            conn.correlation += 1
            frame = encode_request(conn.correlation, request, client_id="raw-test")
            conn.send_bytes(frame)
            sent.append((conn, conn.correlation, len(frame)))
        for conn, _, size in sent:
            port = conn.sock.getsockname()[1]
            _until(f"{size} bytes queued for the broker from port {port}",
                   lambda port=port, size=size: _received(broker.port, port) >= size)
    answers = []
    for (conn, correlation, _), (_, request) in zip(sent, sends, strict=True):
        got, body = conn.recv(load_response_schema(request.__api_key__, request.__version__))
        assert got == correlation
        answers.append(body)
    return answers


def _one_generation(answers: list[Any], metadata: dict[str, bytes]) -> None:
    """Every JoinGroup answered without error in generation 1, whose leader was sent every
    member's metadata."""
    assert [a.error_code for a in answers] == [ErrorCode.none] * len(answers), answers
    assert {a.generation_id for a in answers} == {1}, answers
    leaders = [a for a in answers if a.member_id == a.leader]
    assert len(leaders) == 1, answers
    assert {m.member_id: bytes(m.metadata) for m in leaders[0].members} == metadata
    assert {a.member_id for a in answers} == set(metadata)


def test_joins_with_member_ids_sent_together_share_the_first_generation(
        coterie_factory: Any) -> None:
    """Two members get their ids (MEMBER_ID_REQUIRED), then send JoinGroup with them back to
    back on two connections: both are answered in generation 1, whose leader sees both.
    (coterie used to get there by waiting for every pending id, which Kafka does not do;
    now, as on Kafka, because both JoinGroups are read before the 0 ms timer fires.)"""
    broker = coterie_factory(config=NO_DELAY)
    group = f"delay0-{uuid.uuid4().hex[:8]}"
    with broker_log_on_failure(broker.log_text), \
            RawConnection(broker.host, broker.port) as c1, \
            RawConnection(broker.host, broker.port) as c2:
        a, b = _member_id(c1, group), _member_id(c2, group)
        answers = _join_together(broker, [(c1, _join(group, a, metadata=b"ma")),
                                          (c2, _join(group, b, metadata=b"mb"))])
        _one_generation(answers, {a: b"ma", b: b"mb"})


def test_static_members_arriving_together_share_the_first_generation(
        coterie_factory: Any) -> None:
    """Static members skip MEMBER_ID_REQUIRED, so their first JoinGroup is the one that
    joins: two sent back to back on two connections are answered in generation 1,
    whose leader sees both (before, the first closed generation 1 alone at once and the
    second forced generation 2)."""
    broker = coterie_factory(config=NO_DELAY)
    group = f"delay0-static-{uuid.uuid4().hex[:8]}"
    with broker_log_on_failure(broker.log_text), \
            RawConnection(broker.host, broker.port) as c1, \
            RawConnection(broker.host, broker.port) as c2:
        _member_id(c1, f"{group}-probe")  # the group coordinator has loaded
        answers = _join_together(broker, [(c1, _join(group, instance_id="i-a", metadata=b"ma")),
                                          (c2, _join(group, instance_id="i-b", metadata=b"mb"))])
        _one_generation(answers, {answers[0].member_id: b"ma", answers[1].member_id: b"mb"})
        leader = next(a for a in answers if a.member_id == a.leader)
        assert {m.group_instance_id for m in leader.members} == {"i-a", "i-b"}
