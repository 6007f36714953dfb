"""Properties of a share partition under random interleavings of acquisitions,
acknowledgements, lock expiries, members leaving, the log start moving and restarts from the
written records, checked against an independent model of who holds what:

- a record is never held by two members at once;
- an ACCEPTED record is never delivered again, restarts included;
- no record is lost: an offset leaves the window (below the start offset) only when it was
  acknowledged for good, archived after its deliveries ran out, or left the log;
- a record archived without a REJECT or GAP was delivered at least the limit's times, and the
  delivery count a member is told is never above the limit nor the true count (equal to it
  until a restart);
- replaying the written records gives the live partition's durable state at every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from coterie.share import AckType, AcquireMode, RecordState, ShareConfig, replay
from tests.unit.share.harness import Harness

LOG_END = 60
LOCK = 1000
BATCH = 4  # the longest log batch a fetch returns
MEMBERS = ("a", "b", "c")

acquire = st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 12),
                    st.integers(1, 15), st.booleans(), st.sampled_from(list(AcquireMode)),
                    st.integers(1, BATCH))
ack = st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 40),
                st.integers(1, 6), st.lists(st.sampled_from(list(AckType)), min_size=1,
                                            max_size=6), st.sampled_from([True, True, False]))
release = st.tuples(st.just("release"), st.sampled_from(MEMBERS))
expire = st.tuples(st.just("expire"))
restart = st.tuples(st.just("restart"))
log_start = st.tuples(st.just("log_start"), st.integers(1, 8))
delays = st.sampled_from([0, 0, 10, 100, 300, 1200])
ops = st.lists(st.tuples(st.one_of(acquire, acquire, ack, ack, ack, release, expire, restart,
                                   log_start), delays), min_size=5, max_size=80)
configs = st.builds(ShareConfig, max_record_locks=st.integers(3, 20),
                    delivery_count_limit=st.integers(1, 5), record_lock_duration_ms=st.just(LOCK),
                    snapshot_update_records_per_snapshot=st.integers(0, 4))


@dataclass
class Model:
    """Who holds what, as the operations' answers say, kept apart from the partition."""

    limit: int
    # offset -> (member, lock deadline)
    holders: dict[int, tuple[str, int]] = field(default_factory=dict)
    deliveries: dict[int, int] = field(default_factory=dict)
    accepted: set[int] = field(default_factory=set)
    acked_final: set[int] = field(default_factory=set)  # ACCEPT, REJECT or GAP succeeded
    log_start: int = 0
    restarted: bool = False

    def expire(self, now: int) -> None:
        self.holders = {o: h for o, h in self.holders.items() if h[1] > now}

    def done(self, offset: int) -> bool:
        """The offset may leave the window: delivered for good or gone from the log."""
        return (offset in self.acked_final or offset < self.log_start
                or self.deliveries.get(offset, 0) >= self.limit)


