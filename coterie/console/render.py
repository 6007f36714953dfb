"""The pages' HTML from the values of `views.py`: Jinja2 templates, every one autoescaped.

Why autoescape everywhere (the SVG too) and no `|safe` anywhere: group ids, topic names,
member and client ids are chosen by whoever runs a client, and the console shows them to an
operator; an id like `<script>alert(1)</script>` must read as text. URLs carry names
percent-encoded (`urlpart`), and attribute values are escaped by the same rule.
"""

from __future__ import annotations

import datetime
import time
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined

from coterie.console import timeline_svg
from coterie.console.paging import Page, page_of
from coterie.console.views import BrokersDetail, GroupDetail, GroupRow, TopicDetail, TopicRow

FORMER_ROWS = 20  # departed members drawn on a group's first page, at most


def _clock(ms: int | None) -> str:
    if ms is None:
        return ""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d} UTC"


def _expiry(ms: int) -> str:
    """How long until a lease expires ("in 4.2 s"), or since when it has been expired."""
    return f"in {ms / 1000:.1f} s" if ms > 0 else f"expired {-ms / 1000:.1f} s ago"


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("coterie.console", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["urlpart"] = lambda s: quote(str(s), safe="")
    env.filters["clock"] = _clock
    env.filters["expiry"] = _expiry
    return env


_ENV = _environment()


def _render(template: str, **values: object) -> str:
    values.setdefault("principal", None)
    return _ENV.get_template(template).render(**values)


def group_path(group_id: str) -> str:
    return "/groups/" + quote(group_id, safe="")


def topic_path(name: str) -> str:
    return "/topics/" + quote(name, safe="")


def groups_page(page: Page[GroupRow], principal: str | None = None) -> str:
    """One page of the groups, sorted by id (`sort_groups`) before paging."""
    return _render("groups.html", title="Groups", page=page, principal=principal)


def sort_groups(groups: list[GroupRow]) -> list[GroupRow]:
    return sorted(groups, key=lambda g: g.group_id)


def group_page(group: GroupDetail, page: int = 1, lag_page: int = 1,
               principal: str | None = None, now_ms: int | None = None) -> str:
    """One group: a page of its members, the timeline of those members, a page of its lag."""
    members = page_of(sorted(group.members, key=lambda m: m.member_id), page)
    lag = page_of(sorted(group.lag, key=lambda p: (p.topic, p.partition)), lag_page)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    rows = [m.member_id for m in members.items]
    if members.number == 1:  # the first page also draws who held partitions and is gone
        rows += _former_members(group)
    svg = timeline_svg.picture(group.timeline, rows, now,
                               former=frozenset(rows) - {m.member_id for m in group.members})
    return _render("group.html", title=f"Group {group.group_id}", group=group,
                   members=members, lag=lag, svg=svg, path=group_path(group.group_id),
                   principal=principal)


def _former_members(group: GroupDetail) -> list[str]:
    """Members the timeline saw holding partitions that are not in the group now (a crashed
    or departed member: the picture's point), newest departures first, one page at most."""
    current = {m.member_id for m in group.members}
    last_seen: dict[str, int] = {}
    for o in group.timeline.ownership:
        if o.member_id not in current:
            end = o.end_ms if o.end_ms is not None else o.start_ms
            last_seen[o.member_id] = max(end, last_seen.get(o.member_id, end))
    ordered = sorted(last_seen, key=lambda m: (-last_seen[m], m))[:FORMER_ROWS]
    return sorted(ordered)


def topics_page(topics: list[TopicRow], page: int, principal: str | None = None) -> str:
    rows = sorted(topics, key=lambda t: t.name)
    return _render("topics.html", title="Topics", page=page_of(rows, page),
                   principal=principal)


def topic_page(topic: TopicDetail, page: int = 1, principal: str | None = None) -> str:
    return _render("topic.html", title=f"Topic {topic.name}", topic=topic,
                   partitions=page_of(topic.partitions, page), path=topic_path(topic.name),
                   principal=principal)


def brokers_page(detail: BrokersDetail, principal: str | None = None, page: int = 1) -> str:
    held: dict[int, int] = {}
    for lease in detail.leases or ():
        if lease.live and lease.holder is not None:
            held[lease.holder] = held.get(lease.holder, 0) + 1
    return _render("brokers.html", title="Brokers", detail=detail, principal=principal,
                   held=held, leases=page_of(detail.leases or (), page), path="/brokers")


def error_page(heading: str, message: str, hint: str | None = None,
               principal: str | None = None) -> str:
    return _render("error.html", title=heading, heading=heading, message=message, hint=hint,
                   principal=principal)
