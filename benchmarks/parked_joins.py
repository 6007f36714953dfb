"""What a parked JoinGroup costs the broker: N classic members wait in a join phase at once.

Why: when 10,000 members join together, everything their parked requests hold is freed
after the join, but the allocator keeps the pools it used resident wherever a long-lived
object was placed among them (benchmarks/load.py measured 2.5 KiB a member of such pools).
The less a parked request holds, the less of that is left.

What runs: a coterie broker under tracemalloc (benchmarks/_instrumented_serve.py) with
`group.initial.rebalance.delay.ms` 10 minutes, so that no join phase ends while measuring.
`--members` connections each get a member id (JoinGroup v9, MEMBER_ID_REQUIRED) for one of
`members / 10` groups, then send JoinGroup with it, which parks. Snapshots after connecting
and 3 s after the last JoinGroup; printed: broker RSS growth per member (inflated by
tracemalloc's own bookkeeping) and the Python allocations per member, by allocating line.

    .venv/bin/python benchmarks/parked_joins.py                  # 2,000 members, ~30 s
    .venv/bin/python benchmarks/parked_joins.py --members 5000
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import socket
import struct
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _brokers import rss_kib, run_broker_process
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.join_group.v9.response import JoinGroupResponse
from kio.serial import entity_reader

from coterie.wire.codec import encode_request

INSTRUMENTED = (str(Path(__file__).resolve().parent / "_instrumented_serve.py"),)
HEADER_V1 = 5  # correlation id and an empty tagged-field section (flexible versions)


def _join(group: str, member_id: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group, member_id=member_id, session_timeout=datetime.timedelta(seconds=45),
        rebalance_timeout=datetime.timedelta(seconds=60), protocol_type="consumer",
        group_instance_id=None, reason=None,
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01" + b"t" * 40),))


def _frame(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)
    return exact(struct.unpack(">i", exact(4))[0])


class _Snapshots:
    def __init__(self, directory: Path, pid: int) -> None:
        self.directory, self.pid, self.taken = directory, pid, 0

    def take(self) -> tracemalloc.Snapshot:
        path = self.directory / f"snapshot-{self.taken}"
        self.taken += 1
        os.kill(self.pid, signal.SIGUSR1)
        while not Path(f"{path}.done").exists():
            time.sleep(0.2)
        return tracemalloc.Snapshot.load(str(path))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coterie-parked-") as tmp:
        snap_dir = Path(tmp) / "snapshots"
        snap_dir.mkdir()
        os.environ["COTERIE_TRACEMALLOC_DIR"] = str(snap_dir)
        overrides = {"group.initial.rebalance.delay.ms": "600000"}
        with run_broker_process("coterie", Path(tmp), overrides, INSTRUMENTED) as (
                bootstrap, broker):
            host, port = bootstrap.rsplit(":", 1)
            snaps = _Snapshots(snap_dir, broker.pid)
            socks = [socket.create_connection((host, int(port))) for _ in range(args.members)]
            time.sleep(1)
            before, rss_before = snaps.take(), rss_kib(broker.pid)
            groups = [f"parked-{i // 10}" for i in range(args.members)]
            for sock, group in zip(socks, groups, strict=True):
                sock.sendall(encode_request(1, _join(group, ""), client_id="parked"))
            reader = entity_reader(JoinGroupResponse)
            ids = [reader(_frame(sock), HEADER_V1)[0].member_id for sock in socks]
            for sock, group, member_id in zip(socks, groups, ids, strict=True):
                sock.sendall(encode_request(2, _join(group, member_id), client_id="parked"))
            time.sleep(3)
            after, rss_after = snaps.take(), rss_kib(broker.pid)
            for sock in socks:
                sock.close()
    n = args.members
    stats = after.compare_to(before, "lineno")
    print(f"{n:,} members parked in a join phase")
    print(f"broker RSS growth per member (tracemalloc on): {(rss_after - rss_before) / n:.2f} KiB")
    print(f"Python allocations per member: {sum(s.size_diff for s in stats) / n:,.0f} B")
    print("| bytes / member | blocks / member | allocated at |\n| ---: | ---: | --- |")
    for stat in stats[:args.top]:
        where = stat.traceback[0]
        name = where.filename.split("site-packages/")[-1].split("/coterie/", 1)[-1]
        print(f"| {stat.size_diff / n:,.0f} | {stat.count_diff / n:.2f} | {name}:{where.lineno} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
