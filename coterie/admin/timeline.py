"""A group's rebalance timeline, from its events in `__group_events`.

The broker records every group change as one event (`coterie.group.events` has the format:
ts, group, protocol, type, generation, member, details). Operators do not want the raw
stream: they want to see each rebalance as one thing (which generation or epoch it reached,
when it started, how long the group took to be Stable again, who joined, left or was fenced
and why, which partitions each member gained or lost) and, for a picture, who held which
partitions over time. `build_timeline` turns one group's events into exactly that.

Reading the stream. Events are taken in order, a *step* at a time: the events of one step
share one timestamp (the broker stamps every event of one coordinator operation with one
clock reading), and each step is applied whole before anything is judged, so an eager
member that gives everything back and gets it again inside one operation shows no gap.

- A rebalance *opens* at the first step, while none is open, that holds a membership change
  (joined, left, fenced), a rebalance_started, a generation or epoch bump, a partition moving
  or a state other than Stable / Empty / Dead.
- It *closes* at the end of the first step after which the group's state is Stable, Empty
  or Dead (the state is the last `state_changed`; a group whose state was never seen, as
  when retention cut the stream's start, counts as Stable once a step changes no more).
  Its duration is from the opening step to the closing one; a rebalance still open at the
  end of the stream is *in progress* (no stable time, no duration).
- *Moved* partitions are net, per member: what it held when the rebalance closed minus what
  it held when it opened (gained), and the reverse (lost). An eager rebalance revokes
  everything and gives most of it back: only what changed hands is "moved"; `revoked`
  counts every partition given up on the way, as the cost of eagerness.
- Ownership: each member's partition set over time, as intervals (member, partitions,
  from, to; to None while held at the end of the stream). A member that leaves or is fenced
  holds nothing from then on; a deleted group holds nothing.

Streams groups name tasks instead of partitions (details "tasks"); they are shown the same
way, as strings. Pure: events in, values out (no clock, no I/O).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SETTLED_STATES = frozenset({"Stable", "Empty", "Dead"})
# Events whose step opens a rebalance when none is open.
OPENING = frozenset({"member_joined", "member_left", "member_fenced", "rebalance_started",
                     "generation_bumped", "epoch_bumped", "partitions_revoked",
                     "partitions_assigned", "group_converted"})


@dataclass(frozen=True, slots=True)
class MemberChange:
    """A member that joined, left or was fenced during a rebalance."""

    member: str
    kind: str  # "joined", "left" or "fenced"
    ts: int
    client_id: str | None = None
    instance_id: str | None = None
    reason: str | None = None  # why it left or was fenced ("session timeout", ...)


@dataclass(frozen=True, slots=True)
class Movement:
    """One member's net partition change over a rebalance."""

    member: str
    gained: tuple[str, ...]
    lost: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Rebalance:
    """One rebalance: from the step that opened it to the step the group settled."""

    protocol: str
    from_generation: int  # generation / group epoch before it
    generation: int  # generation / group epoch it reached
    started_ms: int
    stable_ms: int | None  # None: still in progress at the end of the stream
    state: str | None  # the state it settled in (Stable, Empty, Dead), or the current one
    joined: tuple[MemberChange, ...]
    departed: tuple[MemberChange, ...]  # left or fenced
    moved: tuple[Movement, ...]
    revoked: int  # partitions given up on the way (eager: everything)
    cause: str
    # Per member, ms from the start to its last event in this rebalance: the members with
    # the largest values are the ones the group waited for.
    member_ms: Mapping[str, int] = field(default_factory=dict)

    @property
    def duration_ms(self) -> int | None:
        return None if self.stable_ms is None else self.stable_ms - self.started_ms

    @property
    def in_progress(self) -> bool:
        return self.stable_ms is None


@dataclass(frozen=True, slots=True)
class Ownership:
    """A member held exactly `partitions` from `from_ms` to `to_ms` (None: still holds)."""

    member: str
    partitions: tuple[str, ...]
    from_ms: int
    to_ms: int | None


@dataclass(frozen=True, slots=True)
class Timeline:
    group: str
    protocol: str | None  # of the last event (a group converted changes it)
    state: str | None  # the last state seen
    generation: int | None
    first_ms: int | None
    last_ms: int | None
    events: int
    rebalances: tuple[Rebalance, ...]
    ownership: tuple[Ownership, ...]
    members: Mapping[str, str | None]  # member id -> client id, every member ever seen


def _names(details: Mapping[str, Any]) -> list[str]:
    items = details.get("partitions")
    if items is None:
        items = details.get("tasks")
    if not isinstance(items, list):
        return []
    return [p if isinstance(p, str) else "-".join(map(str, p)) if isinstance(p, list)
            else str(p) for p in items]


