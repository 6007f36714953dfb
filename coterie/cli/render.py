"""Tables for people, JSON for scripts: how the operator commands print what they read.

Tables are rich tables without borders: columns aligned as in Kafka's tools (and `rpk`), so
that a row still splits on whitespace, a missing value shown as `-` as Kafka's tools do.
When stdout is not a terminal the table is not cut to a terminal's width (a script reading
it gets whole member ids). JSON goes to stdout as one document, indented, keys as documented
in docs/operations.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text


def console() -> Console:
    """A console on the current stdout (click's test runner replaces it)."""
    tty = sys.stdout.isatty()
    return Console(file=sys.stdout, width=None if tty else 10_000, highlight=False,
                   soft_wrap=not tty, no_color=not tty)


def cell(value: Any) -> Text:
    """A value as Kafka's tools print it: `-` for nothing; never read as rich markup."""
    return Text("-" if value is None or value == "" else str(value))


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]],
          title: str | None = None) -> None:
    t = Table(*columns, box=box.SIMPLE_HEAD if sys.stdout.isatty() else None,
              show_edge=False, pad_edge=False, header_style="bold", title=title)
    for row in rows:
        t.add_row(*(cell(v) for v in row))
    out = console()
    if out.is_terminal:
        out.print(t)
        return
    with out.capture() as captured:
        out.print(t)
    click.echo("\n".join(row.rstrip() for row in captured.get().splitlines()))


def line(text: str) -> None:
    console().print(Text(text))


def note(text: str) -> None:
    """A remark for a person (stderr), which a script reading stdout does not see."""
    click.echo(text, err=True)


def emit_json(document: Any) -> None:
    click.echo(json.dumps(document, indent=2, ensure_ascii=False))
