"""The README's examples, run as written against a real broker.

Each ```python block of the README's "Quickstart" (producers with default settings, which
are idempotent for kafka-python) and "Member library" sections is run in a fresh interpreter
with only the bootstrap address changed (the README says 127.0.0.1:9092, the test broker
listens on a free port), against a broker with default settings, as `make run` starts it. A
README example that no longer runs, or no longer prints what it promises, fails here. The
"What an operator sees" commands (`coterie serve` with the console and metrics, `coterie groups
describe`, `coterie groups timeline`) are run the same way.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _member_library_examples() -> list[str]:
    text = README.read_text()
    section = text.split("## Member library", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def _quickstart_examples() -> list[str]:
    text = README.read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


EXAMPLES = _member_library_examples()
QUICKSTART = _quickstart_examples()

# What each example must print (one regular expression per line that must appear).
EXPECTED = {
    "GroupMember": [r"alice: generation \d+: alice,bob", r"bob: generation \d+: alice,bob",
                    r"leader: (alice|bob) MemberState.STABLE"],
    "LeaderElection": [r"writing with fencing token \d+", r"the leader is host-[ab]:8080",
                       r"now: \d+ True"],
    "TaskDistribution": [r"\[\(('connector-\d',? ?){2}\), \(('connector-\d',? ?){4}\)\]",
                         r"^\(('connector-\d',? ?){6}\)$"],
    "Consumer": [r"assigned \[", r"orders 0 9 b'k9' b'order 9'"],
}


def _kind(code: str) -> str:
    for kind in ("GroupMember", "LeaderElection", "TaskDistribution", "Consumer"):
        if f"import {kind}" in code or f"import {kind}," in code or f", {kind}" in code:
            return kind
    raise AssertionError(f"unrecognised README example:\n{code[:200]}")


def test_the_readme_has_one_example_per_api() -> None:
    assert sorted(_kind(c) for c in EXAMPLES) == sorted(EXPECTED)


@pytest.mark.parametrize("code", EXAMPLES, ids=[_kind(c) for c in EXAMPLES])
def test_readme_example_runs(code: str, coterie_factory: Callable[..., Any],
                             tmp_path: Path) -> None:
    broker = coterie_factory()
    script = tmp_path / "example.py"
    script.write_text(code.replace("127.0.0.1:9092", broker.bootstrap))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    for pattern in EXPECTED[_kind(code)]:
        assert re.search(pattern, done.stdout, re.MULTILINE), (
            f"{pattern!r} not in output:\n{done.stdout}")


def test_the_quickstart_has_both_python_clients() -> None:
    assert len(QUICKSTART) == 2
    assert "confluent_kafka" in QUICKSTART[0] and "from kafka import" in QUICKSTART[1]
    assert "idempotence" not in QUICKSTART[1].replace("# idempotent, as by default", "")


def test_quickstart_examples_run_in_order(coterie_factory: Callable[..., Any],
                                          tmp_path: Path) -> None:
    """Both blocks against one broker, as a reader would paste them: the second producer's
    record lands after the first one's, and the consumers print them."""
    broker = coterie_factory()
    outputs = []
    for i, code in enumerate(QUICKSTART):
        script = tmp_path / f"quickstart{i}.py"
        script.write_text(code.replace("127.0.0.1:9092", broker.bootstrap))
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout)
    assert "b'hello'" in outputs[0], outputs[0]
    assert re.search(r"^1 b'k' b'hello again'$", outputs[1], re.MULTILINE), outputs[1]


def _operator_commands() -> list[str]:
    text = README.read_text()
    section = text.split("### What an operator sees", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines()
            if line.startswith("    coterie ")]


def test_the_operator_commands_run_as_written(coterie_factory: Callable[..., Any]) -> None:
    """The README's operator block: `coterie serve` with the console and the metrics turned
    on (their ports changed to free ones), `coterie groups describe ... --output json` of a
    group, the group's timeline, the console's group page and the group's series."""
    import json
    import urllib.request

    from confluent_kafka import Consumer, Producer, TopicPartition

    from tests.fixtures.coterie_broker import free_port

    serve, describe, timeline = _operator_commands()
    overrides = dict(kv.split("=", 1) for kv in re.findall(r"--override (\S+)", serve))
    assert set(overrides) == {"console.listen", "metrics.listen"}
    console, metrics = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    broker = coterie_factory(config={"console.listen": console, "metrics.listen": metrics,
                                     "group.initial.rebalance.delay.ms": "0"})
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        p.produce("readme-ops", value=b"v%d" % i, partition=0)
    p.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "my-group",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe(["readme-ops"])
    got = 0
    for _ in range(60):
        msg = c.poll(1)
        if msg is not None and msg.error() is None:
            got += 1
            if got == 3:
                c.commit(offsets=[TopicPartition("readme-ops", 0, 3)], asynchronous=False)
                break

    def run(line: str) -> str:
        argv = line.split("#", 1)[0].replace("127.0.0.1:9092", broker.bootstrap).split()
        if "--bootstrap-server" not in argv:
            argv += ["--bootstrap-server", broker.bootstrap]
        done = subprocess.run([sys.executable, "-m", "coterie", *argv[1:]],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stderr}"
        return done.stdout

    try:
        described = json.loads(run(describe))
        assert described["group"] == "my-group" and len(described["members"]) == 1
        [part] = described["partitions"]
        assert (part["topic"], part["committed_offset"], part["log_end_offset"],
                part["lag"]) == ("readme-ops", 3, 5, 2)
        assert "+readme-ops-0" in run(timeline)  # the first rebalance gave it to the member
        with urllib.request.urlopen(f"http://{console}/groups/my-group", timeout=30) as page:
            assert page.status == 200 and "readme-ops" in page.read().decode()
        with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=30) as scrape:
            assert 'coterie_group_members{group="my-group"' in scrape.read().decode()
    finally:
        c.close()
