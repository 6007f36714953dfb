"""Driver-side planning: which partitions a query reads and from which offset to which.

Everything here runs on the driver (the batch planner, the streaming runner), before any
task starts, which is where a bad option or an unknown topic must fail: `topic_partitions`
turns an unknown topic into a CoterieOptionError naming `subscribe` or `assign`, and
`resolve` turns "earliest" / "latest" / per-partition JSON into numbers, checking specific
offsets against what the log still holds.

Data loss (a requested offset below the log start, i.e. deleted by retention, or beyond the
end): with failOnDataLoss=true a DataLossError that says which partition and which offsets;
with false a warning and the nearest offset that exists.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from coterie.spark.brokers import EARLIEST_TS, LATEST_TS, Brokers, UnknownTopicError
from coterie.spark.options import EARLIEST, LATEST, CoterieOptionError, ReadOptions

log = logging.getLogger("coterie.spark")

TP = tuple[str, int]


class DataLossError(RuntimeError):
    """Offsets the query must read are gone (or never existed) and failOnDataLoss is true."""


def data_loss(opts: ReadOptions, message: str) -> None:
    """Fail (failOnDataLoss=true) or warn that the query skips ahead."""
    if opts.fail_on_data_loss:
        raise DataLossError(f"{message}. Some data may have been lost (deleted by retention "
                            "or never written); set failOnDataLoss=false to skip ahead with a "
                            "warning instead")
    log.warning("%s; failOnDataLoss=false: skipping ahead", message)


def topic_partitions(brokers: Brokers, opts: ReadOptions) -> list[TP]:
    """The partitions the query reads now (sorted)."""
    if opts.pattern is not None:
        found = brokers.partitions(None)
        return sorted((t, p) for t, ps in found.items() if opts.matches(t) for p in ps)
    option = "subscribe" if opts.subscribe is not None else "assign"
    try:
        found = brokers.partitions(opts.named_topics())
    except UnknownTopicError as e:
        raise CoterieOptionError(option, f"names a topic that does not exist ({e})") from None
    if opts.assign is not None:
        missing = [f"{t}-{p}" for t, p in opts.assign if p not in found.get(t, ())]
        if missing:
            raise CoterieOptionError("assign", "names partitions that do not exist: "
                                     + ", ".join(missing))
        return sorted(opts.assign)
    return sorted((t, p) for t, ps in found.items() for p in ps)


def resolve(brokers: Brokers, opts: ReadOptions, tps: list[TP], spec: str | dict,
            option: str, default: int) -> dict[TP, int]:
    """Offsets for `tps` from `spec` ("earliest", "latest" or per-partition JSON; partitions
    the JSON leaves out get `default`), checked against each partition's log."""
    if not tps:
        return {}
    earliest = brokers.list_offsets(tps, EARLIEST_TS)
    latest = brokers.list_offsets(tps, LATEST_TS)
    if spec == "earliest":
        return earliest
    if spec == "latest":
        return latest
    assert isinstance(spec, dict)
    known = set(tps)
    unknown = [f"{t}-{p}" for t, parts in spec.items() for p in parts if (t, p) not in known]
    if unknown:
        raise CoterieOptionError(option, "names partitions the query does not read: "
                                 + ", ".join(sorted(unknown)))
    out: dict[TP, int] = {}
    for tp in tps:
        wanted = spec.get(tp[0], {}).get(tp[1], default)
        if wanted == EARLIEST:
            out[tp] = earliest[tp]
        elif wanted == LATEST:
            out[tp] = latest[tp]
        elif wanted < earliest[tp]:
            data_loss(opts, f"{option}: {tp[0]}-{tp[1]} offset {wanted} is below the log "
                            f"start {earliest[tp]}")
            out[tp] = earliest[tp]
        elif wanted > latest[tp]:
            data_loss(opts, f"{option}: {tp[0]}-{tp[1]} offset {wanted} is beyond the end "
                            f"of the log {latest[tp]}")
            out[tp] = latest[tp]
        else:
            out[tp] = wanted
    return out


def check_order(opts: ReadOptions, starts: Mapping[TP, int],
                ends: Mapping[TP, int]) -> dict[TP, int]:
    """Batch: endingOffsets must not come before startingOffsets."""
    out = dict(ends)
    for tp, start in starts.items():
        if ends.get(tp, start) < start:
            raise CoterieOptionError("endingOffsets", f"{tp[0]}-{tp[1]} ends at {ends[tp]}, "
                                     f"before its starting offset {start}")
    return out
