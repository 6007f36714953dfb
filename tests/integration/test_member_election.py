"""Leader election with real processes: kill the leader and exactly one new leader appears
within about a session timeout; stop the leader's process (SIGSTOP) past its session and, once
resumed, it never acts as leader again; and at no instant do two candidates act as leader.

Candidates run in child processes (tests/integration/election_child.py) that log every
`is_leader`-guarded tick with time.monotonic(), a clock shared by all processes on the
machine, so overlaps between leaderships are checked on one time line. Runs against coterie
and, marked `reference`, against Apache Kafka.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coterie.client.election import LeaderElection
from tests.integration import member_helpers
from tests.integration.member_helpers import Target, eventually, new_group, run

group_broker = member_helpers.group_broker

SESSION_MS = 6000
HEARTBEAT_MS = 500
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Candidate:
    label: str
    proc: subprocess.Popen
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(event)

    def seen(self, kind: str, after: float = 0.0) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if e["event"] == kind and e["t"] > after]

    def leading(self, within: float = 0.3) -> bool:
        ticks = self.seen("tick")
        return bool(ticks) and time.monotonic() - ticks[-1]["t"] < within


class Candidates:
    def __init__(self, target: Target, group: str, count: int) -> None:
        self.all: list[Candidate] = []
        for i in range(count):
            label = f"c{i}"
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.election_child", target.bootstrap,
                 group, label, str(SESSION_MS), str(HEARTBEAT_MS)],
                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
            c = Candidate(label, proc)
            threading.Thread(target=c.read, daemon=True).start()
            self.all.append(c)

    def leaders(self, within: float = 0.3) -> list[Candidate]:
        return [c for c in self.all if c.leading(within)]

    def close(self) -> None:
        for c in self.all:
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGCONT)
                c.proc.kill()
            c.proc.wait(10)

    def check_alive(self, dead: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        for c in self.all:
            if c.label not in dead and c.proc.poll() is not None:
                err = c.proc.stderr.read() if c.proc.stderr else ""
                raise AssertionError(f"{c.label} exited with {c.proc.returncode}: {err[-3000:]}")


def terms(candidates: Candidates, ends: dict[str, float]) -> list[tuple[float, float, str, int]]:
    """(first tick, last tick, label, epoch) of every leadership seen; a candidate whose
    process was killed or stopped ends its term at that moment at the latest."""
    out = []
    for c in candidates.all:
        by_epoch: dict[int, list[float]] = defaultdict(list)
        for e in c.seen("tick"):
            by_epoch[e["epoch"]].append(e["t"])
        for epoch, ts in by_epoch.items():
            out.append((min(ts), min(max(ts), ends.get(c.label, max(ts))), c.label, epoch))
    return sorted(out)


def assert_never_two_leaders(candidates: Candidates, ends: dict[str, float]) -> None:
    spans = terms(candidates, ends)
    for (_, e1, who1, ep1), (s2, _, who2, ep2) in itertools.pairwise(spans):
        assert e1 < s2, f"{who1} (epoch {ep1}) led until {e1:.3f}, {who2} (epoch {ep2}) " \
                        f"from {s2:.3f}"
    for c in candidates.all:
        for d in c.seen("demoted"):
            late = [e for e in c.seen("tick", after=d["t"]) if e["epoch"] == d["epoch"]]
            assert not late, f"{c.label} ticked after its demotion: {late[:3]}"


async def one_leader(candidates: Candidates, timeout: float = 30.0,
                     exclude: frozenset[str] = frozenset()) -> Candidate:
    def exactly_one() -> bool:
        candidates.check_alive(set(exclude))
        return len([c for c in candidates.leaders() if c.label not in exclude]) == 1
    await eventually(exactly_one, "exactly one leader", timeout)
    return next(c for c in candidates.leaders() if c.label not in exclude)


def test_kill_the_leader_and_exactly_one_new_leader_appears(group_broker: Target) -> None:
    candidates = Candidates(group_broker, new_group("election"), 3)

    async def scenario() -> None:
        leader = await one_leader(candidates)
        await asyncio.sleep(1.0)
        assert candidates.leaders() == [leader]
        killed_at = time.monotonic()
        leader.proc.kill()
        leader.proc.wait(10)
        dead = frozenset({leader.label})
        await eventually(lambda: any(c.seen("elected", after=killed_at)
                                     for c in candidates.all), "a new leader", 20)
        first = min(e["t"] for c in candidates.all for e in c.seen("elected", after=killed_at))
        took = first - killed_at
        print(f"new leader {took:.2f}s after the kill (session timeout {SESSION_MS} ms)")
        assert took <= SESSION_MS / 1000 + 1.5, took
        await asyncio.sleep(2.0)  # would a second new leader show up?
        successors = {c.label for c in candidates.all if c.seen("elected", after=killed_at)}
        assert len(successors) == 1, successors
        assert (await one_leader(candidates, exclude=dead)).label in successors
        assert_never_two_leaders(candidates, {leader.label: killed_at})

    try:
        run(scenario(), timeout=90)
    finally:
        candidates.close()


def test_a_stopped_leader_does_not_act_as_leader_when_it_resumes(group_broker: Target) -> None:
    candidates = Candidates(group_broker, new_group("election"), 2)

    async def scenario() -> None:
        leader = await one_leader(candidates)
        follower = next(c for c in candidates.all if c is not leader)
        stopped_at = time.monotonic()
        leader.proc.send_signal(signal.SIGSTOP)
        await eventually(lambda: bool(follower.seen("elected", after=stopped_at)),
                         "the follower to take over", 20)
        await asyncio.sleep(1.0)
        resumed_at = time.monotonic()
        leader.proc.send_signal(signal.SIGCONT)
        await eventually(lambda: bool(leader.seen("demoted", after=resumed_at)),
                         "the resumed leader to step down", 10)
        reason = leader.seen("demoted", after=resumed_at)[0]["reason"]
        assert reason in ("the session lease ran out", "the generation was lost"), reason
        await asyncio.sleep(1.0)
        assert not leader.seen("tick", after=stopped_at + 0.1)
        assert (await one_leader(candidates)) is follower
        assert_never_two_leaders(candidates, {})

    try:
        run(scenario(), timeout=90)
    finally:
        candidates.close()


def test_a_leader_that_closes_hands_over_and_everyone_knows_who_leads(
        group_broker: Target) -> None:
    group = new_group("election")

    async def scenario() -> None:
        elections = [LeaderElection(group_broker.bootstrap, group, info=f"host-{i}:80",
                                    session_timeout_ms=SESSION_MS,
                                    heartbeat_interval_ms=HEARTBEAT_MS) for i in range(3)]
        for e in elections:
            await e.start()

        def settled() -> bool:
            infos = {e.leader for e in elections}
            return sum(e.is_leader for e in elections) == 1 and len(infos) == 1 and (
                None not in infos)
        await eventually(settled, "one leader known to all", 30)
        old = next(e for e in elections if e.is_leader)
        assert all(e.leader.info == old.info for e in elections if e.leader)
        await old.close()
        assert not old.is_leader and old.terms
        rest = [e for e in elections if e is not old]
        took = await eventually(lambda: sum(e.is_leader for e in rest) == 1 and all(
            e.leader is not None and e.leader.info != old.info for e in rest),
            "a new leader after a clean hand-over", 15)
        assert took < 5  # a clean leave needs no session timeout
        new = next(e for e in rest if e.is_leader)
        assert new.leadership is not None
        assert new.leadership.epoch > old.terms[-1].epoch
        for e in rest:
            await e.close()

    run(scenario())
