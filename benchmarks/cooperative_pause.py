"""Rebalance pause under eager and cooperative (KIP-429) rebalancing, side by side.

The scenario is the one of tests/integration/test_consumer_rebalance.py (the code lives in
tests/integration/rebalance_timeline.py): on a 6-partition topic that a producer writes to
every 20 ms, three consumers - coterie.client's Consumer, confluent-kafka (librdkafka) and
kafka-python - settle in one group, then a fourth (coterie.client) joins. All consumers are
threads of this process and stamp their rebalance callbacks and deliveries with one
monotonic clock. Per run it reports, between the join and the last callback of the
rebalance:

- rebalance: how long that took (one round for eager, two for cooperative);
- unmoved partitions (same owner before and after): the longest time one had no owner,
  and the longest stretch without a delivered record, by the kind of client that owns it;
- moved partitions: the longest time one had no owner.

Strategies: `range` (eager: every member revokes everything before rejoining) and
`cooperative-sticky` (only moving partitions are revoked, then a follow-up rebalance).
Variants: "idle" members, and one "busy" kafka-python member that spends 1 s processing
each polled batch (librdkafka and kafka-python only take part in a rebalance from inside
poll(), so the group waits for it; coterie's member rejoins from its own task).

Both brokers run with group.initial.rebalance.delay.ms=0 (benchmarks/_brokers.py).

    .venv/bin/python benchmarks/cooperative_pause.py                   # both brokers, 3 reps
    .venv/bin/python benchmarks/cooperative_pause.py --only coterie --reps 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _brokers import prepare_reference, run_broker

from tests.integration.member_helpers import Target
from tests.integration.rebalance_timeline import KINDS, join_scenario

STRATEGIES = ("range", "cooperative-sticky")
VARIANTS = {"idle": None, "busy kafka-python": "kafka_python"}
LABELS = {"coterie": "coterie", "confluent": "librdkafka", "kafka_python": "kafka-python"}


def median(values: list[Any]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def bench(kind: str, bootstrap: str, reps: int) -> list[dict[str, Any]]:
    host, port = bootstrap.rsplit(":", 1)
    target = Target(kind, host, int(port), None)
    rows = []
    for variant, busy in VARIANTS.items():
        for strategy in STRATEGIES:
            for rep in range(reps):
                outcome = join_scenario(target, strategy, busy=busy)
                row = {"broker": kind, "variant": variant, "rep": rep, **outcome.row(),
                       "overlaps": len(outcome.overlaps)}
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    silence = " / ".join(LABELS[k] for k in KINDS)
    lines = [
        f"| broker | members | strategy | rebalance ms | unmoved: max ms without owner | "
        f"unmoved: max ms without a record ({silence}) | moved: max ms without owner | "
        f"double owners |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    keys = sorted({(r["broker"], r["variant"], r["strategy"]) for r in rows},
                  key=lambda k: (k[0], list(VARIANTS).index(k[1]), STRATEGIES.index(k[2])))
    for broker, variant, strategy in keys:
        group = [r for r in rows if (r["broker"], r["variant"], r["strategy"]) == (
            broker, variant, strategy)]

        def m(key: str, group: list[dict[str, Any]] = group) -> str:
            return fmt(median([r[key] for r in group]))

        by_kind = " / ".join(m(f"unmoved_silence_{k}_ms") for k in KINDS)
        lines.append(f"| {broker} | {variant} | {strategy} | {m('rebalance_ms')} | "
                     f"{m('unmoved_unowned_ms')} | {by_kind} | {m('moved_unowned_ms')} | "
                     f"{sum(r['overlaps'] for r in group)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="runs per configuration")
    parser.add_argument("--only", choices=["coterie", "kafka"], default=None,
                        help="measure one broker only")
    parser.add_argument("--json", type=Path, default=None, help="also write the runs as JSON")
    args = parser.parse_args(argv)
    kinds = [args.only] if args.only else ["coterie", "kafka"]
    if "kafka" in kinds:
        reason = prepare_reference(lambda msg: print(msg, file=sys.stderr))
        if reason is not None:
            print(f"skipping the reference broker: {reason}", file=sys.stderr)
            kinds.remove("kafka")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="coterie-coop-") as tmp:
        for kind in kinds:
            with run_broker(kind, Path(tmp) / kind,
                            {"group.initial.rebalance.delay.ms": "0"}) as bootstrap:
                rows += bench(kind, bootstrap, args.reps)
    print()
    print(table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
