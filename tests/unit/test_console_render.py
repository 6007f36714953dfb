"""The console's pages rendered from values (coterie.console.render): escaping of hostile
names, paging of a 10,000-member group, the timeline picture's geometry."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coterie.console import render, timeline_svg
from coterie.console.lease_source import lease_view
from coterie.console.paging import PAGE_SIZE, BadPage, page_of, parse_page
from coterie.console.views import (
    BrokersDetail,
    BrokerView,
    ConfigEntry,
    GroupDetail,
    GroupRow,
    Lease,
    MemberView,
    Ownership,
    PartitionLag,
    PartitionView,
    Rebalance,
    Timeline,
    TopicDetail,
    TopicPartitionRef,
)
from coterie.storage.api import Resource
from coterie.storage.leases import LeaseRow

HOSTILE = "<script>alert(1)</script>\"'é"


class _Tags(HTMLParser):
    """The tags and text a browser's parser would see."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(html: str) -> _Tags:
    p = _Tags()
    p.feed(html)
    return p


def _group(members: int, name: str = "g") -> GroupDetail:
    ms = tuple(MemberView(f"member-{i:05d}", "client", "/10.0.0.1", None, 4,
                          (TopicPartitionRef("t", i),)) for i in range(members))
    own = tuple(Ownership(f"member-{i:05d}", f"t-{i}", 1_000, None) for i in range(members))
    return GroupDetail(name, "consumer", "Stable", 4, "uniform", "1 127.0.0.1:9092", ms,
                       tuple(PartitionLag("t", i, i, 2 * i, f"member-{i:05d}")
                             for i in range(members)),
                       Timeline((Rebalance(500, 1_000, "member-00000 joined", 4),), own))


def test_a_hostile_group_name_is_text_in_every_place_it_appears() -> None:
    member = MemberView(HOSTILE, HOSTILE, HOSTILE, HOSTILE, 1, (TopicPartitionRef(HOSTILE, 0),))
    group = GroupDetail(HOSTILE, "classic", "Stable", 1, HOSTILE, None, (member,),
                        (PartitionLag(HOSTILE, 0, 1, 2, HOSTILE),),
                        Timeline((Rebalance(0, 10, HOSTILE, 1),),
                                 (Ownership(HOSTILE, HOSTILE, 0, None),)))
    html = render.group_page(group, now_ms=100)
    parsed = _parse(html)
    assert "script" not in parsed.tags
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;é" in html
    assert any(HOSTILE in t for t in parsed.text)
    listing = render.groups_page(page_of([GroupRow(HOSTILE, "classic", "Empty", 0, 0)], 1))
    assert "script" not in _parse(listing).tags
    # The link percent-encodes the name: no quote can end the attribute early.
    assert 'href="/groups/%3Cscript%3Ealert%281%29%3C%2Fscript%3E%22%27%C3%A9"' in listing
    topic = render.topic_page(TopicDetail(HOSTILE, None, False, (PartitionView(0, 1),),
                                          (ConfigEntry(HOSTILE, HOSTILE),)))
    assert "script" not in _parse(topic).tags


@given(st.text(min_size=1, max_size=40))
def test_no_name_becomes_markup(name: str) -> None:
    html = render.groups_page(page_of([GroupRow(name, "consumer", "Stable", 1, 1)], 1))
    tags = _parse(html).tags
    assert tags.count("a") == 4  # three in the header, one for the group
    assert "script" not in tags


def test_a_10000_member_group_renders_one_page_of_members_rows_and_lag() -> None:
    group = _group(10_000)
    html = render.group_page(group, page=3, lag_page=100, now_ms=2_000)
    members = re.findall(r'<td class="mono">(member-\d+)</td><td>client', html)
    assert members == [f"member-{i:05d}" for i in range(200, 300)]
    svg = html[html.index("<svg"):html.index("</svg>")]
    assert svg.count('class="member-row"') == PAGE_SIZE
    assert "member-00250" in svg and "member-00300" not in svg
    lag_rows = re.findall(r"<tr><td>t</td><td class=\"num\">(\d+)</td>", html)
    assert lag_rows == [str(i) for i in range(9_900, 10_000)]
    assert "page 3 of 100 (10000 in all)" in html
    assert 'href="/groups/g?page=4"' in html and 'href="/groups/g?page=2"' in html
    assert len(html) < 200_000


def test_page_numbers() -> None:
    assert parse_page(None) == 1 and parse_page("7") == 7
    for bad in ("0", "-1", "x", "1e3", "9" * 12):
        with pytest.raises(BadPage):
            parse_page(bad)
    last = page_of(list(range(250)), 99)
    assert (last.number, last.pages, list(last.items)) == (3, 3, list(range(200, 250)))
    assert page_of([], 1).pages == 1


