"""`coterie produce TOPIC`: records from stdin (or `--file`), one a line, as
kafka-console-producer and `rpk topic produce` do.

Text input: each line is a value (an empty line an empty value); with `--key-separator SEP`
each line is KEY SEP VALUE, split at the first SEP (a line without it is an error, as Kafka's
`parse.key=true`). JSON input (`--format json`): each non-blank line is an object with
"value", and optionally "key", "headers" (an object {name: value} or a list of
{"key": name, "value": value}) and "partition"; null key or value are sent as null; "topic",
"offset" and "timestamp" (what `coterie consume --format json` prints) are ignored.
`--header K=V` (repeatable) adds headers to every record; `--partition N` sends everything
to one partition (a record's own "partition" wins); otherwise keyed records go where Kafka's
default partitioner puts them (murmur2) and the rest stick to one partition per batch.

Exit code 0 when every record was acknowledged (`--acks all` by default), 1 with a message
on an unknown topic, an unreachable cluster, a refused batch or a bad line (naming its
number; the lines before it are sent). From a pipe or a file, records are sent in batches;
typed at a terminal, each line is sent as soon as it is entered. A progress bar counts the
records on stderr when it is a terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from coterie.cli.connect import bootstrap_options, fail, load_command_config, run_client
from coterie.client.errors import ClientError
from coterie.client.producer import Producer

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


class BadLine(ClientError):
    """An input line that is not a record."""

    def __init__(self, number: int, problem: str) -> None:
        super().__init__(f"line {number}: {problem}")


Parsed = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int | None]


def _text(value: Any, what: str, number: int) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    raise BadLine(number, f"{what} must be a string or null, not {type(value).__name__}")


def parse_json_line(line: str, number: int) -> Parsed:
    """One `--format json` line -> (key, value, headers, partition)."""
    try:
        doc = json.loads(line)
    except ValueError as e:
        raise BadLine(number, f"not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise BadLine(number, "a JSON object is expected")
    # topic, offset and timestamp are what `coterie consume --format json` adds: ignored,
    # so its output can be produced again as it is.
    unknown = set(doc) - {"key", "value", "headers", "partition", "topic", "offset",
                          "timestamp"}
    if unknown:
        raise BadLine(number, f"unknown field(s) {', '.join(sorted(unknown))}")
    headers: list[tuple[str, bytes | None]] = []
    raw = doc.get("headers") or []
    if isinstance(raw, dict):
        raw = [{"key": k, "value": v} for k, v in raw.items()]
    if not isinstance(raw, list):
        raise BadLine(number, "headers must be an object or a list")
    for h in raw:
        if not isinstance(h, dict) or not isinstance(h.get("key"), str):
            raise BadLine(number, 'each header must be {"key": string, "value": ...}')
        headers.append((h["key"], _text(h.get("value"), "a header value", number)))
    partition = doc.get("partition")
    if partition is not None and (not isinstance(partition, int) or isinstance(partition, bool)
                                  or partition < 0):
        raise BadLine(number, "partition must be a non-negative integer")
    return (_text(doc.get("key"), "key", number), _text(doc.get("value"), "value", number),
            headers, partition)


def parse_text_line(line: str, number: int, separator: str | None) -> Parsed:
    if separator is None:
        return None, line.encode("utf-8"), [], None
    key, sep, value = line.partition(separator)
    if not sep:
        raise BadLine(number, f"no key separator {separator!r} in the line")
    return key.encode("utf-8"), value.encode("utf-8"), [], None


def parse_headers(items: tuple[str, ...]) -> list[tuple[str, bytes | None]]:
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            fail(f"--header wants KEY=VALUE, got {item!r}")
        out.append((name, value.encode("utf-8")))
    return out


def _lines(stream: IO[str]) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(stream, 1):
        yield number, line.rstrip("\r\n") if line.endswith("\n") else line


async def produce_lines(producer: Producer, topic: str, stream: IO[str], *, fmt: str,
                        separator: str | None, headers: list[tuple[str, bytes | None]],
                        partition: int | None, progress: Progress | None) -> int:
    """Send every line of `stream`; returns the records sent. A bad line flushes what came
    before it and raises BadLine."""
    await producer.partition_count(topic)  # an unknown topic fails before reading stdin
    task = progress.add_task("produced", total=None) if progress is not None else None
    # Someone typing: each line goes out at once, as kafka-console-producer sends it.
    interactive = stream.isatty()
    count = 0
    for number, line in _lines(stream):
        try:
            if fmt == "json":
                if not line.strip():
                    continue
                key, value, own, part = parse_json_line(line, number)
            else:
                key, value, own, part = parse_text_line(line, number, separator)
        except BadLine:
            await producer.flush()
            raise
        await producer.send(topic, value, key=key, headers=[*own, *headers],
                            partition=part if part is not None else partition)
        count += 1
        if interactive:
            await producer.flush()
        if progress is not None and task is not None:
            progress.update(task, completed=count)
    await producer.flush()
    return count


@click.command("produce")
@click.argument("topic")
@bootstrap_options
@click.option("--file", "input_file", type=click.Path(path_type=Path, dir_okay=False),
              default=None, help="Read records from this file instead of stdin.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="text: a value a line; json: an object a line.")
@click.option("--key-separator", default=None, metavar="SEP",
              help="Text lines are KEY SEP VALUE (split at the first SEP).")
@click.option("--header", "header_items", multiple=True, metavar="K=V",
              help="A header added to every record (repeatable).")
@click.option("--partition", type=click.IntRange(0), default=None,
              help="Send every record to this partition.")
@click.option("--acks", type=click.Choice(list(ACKS)), default="all", show_default=True,
              help="all: every in-sync replica; 1: the leader; 0: no acknowledgement.")
@click.option("--batch-size", type=click.IntRange(1), default=256 * 1024, show_default=True,
              help="Bytes of records per partition sent in one Produce.")
@click.option("--request-timeout-ms", type=click.IntRange(1), default=30_000,
              show_default=True, help="How long to wait for the cluster.")
def produce(topic: str, bootstrap: str, command_config: Path | None, input_file: Path | None,
            fmt: str, key_separator: str | None, header_items: tuple[str, ...],
            partition: int | None, acks: str, batch_size: int,
            request_timeout_ms: int) -> None:
    """Produce records to TOPIC from stdin (or --file), one a line."""
    if key_separator is not None and fmt == "json":
        fail("--key-separator is for --format text (json lines carry their key)")
    if key_separator == "":
        fail("--key-separator must not be empty")
    headers = parse_headers(header_items)
    security = load_command_config(command_config)
    err = Console(stderr=True)
    progress = (Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                         MofNCompleteColumn(), console=err, transient=True)
                if err.is_terminal else None)

    async def go() -> int:
        producer = Producer(bootstrap, acks=ACKS[acks], batch_bytes=batch_size,
                            request_timeout_ms=request_timeout_ms, security=security,
                            client_id="coterie-produce")
        try:
            stream: IO[str]
            if input_file is None:
                stream = sys.stdin
                return await produce_lines(producer, topic, stream, fmt=fmt,
                                           separator=key_separator, headers=headers,
                                           partition=partition, progress=progress)
            try:
                stream = input_file.open(encoding="utf-8", newline="")
            except OSError as e:
                raise ClientError(f"cannot read --file {input_file}: "
                                  f"{e.strerror or e}") from None
            with stream:
                return await produce_lines(producer, topic, stream, fmt=fmt,
                                           separator=key_separator, headers=headers,
                                           partition=partition, progress=progress)
        except UnicodeDecodeError as e:
            raise ClientError(f"the input is not UTF-8 text: {e}") from None
        finally:
            await producer.close()

    if progress is not None:
        with progress:
            run_client(go())
    else:
        run_client(go())
