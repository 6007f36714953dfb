"""The README's examples, run as written against a real broker.

Each ```python block of the README's "Quickstart" (producers with default settings, which
are idempotent for kafka-python) and "Member library" sections is run in a fresh interpreter
with only the bootstrap address changed (the README says 127.0.0.1:9092, the test broker
listens on a free port), against a broker with default settings, as `make run` starts it. A
README example that no longer runs, or no longer prints what it promises, fails here.
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