def sort_partitions(names: Iterable[str]) -> tuple[str, ...]:
    """Partition names in (topic, number) order ("t-2" before "t-10")."""
    def key(name: str) -> tuple[str, int, str]:
        topic, _, index = name.rpartition("-")
        return (topic, int(index), "") if index.isdigit() else (name, -1, name)
    return tuple(sorted(set(names), key=key))


def _steps(events: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    out: list[list[Mapping[str, Any]]] = []
    for e in events:
        if out and out[-1][0].get("ts") == e.get("ts"):
            out[-1].append(e)
        else:
            out.append([e])
    return out


def _cause(joined: Sequence[MemberChange], departed: Sequence[MemberChange],
           kinds: set[str], converted: str | None) -> str:
    parts = []
    if converted:
        parts.append(converted)
    if joined:
        parts.append(f"{len(joined)} joined" if len(joined) > 1
                     else f"{_label(joined[0])} joined")
    for kind in ("left", "fenced"):
        gone = [d for d in departed if d.kind == kind]
        if not gone:
            continue
        reasons = sorted({d.reason for d in gone if d.reason})
        who = f"{len(gone)} {kind}" if len(gone) > 1 else f"{_label(gone[0])} {kind}"
        parts.append(who + (f" ({', '.join(reasons)})" if kind == "fenced" and reasons else ""))
    if "group_deleted" in kinds:
        parts.append("group deleted")
    if not parts:
        parts.append("a member rejoined or its subscription or metadata changed"
                     if kinds & {"rebalance_started", "generation_bumped", "epoch_bumped"}
                     else "assignment reconciled")
    return "; ".join(parts)


def _label(change: MemberChange) -> str:
    return change.client_id or change.member


class _Open:
    """What is known of the rebalance being built."""

    def __init__(self, protocol: str, generation: int, ts: int,
                 held: Mapping[str, frozenset[str]]) -> None:
        self.protocol = protocol
        self.from_generation = generation
        self.generation = generation
        self.started = ts
        self.held_before = dict(held)
        self.joined: list[MemberChange] = []
        self.departed: list[MemberChange] = []
        self.revoked = 0
        self.kinds: set[str] = set()
        self.converted: str | None = None
        self.member_ms: dict[str, int] = {}

    def close(self, held: Mapping[str, frozenset[str]], stable_ms: int | None,
              state: str | None) -> Rebalance:
        moved = []
        for member in sorted(set(self.held_before) | set(held)):
            before = self.held_before.get(member, frozenset())
            after = held.get(member, frozenset())
            if before != after:
                moved.append(Movement(member, sort_partitions(after - before),
                                      sort_partitions(before - after)))
        return Rebalance(
            protocol=self.protocol, from_generation=self.from_generation,
            generation=self.generation, started_ms=self.started, stable_ms=stable_ms,
            state=state, joined=tuple(self.joined), departed=tuple(self.departed),
            moved=tuple(moved), revoked=self.revoked,
            cause=_cause(self.joined, self.departed, self.kinds, self.converted),
            member_ms=dict(self.member_ms))


def build_timeline(group: str, events: Iterable[Mapping[str, Any]]) -> Timeline:
    """The timeline of `group` from its events in stream order (events of other groups are
    ignored; an event that is not a dict with a type and a ts is skipped)."""
    mine = [e for e in events if isinstance(e, Mapping) and e.get("group") == group
            and isinstance(e.get("type"), str) and isinstance(e.get("ts"), int)]
    held: dict[str, frozenset[str]] = {}
    since: dict[str, int] = {}
    intervals: list[Ownership] = []
    rebalances: list[Rebalance] = []
    members: dict[str, str | None] = {}
    state: str | None = None
    protocol: str | None = None
    generation: int | None = None
    current: _Open | None = None

    for step in _steps(mine):
        ts = int(step[0]["ts"])
        before = dict(held)
        kinds = {str(e["type"]) for e in step}
        step_state = state
        for e in step:
            if e.get("protocol"):
                protocol = str(e["protocol"])
            if isinstance(e.get("generation"), int):
                generation = int(e["generation"])
            if e["type"] == "state_changed":
                step_state = str((e.get("details") or {}).get("state"))
        opens = bool(kinds & OPENING) or (step_state is not None
                                          and step_state not in SETTLED_STATES)
        if current is None and opens:
            first = step[0]
            bump = next((e for e in step if e["type"] in ("generation_bumped", "epoch_bumped")),
                        None)
            start_gen = first.get("generation") if isinstance(first.get("generation"),
                                                              int) else 0
            if bump is not None and isinstance((bump.get("details") or {}).get("previous"),
                                               int):
                start_gen = bump["details"]["previous"]
            current = _Open(protocol or "?", int(start_gen), ts, before)
        for e in step:
            kind, member = str(e["type"]), e.get("member")
            details = e.get("details") or {}
            if not isinstance(details, Mapping):
                details = {}
            if kind == "member_joined" and member is not None:
                members[member] = details.get("client_id")
                change = MemberChange(member, "joined", ts, details.get("client_id"),
                                      details.get("instance_id"))
                if current is not None:
                    current.joined.append(change)
            elif kind in ("member_left", "member_fenced") and member is not None:
                members.setdefault(member, details.get("client_id"))
                held.pop(member, None)
                if current is not None:
                    current.departed.append(MemberChange(
                        member, "left" if kind == "member_left" else "fenced", ts,
                        details.get("client_id"), details.get("instance_id"),
                        details.get("reason")))
            elif kind == "partitions_revoked" and member is not None:
                gone = frozenset(_names(details))
                if current is not None:
                    current.revoked += len(gone)
                if member in held:
                    left_over = held[member] - gone
                    if left_over:
                        held[member] = left_over
                    else:
                        del held[member]
            elif kind == "partitions_assigned" and member is not None:
                members.setdefault(member, None)
                held[member] = held.get(member, frozenset()) | frozenset(_names(details))
            elif kind == "group_deleted":
                held.clear()
            elif kind == "group_converted" and current is not None:
                current.converted = (f"converted from {details.get('from')} to "
                                     f"{details.get('to')}")
            if current is not None:
                current.kinds.add(kind)
                if isinstance(e.get("generation"), int):
                    current.generation = int(e["generation"])
                if current.protocol == "?" and protocol:
                    current.protocol = protocol
                if member is not None:
                    current.member_ms[member] = ts - current.started
        state = step_state
        # Ownership intervals: close what changed, open what is new.
        for member in set(before) | set(held):
            old, new = before.get(member), held.get(member)
            if old == new:
                continue
            if old:
                intervals.append(Ownership(member, sort_partitions(old), since.pop(member), ts))
            if new:
                since[member] = ts
        if current is not None and (state in SETTLED_STATES or state is None):
            rebalances.append(current.close(held, ts, state))
            current = None

    if current is not None:
        rebalances.append(current.close(held, None, state))
    for member, partitions in held.items():
        intervals.append(Ownership(member, sort_partitions(partitions), since[member], None))
    intervals.sort(key=lambda o: (o.from_ms, o.member))
    return Timeline(
        group=group, protocol=protocol, state=state, generation=generation,
        first_ms=int(mine[0]["ts"]) if mine else None,
        last_ms=int(mine[-1]["ts"]) if mine else None, events=len(mine),
        rebalances=tuple(rebalances), ownership=tuple(intervals), members=members)


def partition_owners(timeline: Timeline) -> dict[str, list[Ownership]]:
    """Per partition, the intervals in which some member held it (for a picture drawn by
    partition rather than by member), each as an Ownership of that one partition."""
    out: dict[str, list[Ownership]] = {}
    for o in timeline.ownership:
        for p in o.partitions:
            out.setdefault(p, []).append(Ownership(o.member, (p,), o.from_ms, o.to_ms))
    return {p: sorted(v, key=lambda o: o.from_ms)
            for p, v in sorted(out.items(), key=lambda kv: sort_partitions([kv[0]]))}


def timeline_json(timeline: Timeline) -> dict[str, Any]:
    """The timeline as plain JSON values (what `coterie groups timeline --output json`
    prints and the console's pages read)."""
    def change(c: MemberChange) -> dict[str, Any]:
        return {"member": c.member, "kind": c.kind, "ts": c.ts, "client_id": c.client_id,
                "instance_id": c.instance_id, "reason": c.reason}

    return {
        "group": timeline.group, "protocol": timeline.protocol, "state": timeline.state,
        "generation": timeline.generation, "first_ms": timeline.first_ms,
        "last_ms": timeline.last_ms, "events": timeline.events,
        "rebalances": [{
            "protocol": r.protocol, "from_generation": r.from_generation,
            "generation": r.generation, "started_ms": r.started_ms,
            "stable_ms": r.stable_ms, "duration_ms": r.duration_ms, "state": r.state,
            "in_progress": r.in_progress, "cause": r.cause,
            "joined": [change(c) for c in r.joined],
            "departed": [change(c) for c in r.departed],
            "moved": [{"member": m.member, "gained": list(m.gained), "lost": list(m.lost)}
                      for m in r.moved],
            "revoked": r.revoked, "member_ms": dict(r.member_ms),
        } for r in timeline.rebalances],
        "ownership": [{"member": o.member, "partitions": list(o.partitions),
                       "from_ms": o.from_ms, "to_ms": o.to_ms} for o in timeline.ownership],
        "members": dict(timeline.members),
    }