def run(config: ShareConfig, steps) -> None:
    h = Harness(config)
    model = Model(config.delivery_count_limit)
    now = 0
    for op, dt in steps:
        now += dt
        model.expire(now)  # every operation ends the locks past their deadline first
        sp = h.sp
        kind = op[0]
        if kind == "acquire":
            _, member, length, max_records, from_window, mode, size = op
            first = sp.next_fetch_offset() if not from_window else sp.start_offset
            if first >= LOG_END:
                continue
            last = min(first + length - 1, LOG_END - 1)
            fetched = [(f, min(f + size - 1, last)) for f in range(first, last + 1, size)]
            h.expire(now)  # so that the window's size before acquiring is the one it sees
            full, next_before = sp.in_flight_count >= config.max_record_locks, sp.next_offset
            outcome = h.keep(sp.acquire(member, fetched, max_records, now, mode=mode))
            assert outcome.error == ErrorCode.none
            slack = size - 1 if mode is AcquireMode.BATCH_OPTIMIZED else 0
            assert outcome.acquired_count <= max_records + slack
            assert not full or sp.next_offset == next_before  # no new record past the bound
            event(f"acquired {'some' if outcome.acquired else 'none'}")
            for r in outcome.acquired:
                for offset in range(r.first_offset, r.last_offset + 1):
                    assert offset not in model.holders, (offset, model.holders[offset], member)
                    assert offset not in model.accepted, offset
                    assert model.log_start <= offset < LOG_END
                    model.deliveries[offset] = model.deliveries.get(offset, 0) + 1
                    # The count a member is told: exact until a restart forgets the
                    # deliveries cut short by it (Kafka 4.2 writes no acquisition), never more.
                    limit = config.delivery_count_limit
                    assert r.delivery_count <= min(model.deliveries[offset], limit)
                    if not model.restarted:
                        assert r.delivery_count == model.deliveries[offset]
                    model.holders[offset] = (member, now + LOCK)
        elif kind == "ack":
            _, member, pick, length, types, own = op
            if own:  # a member that holds records, if any does
                holding = [m for m in MEMBERS if sp.acquired_by(m)]
                member = holding[pick % len(holding)] if holding else member
            held = sp.acquired_by(member)
            if own and held:
                first = held[pick % len(held)]
                run_end = first
                while run_end + 1 in held and run_end + 1 < first + length:
                    run_end += 1
                length = run_end - first + 1
            else:
                first = max(0, sp.start_offset - 2 + pick % (sp.in_flight_count + 4))
            last = first + length - 1
            if len(types) > 1:
                types = (types * length)[:length]
            outcome = h.ack(member, (first, last, [int(t) for t in types]), now=now)
            event(f"acknowledgement: {outcome.error.name}")
            if outcome.error == ErrorCode.none:
                for offset in range(first, last + 1):
                    t = types[0] if len(types) == 1 else types[offset - first]
                    if offset not in model.holders:  # skipped: below the start offset
                        assert offset < h.sp.start_offset, offset
                        continue
                    assert model.holders.pop(offset)[0] == member
                    if t is AckType.RENEW:
                        model.holders[offset] = (member, now + LOCK)
                    elif t is AckType.ACCEPT:
                        model.accepted.add(offset)
                        model.acked_final.add(offset)
                    elif t in (AckType.REJECT, AckType.GAP):
                        model.acked_final.add(offset)
            else:
                assert outcome.error in (ErrorCode.invalid_record_state,
                                         ErrorCode.invalid_request)
        elif kind == "release":
            h.release(op[1], now)
            model.holders = {o: m for o, m in model.holders.items() if m[0] != op[1]}
        elif kind == "expire":
            h.expire(now)
        elif kind == "restart":
            h.restart()
            model.holders = {}
            model.restarted = True
        elif kind == "log_start":
            target = min(h.sp.start_offset + op[1], LOG_END)
            h.log_start(target, now)
            model.log_start = max(model.log_start, target)
            model.holders = {o: m for o, m in model.holders.items() if o >= target}
        check(h, model)


def check(h: Harness, model: Model) -> None:
    sp = h.sp
    window = {v.offset: v for v in sp.in_flight()}
    # The partition's holders are the model's: one member per record, locks as answered.
    assert {o: (v.member_id, v.deadline) for o, v in window.items()
            if v.state is RecordState.ACQUIRED} == model.holders
    assert sp.next_deadline() == min((d for _, d in model.holders.values()), default=None)
    assert list(window) == list(range(sp.start_offset, sp.next_offset))
    assert sp.in_flight_count <= h.config.max_record_locks + BATCH - 1
    # Nothing lost: whatever left the window was delivered for good or left the log.
    for offset in range(sp.start_offset):
        assert model.done(offset), (offset, sp.start_offset)
    for offset, v in window.items():
        if v.state.terminal:
            assert model.done(offset), (offset, v)
        if offset in model.accepted:
            assert v.state is RecordState.ACKNOWLEDGED
    # The written records rebuild the live partition's durable state.
    rebuilt = replay(h.records(), config=h.config)
    assert rebuilt is not None
    assert rebuilt.durable_view() == sp.durable_view()
    assert not any(v.state is RecordState.ACQUIRED for v in rebuilt.in_flight())


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs, ops)
def test_random_interleavings_keep_the_guarantees(config, steps):
    run(config, steps)
