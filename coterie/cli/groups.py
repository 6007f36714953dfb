"""`coterie groups ...`: list, describe, reset and delete groups of every type.

The tables have the columns of Kafka's `kafka-consumer-groups` (describe, `--state`,
`--members [--verbose]`) so that an operator reads them as before; `--output json` gives
scripts the same facts as one document (docs/operations.md). `reset-offsets` follows the
Kafka tool's rules: a dry run unless `--execute`, and only for an inactive group.
"""

from __future__ import annotations

import datetime
import re
import time
from typing import Any

import click

from coterie.admin.client import AdminClient
from coterie.admin.groups import GroupDescription, describe_group, list_groups
from coterie.admin.offsets import (
    GroupOffsets,
    OffsetChange,
    ResetSpec,
    apply_reset,
    delete_groups,
    delete_offsets,
    group_offsets,
    plan_reset,
)
from coterie.cli.connect import EXIT_ERROR, Connection, cluster_options, fail, output_option
from coterie.cli.render import emit_json, note, table

DESCRIBE_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                    "CONSUMER-ID", "HOST", "CLIENT-ID")
STATE_COLUMNS = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
MEMBERS_COLUMNS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
MEMBERS_VERBOSE_COLUMNS = ("GROUP-INSTANCE-ID", "EPOCH", "ASSIGNMENT")
RESET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")


@click.group(short_help="List, describe, reset and delete groups of every type.")
def groups() -> None:
    """Groups of every type (classic, consumer, share, streams): list, describe, reset, delete.

    Exit codes: 0 done; 1 the cluster said no or could not be reached (message on stderr);
    2 a usage error."""


# -- JSON documents --------------------------------------------------------------------------
def _assignment(partitions: Any) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]


def group_document(group: GroupDescription, offsets: GroupOffsets | None = None
                   ) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "group": group.group_id, "type": group.type, "state": group.state,
        "protocol_type": group.protocol_type, "assignor": group.assignor or None,
        "epoch": group.epoch, "assignment_epoch": group.assignment_epoch,
        "coordinator": {"id": group.coordinator.node_id, "host": group.coordinator.host,
                        "port": group.coordinator.port},
        "members": [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                     "instance_id": m.instance_id, "epoch": m.epoch,
                     "assignment": _assignment(m.assignment)} for m in group.members],
    }
    if offsets is not None:
        doc["partitions"] = [
            {"topic": p.topic, "partition": p.partition, "committed_offset": p.committed,
             "log_end_offset": p.log_end, "lag": p.lag, "member_id": p.member_id,
             "client_id": p.client_id, "host": p.host} for p in offsets.partitions]
        doc["total_lag"] = offsets.total_lag
    return doc


# -- tables ----------------------------------------------------------------------------------
def _offsets_table(go: GroupOffsets) -> None:
    group = go.group
    if not group.members:
        note(f"Consumer group '{group.group_id}' has no active members.")
    rows = [(group.group_id, p.topic, p.partition, p.committed, p.log_end, p.lag,
             p.member_id, p.host, p.client_id) for p in go.partitions]
    # A member without partitions gets a row of its own, as in Kafka's tool.
    rows += [(group.group_id, None, None, None, None, None, m.member_id, m.host, m.client_id)
             for m in group.members if not m.assignment]
    table(DESCRIBE_COLUMNS, rows)


def _state_table(group: GroupDescription) -> None:
    c = group.coordinator
    table(STATE_COLUMNS, [(group.group_id, f"{c.host}:{c.port} ({c.node_id})",
                           group.assignor, group.state, len(group.members))])


def _assignment_text(partitions: Any) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items()))


def _members_table(group: GroupDescription, verbose: bool) -> None:
    if not group.members:
        note(f"Consumer group '{group.group_id}' has no active members.")
    columns = MEMBERS_COLUMNS + (MEMBERS_VERBOSE_COLUMNS if verbose else ())
    rows = []
    for m in group.members:
        row: tuple[Any, ...] = (group.group_id, m.member_id, m.host, m.client_id,
                                len(m.assignment))
        if verbose:
            row += (m.instance_id, m.epoch, _assignment_text(m.assignment))
        rows.append(row)
    table(columns, rows)


def _show(connection: Connection, group_id: str, output: str, view: str,
          verbose: bool = False) -> None:
    async def work(admin: AdminClient) -> tuple[GroupDescription, GroupOffsets | None]:
        if output == "table" and view in ("state", "members"):
            return await describe_group(admin, group_id), None
        go = await group_offsets(admin, group_id)
        return go.group, go

    group, go = connection.run(work)
    if output == "json":
        emit_json(group_document(group, go))
    elif view == "state":
        _state_table(group)
    elif view == "members":
        _members_table(group, verbose)
    elif view == "lag":
        assert go is not None
        _offsets_table(go)
        note(f"total lag: {go.total_lag}")
    else:
        assert go is not None
        _offsets_table(go)