def test_the_timeline_draws_who_held_what_and_each_rebalance() -> None:
    tl = Timeline(
        (Rebalance(1_000, 1_400, "m3 joined", 5), Rebalance(3_000, None, "m1 left", 6)),
        (Ownership("m1", "t-0", 0, 1_200), Ownership("m1", "t-1", 0, None),
         Ownership("m3", "t-0", 1_300, None), Ownership("gone", "t-2", 0, 1)))
    pic = timeline_svg.picture(tl, ["m1", "m3"], now_ms=4_000)
    assert [r.member_id for r in pic.rows] == ["m1", "m3"]
    m1, m3 = pic.rows
    assert m1.height >= 2 * timeline_svg.LANE_HEIGHT  # two partitions, two lanes
    bars = {(b.title.split(" held ")[0], b.label): b for b in pic.bars}
    assert set(bars) == {("m1", "t-0"), ("m1", "t-1"), ("m3", "t-0")}  # not "gone": not shown
    left, right = pic.plot_left, pic.plot_right
    assert bars[("m1", "t-1")].x == left and bars[("m1", "t-1")].x + bars[("m1", "t-1")].width \
        == pytest.approx(right)
    # m1 gave t-0 up at 1.2 s of 4 s, m3 took it at 1.3 s.
    assert bars[("m1", "t-0")].width == pytest.approx((right - left) * 0.3, abs=0.2)
    assert bars[("m3", "t-0")].x == pytest.approx(left + (right - left) * 1.3 / 4, abs=0.2)
    assert bars[("m3", "t-0")].y >= m3.y
    assert [b.label for b in pic.bands] == ["#1 400 ms", "#2 in progress"]
    assert pic.bands[1].open and not pic.bands[0].open
    assert "m3 joined" in pic.bands[0].title
    html = render.group_page(GroupDetail("g", "consumer", "Reconciling", 6, None, None,
                                         (MemberView("m1"), MemberView("m3")), (), tl),
                             now_ms=4_000)
    # The page draws "gone" too: it held t-2 and is no longer a member.
    assert html.count('class="held"') == 4 and html.count('class="rebalance"') == 2
    assert "(gone) gone" in html


def test_the_first_page_also_draws_members_that_are_gone() -> None:
    tl = Timeline((Rebalance(1_000, 1_400, "crashed left", 2),),
                  (Ownership("crashed", "t-0", 0, 1_000), Ownership("m1", "t-0", 1_400, None)))
    group = GroupDetail("g", "consumer", "Stable", 2, None, None, (MemberView("m1"),), (), tl)
    html = render.group_page(group, now_ms=2_000)
    assert html.count('class="member-row"') == 1
    assert html.count('class="member-row former"') == 1 and "(gone) crashed" in html
    assert html.count('class="held"') == 2
    pic = timeline_svg.picture(tl, ["m1"], now_ms=2_000)
    assert [r.member_id for r in pic.rows] == ["m1"]


def test_brokers_page_says_when_leases_are_not_shown() -> None:
    html = render.brokers_page(BrokersDetail("c1", (BrokerView(1, "h", 9092, None, True),)))
    assert 'id="no-leases"' in html and "<td>h</td>" in html


def test_brokers_page_lists_leases_with_holder_epoch_expiry_and_counts() -> None:
    leases = (Lease("__consumer_offsets-0", 2, 3, 4_200, "group", "__consumer_offsets"),
              Lease(f"{HOSTILE}-1", 1, 1, 900, None, HOSTILE),
              Lease("t-2", None, 5, -1_500, None, "t"),  # released
              Lease("t-3", 1, 2, -300, None, "t"))  # expired: nobody renews it
    html = render.brokers_page(BrokersDetail(
        "c1", (BrokerView(1, "h1", 9092), BrokerView(2, "h2", 9092)), leases))
    assert 'id="no-leases"' not in html and 'id="leases"' in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "in 4.2 s" in html and "expired 1.5 s ago" in html and "released" in html
    assert html.count('<tr class="lease dead">') == 2 and html.count('<tr class="lease">') == 2
    # Live leases held, per broker: node 1 one (t-3 expired), node 2 one.
    rows = re.findall(r'<td class="num">(\d+)</td><td>(h\d)</td>.*?'
                      r'<td class="num">(\d+)</td></tr>', html, re.S)
    assert [(n, h, c) for n, h, c in rows] == [("1", "h1", "1"), ("2", "h2", "1")]


def test_brokers_page_pages_many_leases_and_says_why_none_could_be_read() -> None:
    leases = tuple(Lease(f"t-{i}", 1, 1, 1_000, None, "t") for i in range(PAGE_SIZE + 5))
    detail = BrokersDetail("c1", (BrokerView(1, "h", 9092),), leases)
    assert render.brokers_page(detail, page=2).count('<tr class="lease">') == 5
    assert 'rel="next"' in render.brokers_page(detail)
    html = render.brokers_page(BrokersDetail("c1", (), None, "OperationalError: refused"))
    assert 'id="leases-error"' in html and "refused" in html and 'id="no-leases"' not in html


def test_lease_rows_become_topic_partitions_and_coordinator_shards() -> None:
    def row(topic: str | None, partition: int, owner: int | None = 1) -> LeaseRow:
        return LeaseRow(Resource("partition", f"0b9e2c4e-aaaa-4bbb-8ccc-000000000001-{partition}"),
                        owner, 2, 1_000, topic, partition)

    assert lease_view(row("__consumer_offsets", 4)).coordinator == "group"
    assert lease_view(row("__consumer_offsets", 4)).resource == "__consumer_offsets-4"
    assert lease_view(row("__transaction_state", 0)).coordinator == "transaction"
    data = lease_view(row("orders", 7))
    assert (data.resource, data.coordinator, data.holder, data.epoch) == ("orders-7", None, 1, 2)
    gone = lease_view(row(None, 3, owner=None))  # its topic was deleted; released
    assert gone.resource == "0b9e2c4e-aaaa-4bbb-8ccc-000000000001-3" and not gone.live
    other = lease_view(LeaseRow(Resource("broker", "5"), 5, 1, 10))
    assert other.resource == "broker 5" and other.coordinator is None
