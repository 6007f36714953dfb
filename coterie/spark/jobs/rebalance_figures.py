"""Rebalance figures from group events: plain Python over event dicts, no Spark.

The rebalance-analytics job (`rebalance_analytics.py`) hands each (group, protocol)'s events,
in log order, to `rebalances`, and aggregates its rows with `summarize`; tests feed both a
hand-built scenario. The events are those of `coterie.group.events` (docs/spark-pipelines.md
has the schema).

Definitions, per group and protocol:

- a **rebalance** is one `rebalance_started` event (classic: the group entered
  PreparingRebalance, or bumped its generation without passing through it; consumer: the
  group epoch was bumped). Events before the first one are not attributed to any rebalance.
- **time to Stable** of a rebalance: from its `rebalance_started` to the first later
  `state_changed` to Stable. A rebalance that starts while another is still running ends at
  the same Stable. If the group becomes Empty or Dead first, the rebalance ends there with
  that outcome and no time to Stable; if the data ends first, the outcome is "open".
- **partitions moved**: `partitions_assigned` entries whose partition was last owned by a
  different member (a partition's first owner is not a move; an eager revoke-and-reassign to
  the same member is not a move). Attributed to the latest rebalance started before.
- **partition-seconds without an owner**: for every partition, the time from a
  `partitions_revoked` (naming it, by its owner) to the next `partitions_assigned` naming it,
  summed, in seconds. Attributed to the rebalance of the closing assignment. An interval no
  assignment closes (the group emptied, or the data ends) is not counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

REBALANCE_COLUMNS = ("group", "protocol", "rebalance", "generation", "start_ts", "end_ts",
                     "outcome", "time_to_stable_ms", "partitions_moved",
                     "unowned_partition_seconds")
SUMMARY_COLUMNS = ("group", "protocol", "rebalances", "stable_rebalances",
                   "time_to_stable_avg_ms", "time_to_stable_max_ms", "partitions_moved",
                   "unowned_partition_seconds")


def rebalances(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per rebalance of one group and protocol (events in log order)."""
    rows: list[dict[str, Any]] = []
    running: list[dict[str, Any]] = []  # rebalances not ended yet
    owner: dict[str, str | None] = {}
    last_owner: dict[str, str] = {}
    unowned_since: dict[str, int] = {}
    for e in events:
        kind, ts, details = e["type"], int(e["ts"]), e.get("details") or {}
        if kind == "rebalance_started":
            row = {"group": e["group"], "protocol": e["protocol"], "rebalance": len(rows) + 1,
                   "generation": int(e["generation"]), "start_ts": ts, "end_ts": None,
                   "outcome": "open", "time_to_stable_ms": None, "partitions_moved": 0,
                   "unowned_partition_seconds": 0.0}
            rows.append(row)
            running.append(row)
        elif kind == "state_changed" and details.get("state") in ("Stable", "Empty", "Dead"):
            state = details["state"]
            for row in running:
                row["end_ts"], row["outcome"] = ts, state
                if state == "Stable":
                    row["time_to_stable_ms"] = ts - row["start_ts"]
            running.clear()
            if state != "Stable":
                unowned_since.clear()  # nobody is left to own them: not counted
        elif kind == "partitions_revoked":
            for p in details.get("partitions", ()):
                if owner.get(p) == e["member"]:
                    owner[p] = None
                    unowned_since[p] = ts
        elif kind == "partitions_assigned":
            current = rows[-1] if rows else None
            for p in details.get("partitions", ()):
                since = unowned_since.pop(p, None)
                previous = last_owner.get(p)
                if current is not None:
                    if since is not None:
                        current["unowned_partition_seconds"] += (ts - since) / 1000
                    if previous is not None and previous != e["member"]:
                        current["partitions_moved"] += 1
                owner[p] = last_owner[p] = e["member"]
    return rows


def summarize(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (group, protocol) from `rebalances` rows."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        by_key.setdefault((row["group"], row["protocol"]), []).append(row)
    out = []
    for (group, protocol), rs in sorted(by_key.items()):
        times = [r["time_to_stable_ms"] for r in rs if r["time_to_stable_ms"] is not None]
        out.append({
            "group": group, "protocol": protocol, "rebalances": len(rs),
            "stable_rebalances": len(times),
            "time_to_stable_avg_ms": sum(times) / len(times) if times else None,
            "time_to_stable_max_ms": max(times) if times else None,
            "partitions_moved": sum(r["partitions_moved"] for r in rs),
            "unowned_partition_seconds": sum(r["unowned_partition_seconds"] for r in rs),
        })
    return out