# -- commands --------------------------------------------------------------------------------
@groups.command("list")
@cluster_options
@output_option
@click.option("--type", "types", multiple=True,
              type=click.Choice(["classic", "consumer", "share", "streams"],
                                case_sensitive=False),
              help="Only groups of this type (repeatable).")
@click.option("--state", "states", multiple=True, metavar="STATE",
              help="Only groups in this state, e.g. Stable, Empty (repeatable).")
def list_command(connection: Connection, output: str, types: tuple[str, ...],
                 states: tuple[str, ...]) -> None:
    """Every group of the cluster, with its type and state."""
    found = connection.run(lambda admin: list_groups(admin, types=types, states=states))
    if output == "json":
        emit_json([{"group": g.group_id, "type": g.type, "protocol_type": g.protocol_type,
                    "state": g.state} for g in found])
    else:
        table(("GROUP", "TYPE", "STATE"), [(g.group_id, g.type, g.state) for g in found])


@groups.command("describe")
@click.argument("group")
@cluster_options
@output_option
@click.option("--state", "view", flag_value="state",
              help="The group's coordinator, assignor, state and member count.")
@click.option("--members", "view", flag_value="members", help="The group's members.")
@click.option("--offsets", "view", flag_value="offsets", default=True,
              help="Per partition: committed offset, log end offset, lag, owner (default).")
@click.option("--verbose", is_flag=True, help="With --members: instance id, epoch, assignment.")
def describe_command(group: str, connection: Connection, output: str, view: str,
                     verbose: bool) -> None:
    """A group: its partitions and lag (default), --state or --members.

    --output json gives the whole group whichever view is asked."""
    if verbose and view != "members":
        raise click.UsageError("--verbose goes with --members")
    _show(connection, group, output, view, verbose)


@groups.command("members")
@click.argument("group")
@cluster_options
@output_option
@click.option("--verbose", is_flag=True, help="Instance id, epoch and assignment too.")
def members_command(group: str, connection: Connection, output: str, verbose: bool) -> None:
    """A group's members (describe --members)."""
    _show(connection, group, output, "members", verbose)


@groups.command("offsets")
@click.argument("group")
@cluster_options
@output_option
def offsets_command(group: str, connection: Connection, output: str) -> None:
    """A group's committed offsets, log end offsets and lag (describe --offsets)."""
    _show(connection, group, output, "offsets")


@groups.command("lag")
@click.argument("group")
@cluster_options
@output_option
def lag_command(group: str, connection: Connection, output: str) -> None:
    """A group's lag per partition and in total."""
    _show(connection, group, output, "lag")


# -- reset-offsets ---------------------------------------------------------------------------
def parse_topic_partitions(specs: tuple[str, ...]) -> dict[str, tuple[int, ...] | None]:
    """`T` (all partitions) or `T:0,1,2`, as Kafka's --topic takes them."""
    out: dict[str, tuple[int, ...] | None] = {}
    for spec in specs:
        name, sep, parts = spec.partition(":")
        if not name:
            raise click.BadParameter(f"{spec!r} names no topic", param_hint="--topic")
        if not sep:
            out[name] = None
            continue
        try:
            numbers = tuple(sorted({int(p) for p in parts.split(",") if p.strip()}))
        except ValueError:
            raise click.BadParameter(f"{spec!r}: partitions must be numbers, as in T:0,1",
                                     param_hint="--topic") from None
        if not numbers or min(numbers) < 0:
            raise click.BadParameter(f"{spec!r}: partitions must be numbers >= 0, as in T:0,1",
                                     param_hint="--topic")
        previous = out.get(name, ())
        out[name] = None if name in out and previous is None else tuple(
            sorted(set(previous or ()) | set(numbers)))
    return out


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime (YYYY-MM-DDTHH:mm:SS.sss, optionally with a zone: Z, +01:00);
    without a zone it is local time, as in Kafka's tool. Epoch milliseconds."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not YYYY-MM-DDTHH:mm:SS.sss[zone]",
                                 param_hint="--to-datetime") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                       r"(?:([-+]?\d+(?:[.,]\d{1,9})?)S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """Kafka's --by-duration: an ISO 8601 duration PnDTnHnMnS (java.time.Duration's form:
    days, hours, minutes, seconds with a fraction; e.g. PT15M, P1DT2H, PT0.5S), in ms."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or not any(m.group(i) for i in range(2, 6)) or text.strip().upper().endswith("T"):
        raise click.BadParameter(f"{text!r} is not a duration PnDTnHnMnS (e.g. PT15M)",
                                 param_hint="--by-duration")
    days, hours, minutes = (int(m.group(i) or 0) for i in (2, 3, 4))
    seconds = float((m.group(5) or "0").replace(",", "."))
    total = ((days * 24 + hours) * 60 + minutes) * 60_000 + round(seconds * 1000)
    total = -total if m.group(1) == "-" else total
    if total < 0:
        raise click.BadParameter("must not be negative", param_hint="--by-duration")
    return total


