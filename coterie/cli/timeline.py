"""`coterie groups timeline GROUP`: a group's rebalances from `__group_events`.

Reads the group's events (`coterie.admin.group_events`) and shows the timeline
(`coterie.admin.timeline`): one row per rebalance with the generation (classic) or group
epoch (consumer, share, streams) it reached, when it started, how long the group took to be
Stable again, its cause, who joined, who left or was fenced and the partitions it moved per
member. `--output json` prints the whole timeline (rebalances and ownership intervals) as
one JSON object, the shape `coterie.admin.timeline.timeline_json` documents.
"""

from __future__ import annotations

import datetime
import json
import re
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from coterie.admin.group_events import read_timeline
from coterie.admin.timeline import Rebalance, Timeline, timeline_json
from coterie.cli.connect import bootstrap_options, fail, load_command_config, run_client

UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str, now_s: float) -> int:
    """--since: "90s", "30m", "2h", "7d", "500ms" back from `now_s`, or an ISO 8601 time
    (UTC when it names no zone) -> ms since the epoch. Exits 1 on anything else."""
    value = text.strip()
    match = re.fullmatch(r"(\d+)(ms|s|m|h|d)", value)
    if match:
        return int((now_s - int(match.group(1)) * UNITS[match.group(2)]) * 1000)
    try:
        stamp = datetime.datetime.fromisoformat(value)
    except ValueError:
        fail(f"--since wants a duration (30m, 2h, 7d) or an ISO 8601 time, got {text!r}")
        raise AssertionError("unreachable") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.UTC)
    return int(stamp.timestamp() * 1000)


def _when(ms: int) -> str:
    stamp = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


def _moved(r: Rebalance) -> str:
    lines = []
    for m in r.moved:
        parts = []
        if m.gained:
            parts.append("+" + ",".join(m.gained))
        if m.lost:
            parts.append("-" + ",".join(m.lost))
        lines.append(f"{m.member}: {' '.join(parts)}")
    return "\n".join(lines) or "-"


def wide_console() -> Console:
    """A console for tables: the terminal's width, or 200 columns when piped (rich's 80
    would fold the column names a script greps for)."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def render_table(timeline: Timeline, console: Console) -> None:
    kind = "EPOCH" if timeline.protocol not in (None, "classic") else "GENERATION"
    table = Table(title=f"group {timeline.group} ({timeline.protocol or 'unknown'}): "
                        f"{len(timeline.rebalances)} rebalance(s), state "
                        f"{timeline.state or 'unknown'}", title_justify="left")
    for name in (kind, "STARTED", "STABLE AFTER (ms)", "CAUSE", "JOINED", "LEFT/FENCED",
                 "MOVED"):
        table.add_column(name, overflow="fold")
    for r in timeline.rebalances:
        took = "in progress" if r.duration_ms is None else str(r.duration_ms)
        if r.state not in (None, "Stable") and r.duration_ms is not None:
            took += f" ({r.state})"
        table.add_row(
            f"{r.from_generation} -> {r.generation}", _when(r.started_ms), took, r.cause,
            "\n".join(c.member for c in r.joined) or "-",
            "\n".join(f"{c.member} ({c.kind}{': ' + c.reason if c.kind == 'fenced' else ''})"
                      for c in r.departed) or "-",
            _moved(r))
    console.print(table)


@click.command("timeline")
@click.argument("group")
@bootstrap_options
@click.option("--output", "-o", "output", type=click.Choice(["table", "json"]), default="table",
              show_default=True)
@click.option("--all-partitions", is_flag=True,
              help="Read every partition of __group_events (needed only after its "
                   "partition count was altered).")
@click.option("--since", "since", default=None, metavar="WHEN",
              help="Only events from then on: a duration back from now (90s, 30m, 2h, 7d) "
                   "or an ISO 8601 time (2026-11-28T10:00:00Z).")
@click.option("--request-timeout-ms", type=click.IntRange(1), default=30_000,
              show_default=True, help="How long to wait for the cluster.")
def timeline(group: str, bootstrap: str, command_config: Path | None, output: str,
             all_partitions: bool, since: str | None, request_timeout_ms: int) -> None:
    """The rebalances of GROUP from __group_events (coterie brokers only): generations or
    epochs, who joined, left or was fenced and why, time to Stable, partitions moved."""
    since_ms = None if since is None else parse_since(since, time.time())
    security = load_command_config(command_config)
    result = run_client(read_timeline(bootstrap, group, security=security,
                                      request_timeout_ms=request_timeout_ms,
                                      all_partitions=all_partitions, since_ms=since_ms))
    if output == "json":
        click.echo(json.dumps(timeline_json(result), indent=2))
        return
    if not result.events:
        click.echo(f"no events for group {group!r} in __group_events")
        return
    render_table(result, wide_console())
