"""`coterie consume TOPIC`: print a topic's records, as kafka-console-consumer and
`rpk topic consume` do.

Three ways to read:

- `--group G`: as a member of consumer group G (coterie's `Consumer`, classic protocol,
  range assignor), from the group's committed offsets, else from the end (or the start with
  `--from-beginning`); the offsets of what was printed are committed after each batch and
  on exit, so the next run of the group goes on where this one stopped.
- `--partition N [--offset O]`: one partition, from O (a number, `earliest` or `latest`;
  default: the end, or the start with `--from-beginning`); no group, nothing committed.
- neither: every partition of the topic that way (as rpk does; Kafka's tool would make up
  a group instead, which leaves a group behind for every run).

It stops after `--max-messages N`, or when no record came for `--timeout-ms` (counted,
for a group, from the moment the member has its partitions), with exit code 0, or on
Ctrl-C (130); an unknown topic, an unreachable cluster or a broker's refusal end it with
exit code 1 and a message.

Output: `--format text` prints the value, preceded by the key (`--print-key`) and the
headers (`--print-headers`, "k:v,k2:v2" or NO_HEADERS), joined by `--separator` (a tab),
with null for a null key or value; `--format json` prints one object a line: topic,
partition, offset, timestamp, key, value, headers (a list of {"key", "value"}, what
`coterie produce --format json` reads back). Bytes that are not UTF-8 are shown with
replacement characters. When the records go to a file or a pipe and stderr is a terminal,
a progress bar counts them there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from coterie.cli.connect import bootstrap_options, fail, load_command_config, run_client
from coterie.client.consumer import Consumer
from coterie.client.errors import ClientError, CommitFailedError
from coterie.client.reader import EARLIEST, LATEST, PartitionReader
from coterie.client.records import ConsumerRecord

Printer = Callable[[ConsumerRecord], None]


def _str(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def record_json(r: ConsumerRecord) -> str:
    return json.dumps({
        "topic": r.topic, "partition": r.partition, "offset": r.offset,
        "timestamp": r.timestamp, "key": _str(r.key), "value": _str(r.value),
        "headers": [{"key": k, "value": _str(v)} for k, v in r.headers]},
        ensure_ascii=False)


def record_text(r: ConsumerRecord, *, print_key: bool, print_headers: bool,
                separator: str) -> str:
    parts = []
    if print_headers:
        parts.append(",".join(f"{k}:{_str(v) if v is not None else 'null'}"
                              for k, v in r.headers) or "NO_HEADERS")
    if print_key:
        parts.append("null" if r.key is None else _str(r.key) or "")
    parts.append("null" if r.value is None else _str(r.value) or "")
    return separator.join(parts)


def parse_offset(text: str | None) -> int | None:
    """--offset: a number, earliest (-2) or latest (-1); None when not given."""
    if text is None:
        return None
    lowered = text.strip().lower()
    if lowered in ("earliest", "beginning"):
        return EARLIEST
    if lowered in ("latest", "end"):
        return LATEST
    if lowered.isdigit():
        return int(lowered)
    fail(f"--offset must be a non-negative number, earliest or latest; got {text!r}")
    return None


class Limits:
    """--max-messages and --timeout-ms: when to stop."""

    def __init__(self, max_messages: int | None, timeout_ms: int | None) -> None:
        self.max_messages = max_messages
        self.timeout_s = None if timeout_ms is None else timeout_ms / 1000
        self.count = 0
        self._last = asyncio.get_running_loop().time()

    def restart(self) -> None:
        """Count the timeout from now."""
        self._last = asyncio.get_running_loop().time()

    def got(self, n: int) -> None:
        self.count += n
        if n:
            self._last = asyncio.get_running_loop().time()

    @property
    def room(self) -> int | None:
        return None if self.max_messages is None else self.max_messages - self.count

    def done(self) -> bool:
        if self.max_messages is not None and self.count >= self.max_messages:
            return True
        return self.timeout_s is not None and self.wait_s() <= 0

    def wait_s(self, cap: float = 0.5) -> float:
        if self.timeout_s is None:
            return cap
        return max(0.0, min(cap, self._last + self.timeout_s
                            - asyncio.get_running_loop().time()))


async def consume_partitions(bootstrap: str, topic: str, partition: int | None,
                             offset: int | None, from_beginning: bool, limits: Limits,
                             emit: Printer, security: dict[str, str],
                             request_timeout_ms: int) -> None:
    """Read `partition` (None: every partition) with no group."""
    async with PartitionReader(bootstrap, security=security, client_id="coterie-consume",
                               request_timeout_ms=request_timeout_ms) as reader:
        partitions = await reader.partitions(topic)
        if partition is not None and partition not in partitions:
            raise ClientError(f"topic {topic!r} has {len(partitions)} partition(s); there is "
                              f"no partition {partition}")
        tps = [(topic, p) for p in ([partition] if partition is not None else partitions)]
        start = offset if offset is not None else (EARLIEST if from_beginning else LATEST)
        if start in (EARLIEST, LATEST):
            positions = await reader.offsets(tps, start)
        else:
            positions = dict.fromkeys(tps, start)
        while not limits.done():
            wait_ms = max(1, int(limits.wait_s() * 1000))
            fetched = await reader.fetch(positions, max_wait_ms=wait_ms)
            for tp in tps:
                got = fetched[tp]
                records = got.records
                if limits.room is not None:
                    records = records[:limits.room]
                for r in records:
                    emit(r)
                limits.got(len(records))
                positions[tp] = (records[-1].offset + 1 if records and len(records)
                                 < len(got.records) else max(positions[tp], got.next_offset))
                if limits.done():
                    return


async def consume_group(bootstrap: str, topic: str, group: str, from_beginning: bool,
                        limits: Limits, emit: Printer, security: dict[str, str],
                        request_timeout_ms: int) -> None:
    """Read as a member of `group`, committing what was printed."""
    async with PartitionReader(bootstrap, security=security, client_id="coterie-consume",
                               request_timeout_ms=request_timeout_ms) as reader:
        await reader.partitions(topic)  # an unknown topic or no cluster: fail fast
    consumer = Consumer(bootstrap, group, topics=[topic], auto_commit=False,
                        auto_offset_reset="earliest" if from_beginning else "latest",
                        client_id="coterie-consume", security=security,
                        request_timeout_ms=request_timeout_ms,
                        unavailable_timeout_ms=request_timeout_ms)
    await consumer.start()
    try:
        try:
            # --timeout-ms counts from the moment the member has its partitions: joining
            # may take the group's initial rebalance delay (3 s by default) and more.
            await consumer.wait_assigned(timeout=request_timeout_ms / 1000)
        except TimeoutError:
            raise ClientError(f"could not join group {group!r} within "
                              f"{request_timeout_ms} ms") from None
        limits.restart()
        while not limits.done():
            records = await consumer.poll(timeout_ms=limits.wait_s() * 1000,
                                          max_records=limits.room)
            for r in records:
                emit(r)
            limits.got(len(records))
            if records:
                last: dict[tuple[str, int], int] = {}
                for r in records:
                    last[(r.topic, r.partition)] = r.offset + 1
                # The group rebalanced: the next batch's commit stores its offsets.
                with contextlib.suppress(CommitFailedError):
                    await consumer.commit(last)
    finally:
        await consumer.close()


@click.command("consume")
@click.argument("topic")
@bootstrap_options
@click.option("--group", default=None, help="Consume as a member of this consumer group "
              "(committing the offsets of what was printed).")
@click.option("--partition", type=click.IntRange(0), default=None,
              help="Read only this partition (no group).")
@click.option("--offset", "offset_text", default=None, metavar="OFFSET",
              help="With --partition: where to start (a number, earliest or latest).")
@click.option("--from-beginning", is_flag=True,
              help="Start at the log start (for a group: where it has no committed offset).")
@click.option("--max-messages", type=click.IntRange(1), default=None,
              help="Stop after this many records.")
@click.option("--timeout-ms", type=click.IntRange(1), default=None,
              help="Stop when no record came for this long.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--print-key", is_flag=True, help="Text: print the key before the value.")
@click.option("--print-headers", is_flag=True, help="Text: print the headers first.")
@click.option("--separator", default="\t", show_default="tab",
              help="Text: what joins headers, key and value.")
@click.option("--request-timeout-ms", type=click.IntRange(1), default=30_000,
              show_default=True, help="How long to wait for the cluster.")
def consume(topic: str, bootstrap: str, command_config: Path | None, group: str | None,
            partition: int | None, offset_text: str | None, from_beginning: bool,
            max_messages: int | None, timeout_ms: int | None, fmt: str, print_key: bool,
            print_headers: bool, separator: str, request_timeout_ms: int) -> None:
    """Print the records of TOPIC (as a group member, or from chosen partitions)."""
    if group is not None and partition is not None:
        fail("--group and --partition exclude each other (a group member is assigned its "
             "partitions)")
    if offset_text is not None and partition is None:
        fail("--offset needs --partition")
    if offset_text is not None and from_beginning:
        fail("--offset and --from-beginning exclude each other")
    offset = parse_offset(offset_text)
    security = load_command_config(command_config)
    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True)
    progress = (Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                         MofNCompleteColumn(), console=err, transient=True)
                if err.is_terminal and not out.is_terminal else None)
    task = (progress.add_task(f"consumed from {topic}", total=max_messages)
            if progress is not None else None)

    def emit(r: ConsumerRecord) -> None:
        line = record_json(r) if fmt == "json" else record_text(
            r, print_key=print_key, print_headers=print_headers, separator=separator)
        click.echo(line)
        if progress is not None and task is not None:
            progress.advance(task)

    async def go() -> None:
        limits = Limits(max_messages, timeout_ms)
        try:
            if group is not None:
                await consume_group(bootstrap, topic, group, from_beginning, limits, emit,
                                    security, request_timeout_ms)
            else:
                await consume_partitions(bootstrap, topic, partition, offset, from_beginning,
                                         limits, emit, security, request_timeout_ms)
        except asyncio.CancelledError:
            pass

    try:
        if progress is not None:
            with progress:
                run_client(go())
        else:
            run_client(go())
    except BrokenPipeError:  # `coterie consume ... | head`: the reader went away
        pass