def _reset_spec(to_earliest: bool, to_latest: bool, to_datetime: str | None,
                shift_by: int | None, to_offset: int | None,
                by_duration: str | None = None) -> ResetSpec:
    chosen = [name for name, on in (("--to-earliest", to_earliest), ("--to-latest", to_latest),
                                    ("--to-datetime", to_datetime is not None),
                                    ("--by-duration", by_duration is not None),
                                    ("--shift-by", shift_by is not None),
                                    ("--to-offset", to_offset is not None)) if on]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, "
                               "--to-datetime, --by-duration, --shift-by, --to-offset"
                               + (f" (got {', '.join(chosen)})" if chosen else ""))
    if to_earliest:
        return ResetSpec("earliest")
    if to_latest:
        return ResetSpec("latest")
    if to_datetime is not None:
        return ResetSpec("datetime", parse_datetime(to_datetime))
    if by_duration is not None:  # as Kafka's tool: the time that long before now
        return ResetSpec("datetime", int(time.time() * 1000) - parse_duration_ms(by_duration))
    if shift_by is not None:
        return ResetSpec("shift", shift_by)
    assert to_offset is not None
    if to_offset < 0:
        raise click.BadParameter("must be >= 0", param_hint="--to-offset")
    return ResetSpec("offset", to_offset)


@groups.command("reset-offsets")
@click.argument("group")
@cluster_options
@output_option
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,...]",
              help="A topic, or some of its partitions (repeatable).")
@click.option("--all-topics", is_flag=True,
              help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="To the log start offset.")
@click.option("--to-latest", is_flag=True, help="To the log end offset.")
@click.option("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
              help="To the first offset at or after this time (local time unless a zone).")
@click.option("--by-duration", metavar="PnDTnHnMnS",
              help="To the first offset at or after that long before now (e.g. PT15M).")
@click.option("--shift-by", type=int, metavar="N", help="Move the committed offset by N.")
@click.option("--to-offset", type=int, metavar="N", help="To offset N.")
@click.option("--dry-run/--execute", "dry_run", default=True, show_default=True,
              help="Only print the new offsets (default), or commit them.")
def reset_offsets_command(group: str, connection: Connection, output: str,
                          topics: tuple[str, ...], all_topics: bool, to_earliest: bool,
                          to_latest: bool, to_datetime: str | None, by_duration: str | None,
                          shift_by: int | None, to_offset: int | None, dry_run: bool) -> None:
    """Move an inactive group's committed offsets (a dry run unless --execute).

    New offsets are kept within the log (between its start and end offsets)."""
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (one or more) or --all-topics")
    spec = _reset_spec(to_earliest, to_latest, to_datetime, shift_by, to_offset, by_duration)
    scope = None if all_topics else parse_topic_partitions(topics)

    async def work(admin: AdminClient) -> list[OffsetChange]:
        plan = await plan_reset(admin, group, scope, spec)
        if not dry_run:
            await apply_reset(admin, group, plan)
        return plan

    plan = connection.run(work)
    if output == "json":
        emit_json({"group": group, "executed": not dry_run, "offsets": [
            {"topic": c.topic, "partition": c.partition, "current_offset": c.current,
             "new_offset": c.new} for c in plan]})
    else:
        table(RESET_COLUMNS, [(group, c.topic, c.partition, c.new) for c in plan])
    if dry_run:
        note("dry run: nothing was changed; add --execute to commit these offsets")


# -- delete ----------------------------------------------------------------------------------
@groups.command("delete-offsets")
@click.argument("group")
@cluster_options
@click.option("--topic", "topics", multiple=True, required=True, metavar="TOPIC[:P,...]",
              help="A topic, or some of its partitions (repeatable).")
def delete_offsets_command(group: str, connection: Connection,
                           topics: tuple[str, ...]) -> None:
    """Delete a group's committed offsets of some topics (not while a member reads them)."""
    scope = parse_topic_partitions(topics)
    outcome = connection.run(lambda admin: delete_offsets(admin, group, scope))
    rows = [(tp.topic, tp.partition if tp.partition >= 0 else None,
             "Successful" if code == 0 else f"Error: {code.name.upper()}")
            for tp, code in sorted(outcome.items())]
    table(("TOPIC", "PARTITION", "STATUS"), rows)
    if any(code != 0 for code in outcome.values()):
        raise SystemExit(EXIT_ERROR)


@groups.command("delete")
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
@cluster_options
def delete_command(group_ids: tuple[str, ...], connection: Connection) -> None:
    """Delete groups (each must have no members), with their committed offsets."""
    outcome = connection.run(lambda admin: delete_groups(admin, group_ids))
    failed = {g: code for g, code in outcome.items() if code != 0}
    for g in group_ids:
        if g not in failed:
            click.echo(f"Deleted group '{g}'.")
    if failed:
        fail("; ".join(f"group {g!r}: {_delete_error(code)}" for g, code in failed.items()))


def _delete_error(code: Any) -> str:
    names = {69: "does not exist", 68: "is not empty (it has members)"}
    return names.get(int(code), code.name.upper())
