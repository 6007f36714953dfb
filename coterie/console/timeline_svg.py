"""The rebalance timeline as a picture: geometry for an inline SVG, computed on the server.

Why geometry here and markup in a template: the template (`templates/timeline.svg.j2`) is
autoescaped like every page, so a member id or topic name is text in the picture, never
markup; this module only turns times into coordinates. One row per member (the members of the
page shown, so a 10,000-member group draws one page of rows), one bar per partition a member
held, from when it got it to when it gave it up (or to now); each rebalance is a shaded band
across all rows, labelled with its cause and how long it took.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from coterie.console.views import Ownership, Rebalance, Timeline

LABEL_WIDTH = 220  # the member ids' column
PLOT_WIDTH = 760
ROW_HEIGHT = 22
BAR_GAP = 2
LANE_HEIGHT = 14  # one partition's bar inside a member's row
TOP = 48  # the rebalance labels' band (three staggered lines)
BOTTOM = 24  # the time axis
MAX_ROWS = 200  # rows drawn at most; the page's members are far fewer (pages.PAGE_SIZE)


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    title: str
    colour: str


@dataclass(frozen=True, slots=True)
class Band:
    x: float
    width: float
    label: str
    title: str
    open: bool


@dataclass(frozen=True, slots=True)
class Row:
    y: float
    member_id: str
    short: str
    height: float
    former: bool = False


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True, slots=True)
class TimelinePicture:
    width: int
    height: int
    rows: tuple[Row, ...]
    bars: tuple[Bar, ...]
    bands: tuple[Band, ...]
    ticks: tuple[Tick, ...]
    plot_left: int
    plot_right: int
    empty: bool
    top: int = TOP


_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
            "#ff9da7", "#9c755f", "#bab0ac")


def _colour(partition: str) -> str:
    # Stable per partition across renders (not Python's salted hash).
    return _PALETTE[sum(partition.encode()) % len(_PALETTE)]


def _short(member_id: str, limit: int = 30) -> str:
    return member_id if len(member_id) <= limit else member_id[: limit - 1] + "\u2026"


def _duration(ms: int | None) -> str:
    if ms is None:
        return "in progress"
    return f"{ms} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _clock(ms: int, span_ms: int) -> str:
    seconds = ms / 1000
    hh, rest = divmod(int(seconds) % 86_400, 3600)
    mm, ss = divmod(rest, 60)
    text = f"{hh:02d}:{mm:02d}:{ss:02d}"
    if span_ms < 10_000:
        text += f".{int(ms % 1000):03d}"
    return text + " UTC"


def picture(timeline: Timeline, members: Sequence[str], now_ms: int,
            former: frozenset[str] = frozenset()) -> TimelinePicture:
    """Lay out `timeline` for the members `members` (in that order) up to `now_ms`; those in
    `former` are no longer in the group (their rows say so)."""
    rows_ids = list(members)[:MAX_ROWS]
    shown = set(rows_ids)
    held = [o for o in timeline.ownership if o.member_id in shown]
    times: list[int] = [o.start_ms for o in held]
    times += [o.end_ms for o in held if o.end_ms is not None]
    times += [r.start_ms for r in timeline.rebalances]
    times += [r.end_ms for r in timeline.rebalances if r.end_ms is not None]
    start = min(times) if times else now_ms - 60_000
    end = max([*times, now_ms])
    span = max(1, end - start)
    left, right = LABEL_WIDTH, LABEL_WIDTH + PLOT_WIDTH

    def x_of(ms: int) -> float:
        return round(left + (ms - start) * PLOT_WIDTH / span, 1)

    lanes = _lanes(held)
    rows, y = [], float(TOP)
    for m in rows_ids:
        h = max(ROW_HEIGHT, 2 * BAR_GAP + LANE_HEIGHT * len(lanes.get(m, ())))
        rows.append(Row(y, m, _short(m) if m not in former else "(gone) " + _short(m, 23), h,
                        m in former))
        y += h
    row_at = {r.member_id: r for r in rows}
    bars = tuple(_bars(held, row_at, lanes, x_of, end))
    bands = tuple(_bands(timeline.rebalances, x_of, end))
    ticks = tuple(Tick(x_of(start + span * i // 4), _clock(start + span * i // 4, span))
                  for i in range(5))
    height = int(max(y, TOP + ROW_HEIGHT)) + BOTTOM
    return TimelinePicture(width=right + 20, height=height, rows=tuple(rows), bars=bars,
                           bands=bands, ticks=ticks, plot_left=left, plot_right=right,
                           empty=not held and not timeline.rebalances)


def _lanes(held: Iterable[Ownership]) -> dict[str, dict[str, int]]:
    """Per member, one lane per partition it ever held in the picture (its row's height)."""
    parts: dict[str, set[str]] = {}
    for o in held:
        parts.setdefault(o.member_id, set()).add(o.partition)
    return {m: {tp: i for i, tp in enumerate(sorted(tps, key=_natural))}
            for m, tps in parts.items()}


def _natural(name: str) -> tuple[str, int, str]:
    # t-2 before t-10.
    topic, _, number = name.rpartition("-")
    return (topic, int(number), "") if number.isdigit() else (name, -1, name)


def _bars(held: Iterable[Ownership], row_at: dict[str, Row],
          lanes: dict[str, dict[str, int]], x_of, end: int) -> list[Bar]:
    out = []
    for o in held:
        row = row_at[o.member_id]
        lane = lanes[o.member_id][o.partition]
        x0, x1 = x_of(o.start_ms), x_of(o.end_ms if o.end_ms is not None else end)
        label = o.partition
        until = "now" if o.end_ms is None else f"+{o.end_ms - o.start_ms} ms"
        out.append(Bar(x=x0, y=row.y + BAR_GAP + lane * LANE_HEIGHT,
                       width=max(1.0, round(x1 - x0, 1)), height=LANE_HEIGHT - 2,
                       label=label, title=f"{o.member_id} held {label} ({until})",
                       colour=_colour(o.partition)))
    return out


def _bands(rebalances: Iterable[Rebalance], x_of, end: int) -> list[Band]:
    # Labelled by number ("#3 507 ms"); the cause is in the band's tooltip and in the table
    # under the picture, whose rows carry the same numbers (causes are too long to fit).
    out = []
    for i, r in enumerate(rebalances, start=1):
        x0 = x_of(r.start_ms)
        x1 = x_of(r.end_ms if r.end_ms is not None else end)
        epoch = "" if r.epoch is None else f" \u2192 epoch {r.epoch}"
        out.append(Band(x=x0, width=max(2.0, round(x1 - x0, 1)),
                        label=f"#{i} {_duration(r.duration_ms)}",
                        title=f"rebalance #{i}{epoch}: {r.cause}, {_duration(r.duration_ms)}",
                        open=r.end_ms is None))
    return out
