"""Pages of long lists: a group of 10,000 members is shown PAGE_SIZE rows at a time.

Why: one HTML page of 10,000 rows (and their SVG rows) is megabytes a browser chokes on and
seconds of rendering; a page of 100 is as fast as a small group's. A page number out of range
shows the last page; a page that is not a number is a 400 (`BadPage`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
PAGE_SIZE = 100


class BadPage(ValueError):
    """`?page=` is not a positive integer."""


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: Sequence[T]
    number: int  # 1-based
    pages: int
    total: int
    first_index: int  # 0-based index of items[0] in the whole list

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_next(self) -> bool:
        return self.number < self.pages


def parse_page(raw: str | None) -> int:
    if raw is None or raw == "":
        return 1
    if not raw.isdigit() or len(raw) > 9 or int(raw) < 1:
        raise BadPage(f"page must be a positive integer, not {raw[:40]!r}")
    return int(raw)


def page_of(items: Sequence[T], number: int, size: int = PAGE_SIZE) -> Page[T]:
    total = len(items)
    pages = max(1, -(-total // size))
    number = min(max(1, number), pages)
    first = (number - 1) * size
    return Page(items=items[first:first + size], number=number, pages=pages, total=total,
                first_index=first)
