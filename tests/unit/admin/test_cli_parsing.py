"""The pure parts of `coterie produce` / `coterie consume`: input lines and output lines."""

from __future__ import annotations

import json
import re

import pytest

from coterie.cli.consume import record_json, record_text
from coterie.cli.produce import BadLine, parse_json_line, parse_text_line
from coterie.client.records import ConsumerRecord


def test_text_lines_split_at_the_first_separator() -> None:
    assert parse_text_line("k:v:w", 1, ":") == (b"k", b"v:w", [], None)
    assert parse_text_line("", 1, None) == (None, b"", [], None)
    with pytest.raises(BadLine, match="line 7: no key separator"):
        parse_text_line("nothing", 7, ":")


def test_json_lines() -> None:
    assert parse_json_line('{"value": "v"}', 1) == (None, b"v", [], None)
    assert parse_json_line(json.dumps({"key": "k", "value": None, "partition": 2,
                                       "headers": {"a": "1", "b": None}}), 1) == (
        b"k", None, [("a", b"1"), ("b", None)], 2)
    listed = parse_json_line(json.dumps({"value": "v", "headers": [
        {"key": "a", "value": "1"}, {"key": "a", "value": "2"}], "topic": "x", "offset": 3,
        "timestamp": 4}), 1)
    assert listed[2] == [("a", b"1"), ("a", b"2")]


@pytest.mark.parametrize(("line", "problem"), [
    ("{", "not JSON"), ("[]", "a JSON object is expected"),
    ('{"value": 1}', "value must be a string or null"),
    ('{"value": "v", "extra": 1}', "unknown field(s) extra"),
    ('{"value": "v", "partition": -1}', "partition must be"),
    ('{"value": "v", "partition": true}', "partition must be"),
    ('{"value": "v", "headers": 3}', "headers must be"),
    ('{"value": "v", "headers": [{"value": "x"}]}', "each header must be"),
])
def test_bad_json_lines_name_the_line(line: str, problem: str) -> None:
    with pytest.raises(BadLine, match=re.escape(f"line 3: {problem}")):
        parse_json_line(line, 3)


def test_output_lines() -> None:
    r = ConsumerRecord("t", 1, 5, 1000, 0, b"k", b"\xff", (("h", b"v"), ("n", None)))
    assert record_text(r, print_key=True, print_headers=True, separator="|") == \
        "h:v,n:null|k|\ufffd"
    bare = ConsumerRecord("t", 0, 0, 0, 0, None, None)
    assert record_text(bare, print_key=True, print_headers=True, separator="\t") == \
        "NO_HEADERS\tnull\tnull"
    doc = json.loads(record_json(r))
    assert doc == {"topic": "t", "partition": 1, "offset": 5, "timestamp": 1000, "key": "k",
                   "value": "\ufffd", "headers": [{"key": "h", "value": "v"},
                                                  {"key": "n", "value": None}]}
    # What consume prints, produce takes.
    assert parse_json_line(record_json(r), 1)[2] == [("h", b"v"), ("n", None)]


def test_since() -> None:
    from coterie.cli.timeline import parse_since

    now = 1_000_000.0
    assert parse_since("90s", now) == 999_910_000
    assert parse_since("2h", now) == (1_000_000 - 7200) * 1000
    assert parse_since("500ms", now) == 999_999_500
    assert parse_since("1970-01-02T00:00:00Z", now) == 86_400_000
    assert parse_since("1970-01-02T00:00:00", now) == 86_400_000  # UTC without a zone
    with pytest.raises(SystemExit) as stop:
        parse_since("yesterday", now)
    assert stop.value.code == 1
