"""librdkafka's own admin test, 0081-admin (issue 25), against a coterie broker with an
authorizer: it creates, describes and deletes topics, partitions, ACLs, configs, records,
groups, committed offsets and SCRAM users, as it does against Kafka in librdkafka's CI.

The broker runs Kafka's StandardAuthorizer with `super.users=User:ANONYMOUS` (the client
is the super user over PLAINTEXT, as in librdkafka's runs against a Kafka so configured)
and `group.initial.rebalance.delay.ms=0`, which saves about a minute of its group
sub-tests' joins (they pass with Kafka's default of 3 s too, slower).

Where the test comes from: librdkafka's sources are not checked in here. They are taken
from the npm package @confluentinc/kafka-javascript, which ships librdkafka's whole source
tree, tests included, in deps/librdkafka (version 1.10.1 bundles librdkafka 2.15.1, the
newest that any reachable package registry ships; confluent-kafka's sdist does not bundle
librdkafka). `COTERIE_LIBRDKAFKA_SRC` may name a librdkafka source tree to use instead
(a checkout of another version). The test builds, once, into
`~/.cache/coterie/librdkafka-<version>` (or `$COTERIE_LIBRDKAFKA_CACHE`): the static
library with SSL (SCRAM upsertions need OpenSSL) and nothing optional else, then a test
runner of librdkafka's own test.c and 0081-admin.c only, every other test's entry point
stubbed (they are never selected), at -O0. About 50 s on two cores; later runs reuse it.

It runs in quick mode (-Q: the admin APIs through a producer handle; the full test runs
them again through a consumer handle and takes twice as long), with
TEST_KAFKA_VERSION=4.2.1 so that every sub-test for Kafka 2.7 and later runs, one test at a
time (-p1) at librdkafka's base timeout multiplier of 1.0 (about 90 s instead of 130 s: its
waits for propagation are fixed sleeps scaled by the multiplier).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from tests.fixtures.coterie_broker import CoterieBroker

pytestmark = pytest.mark.timeout(900)

NPM_PACKAGE = "@confluentinc/kafka-javascript@1.10.1"
BUNDLED_VERSION = "2.15.1"
CONFIGURE = ["--disable-zstd", "--disable-gssapi", "--disable-curl", "--disable-lz4-ext",
             "--disable-zlib", "--enable-ssl", "--disable-debug-symbols",
             "--disable-optimization"]  # -O0: half the build time, and 0081 waits on I/O
RUNNER_SOURCES = ["test.c", "0081-admin.c", "rusage.c", "sockem.c", "sockem_ctrl.c"]
BROKER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
          "super.users": "User:ANONYMOUS", "group.initial.rebalance.delay.ms": "0"}
ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\(B")


def _run(cmd: list[str], cwd: Path, log: Path, timeout: float) -> None:
    with log.open("ab") as out:
        out.write(f"$ {' '.join(cmd)}\n".encode())
        out.flush()
        done = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout, check=False)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-4000:]
        pytest.fail(f"{' '.join(cmd)} failed ({done.returncode}); {log}:\n{tail}")


def _version(src: Path) -> str:
    header = (src / "src" / "rdkafka.h").read_text()
    number = int(re.search(r"#define RD_KAFKA_VERSION\s+0x([0-9a-fA-F]+)", header)[1], 16)
    return f"{number >> 24 & 0xff}.{number >> 16 & 0xff}.{number >> 8 & 0xff}"


def _fetch_sources(into: Path, log: Path) -> Path:
    """librdkafka's source tree from the npm package (module docstring)."""
    if shutil.which("npm") is None:
        pytest.skip("librdkafka's 0081 test needs npm on PATH to fetch librdkafka's sources "
                    "(or COTERIE_LIBRDKAFKA_SRC naming a librdkafka source tree)")
    _run(["npm", "pack", "--silent", NPM_PACKAGE, "--pack-destination", str(into)], into,
         log, 300)
    (packed,) = into.glob("*.tgz")
    with tarfile.open(packed) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith("package/deps/librdkafka/")]
        tar.extractall(into, members=members, filter="data")
    packed.unlink()
    return into / "package" / "deps" / "librdkafka"


def _stubs(test_c: str) -> str:
    """An entry point for every test test.c declares but 0081: never selected here."""
    names = re.findall(r"^_TEST_DECL\((\w+)\);", test_c, re.MULTILINE)
    return "".join(f"int main_{n}(int argc, char **argv) {{ (void)argc; (void)argv; "
                   f"return 0; }}\n" for n in names if n != "0081_admin")


def _build(src: Path, work: Path, log: Path) -> Path:
    """The static library and a runner of test.c and 0081-admin.c only, in `work`."""
    # --enable-ssl fails configure without OpenSSL's headers (libssl-dev), saying so.
    _run(["./configure", *CONFIGURE], src, log, 300)
    _run(["make", "-j", str(os.cpu_count() or 2), "librdkafka.a"], src / "src", log, 1200)
    tests = src / "tests"
    (work / "stubs.c").write_text(_stubs((tests / "test.c").read_text()))
    objects = []
    for source in [*(tests / s for s in RUNNER_SOURCES), work / "stubs.c"]:
        obj = work / (source.stem + ".o")
        _run(["gcc", "-O0", "-fPIC", "-w", f"-I{src / 'src'}", f"-I{tests}", "-c",
              str(source), "-o", str(obj)], tests, log, 600)
        objects.append(str(obj))
    runner = work / "test-runner"
    _run(["gcc", "-rdynamic", "-o", str(runner), *objects, str(src / "src" / "librdkafka.a"),
          "-lm", "-lssl", "-lcrypto", "-ldl", "-lpthread", "-lrt"], work, log, 600)
    return runner


def _cache_root() -> Path:
    default = Path.home() / ".cache" / "coterie"
    return Path(os.environ.get("COTERIE_LIBRDKAFKA_CACHE", default))


@pytest.fixture(scope="module")
def runner() -> Path:
    """librdkafka's test runner with 0081, built once into the cache (module docstring)."""
    given = os.environ.get("COTERIE_LIBRDKAFKA_SRC")
    version = _version(Path(given)) if given else BUNDLED_VERSION
    done = _cache_root() / f"librdkafka-{version}" / "test-runner"
    if done.exists():
        return done
    missing = [t for t in ("gcc", "make") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"librdkafka's 0081 test needs {' and '.join(missing)} on PATH to build "
                    "librdkafka's test runner")
    done.parent.parent.mkdir(parents=True, exist_ok=True)
    # Built aside and moved in whole, so a build cut short is never taken for a done one.
    work = Path(tempfile.mkdtemp(prefix=f"librdkafka-{version}.", dir=done.parent.parent))
    log = work / "build.log"
    if given:
        src = work / "librdkafka"
        shutil.copytree(given, src, ignore=shutil.ignore_patterns(".git", "*.o", "*.a"))
    else:
        src = _fetch_sources(work, log)
        assert _version(src) == version, f"{NPM_PACKAGE} bundles librdkafka {_version(src)}"
    built = _build(src, work, log)
    shutil.rmtree(src.parents[1] if not given else src)  # the sources are not kept
    try:
        work.rename(done.parent)
    except OSError:  # another run moved its own build in first
        shutil.rmtree(work, ignore_errors=True)
        return done
    return done.parent / built.name


def test_librdkafka_0081_admin_passes(runner: Path, tmp_path: Path) -> None:
    broker = CoterieBroker(tmp_path / "data", config=BROKER)
    broker.start()
    try:
        # librdkafka's base timeout multiplier (1.0): its runner otherwise raises it for the
        # concurrency it would run tests at, which stretches 0081's fixed "wait for
        # propagation" sleeps (2 s each, to 5 s) that a single broker does not need.
        (tmp_path / "test.conf").write_text(f"bootstrap.servers={broker.bootstrap}\n"
                                            "test.timeout.multiplier=1.0\n")
        env = {**os.environ, "TESTS": "0081", "TEST_KAFKA_VERSION": "4.2.1",
               "RDKAFKA_TEST_CONF": str(tmp_path / "test.conf")}
        done = subprocess.run([str(runner), "-Q", "-p1"], cwd=tmp_path, env=env, timeout=600,
                              capture_output=True, check=False)
    finally:
        broker.stop()
    output = ANSI.sub("", (done.stdout + done.stderr).decode(errors="replace"))
    failures = [line for line in output.splitlines()
                if "FAIL" in line or "assertion failed" in line.lower()]
    assert done.returncode == 0, (
        f"0081 exited {done.returncode}:\n" + "\n".join(failures[-20:]) +
        f"\n...\n{output[-3000:]}\ncoterie's log: {broker.log_path}")
    assert re.search(r"\|\s*0081_admin\s*\|\s*PASSED\s*\|", output), output[-3000:]
    passed = re.findall(r": PASS \(", output)
    assert len(passed) >= 50, f"only {len(passed)} sub-tests passed:\n{output[-3000:]}"
