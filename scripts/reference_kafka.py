#!/usr/bin/env python3
"""Fetch and run a pinned Apache Kafka release as the reference broker for coterie.

The reference broker is a single KRaft node (broker and controller in one JVM) on loopback.
Its jars are resolved with Maven from Maven Central into a per-version cache directory, so
nothing but `java` and `mvn` has to be installed. This module is used three ways:

* as a command, through the `scripts/reference-kafka` wrapper (or `python3 reference_kafka.py`):
  `fetch` downloads the jars, `start --port P --data-dir D` formats and runs a broker in the
  foreground;
* by the pytest plugin `tests/fixtures/reference_broker.py` (the `reference_kafka` fixture);
* by `benchmarks/produce_consume.py`.

Only the standard library is used, so the command works outside the project's venv.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

# The pinned release. Every artifact below must exist at this version in Maven Central.
KAFKA_VERSION = "4.2.1"
SCALA_VERSION = "2.13"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

# Main classes inside kafka_<scala>-<version>.jar.
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
SERVER_MAIN = "kafka.Kafka"

DEFAULT_HEAP = "512m"
HOST = "127.0.0.1"
COMPLETE_MARKER = ".complete"

_POM_TEMPLATE = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Throwaway project used only to resolve the reference broker's runtime classpath. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>coterie.reference</groupId>
  <artifactId>reference-kafka-classpath</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""

_DEPENDENCY_TEMPLATE = """    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>"""

# log4j2 configuration for the broker JVM: everything at INFO to stdout, chatty packages quieter.
_LOG4J2_PROPERTIES = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
logger.raft.name = org.apache.kafka.raft
logger.raft.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class ReferenceKafkaError(RuntimeError):
    """Anything that keeps the reference broker from being fetched or started."""


class ToolMissingError(ReferenceKafkaError):
    """`java` or `mvn` is not on PATH."""


# --------------------------------------------------------------------------- locations


def kafka_version() -> str:
    """The Kafka version to use: $COTERIE_KAFKA_VERSION if set, else the pinned one."""
    return os.environ.get("COTERIE_KAFKA_VERSION") or KAFKA_VERSION


def cache_root() -> Path:
    """Root of the jar cache: $COTERIE_KAFKA_CACHE if set, else ~/.cache/coterie."""
    configured = os.environ.get("COTERIE_KAFKA_CACHE")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "coterie"


def lib_dir(version: str | None = None, jar_set: str = "lib") -> Path:
    """Directory holding one set of jars of one Kafka version: <cache root>/kafka-<version>/
    <set>, where "lib" is the broker with its tools, "streams" is Kafka Streams with its
    client and "connect" a Kafka Connect worker with the file connectors (see `JAR_SETS`)."""
    return cache_root() / f"kafka-{version or kafka_version()}" / jar_set


def missing_tools(tools: Sequence[str] = ("java", "mvn")) -> list[str]:
    return [t for t in tools if shutil.which(t) is None]


def require_tools(tools: Sequence[str] = ("java", "mvn")) -> None:
    missing = missing_tools(tools)
    if missing:
        hints = {"java": "java (a JDK 17+)", "mvn": "mvn (Apache Maven 3.6+)"}
        raise ToolMissingError(
            f"reference-kafka needs {' and '.join(hints.get(t, t) for t in missing)} on PATH"
        )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- fetching


# Named sets of artifacts, each resolved with its runtime dependencies into its own directory:
# the broker and its command-line tools; Kafka Streams (an application's classpath, kept apart
# so that the broker's classpath stays what a Kafka distribution ships); Kafka Connect's worker
# with the file connectors (a distributed worker's classpath, kept apart for the same reason).
# Entries are (group, artifact, version); version None means the Kafka version in use. Kafka
# Streams and Connect's poms leave the logging backend to the application: slf4j-simple
# (stderr) matches the slf4j-api 1.7 they depend on.
JAR_SETS: dict[str, tuple[tuple[str, str, str | None], ...]] = {
    "lib": (("org.apache.kafka", f"kafka_{SCALA_VERSION}", None),
            ("org.apache.kafka", "kafka-tools", None)),
    "streams": (("org.apache.kafka", "kafka-streams", None),
                ("org.slf4j", "slf4j-simple", "1.7.36")),
    "connect": (("org.apache.kafka", "connect-runtime", None),
                # connect-file 4.2.1 could not be resolved from the Maven repository
                # used here (4.2.0 could): its two file connectors depend on connect-api
                # alone, which resolves at 4.2.1, and run on the 4.2.1 worker.
                ("org.apache.kafka", "connect-file", "4.2.0"),
                ("org.apache.kafka", "connect-json", None),
                ("org.apache.kafka", "connect-api", None),
                ("org.apache.kafka", "connect-transforms", None),
                ("org.apache.kafka", "kafka-clients", None),
                ("org.slf4j", "slf4j-simple", "1.7.36")),
}


def _artifacts(version: str, jar_set: str = "lib") -> list[tuple[str, str, str]]:
    return [(group, artifact, pinned or version)
            for group, artifact, pinned in JAR_SETS[jar_set]]


def _run_maven(args: list[str], cwd: Path) -> None:
    cmd = ["mvn", "-q", "-B", *args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise ReferenceKafkaError(f"mvn failed ({' '.join(cmd)}):\n{tail}")


def _add_slf4j_binding(staging: Path, workdir: Path) -> None:
    """Kafka's poms leave the logging backend binding to the distribution; add the one
    matching the resolved log4j-core so the broker's log is not silently dropped."""
    names = [p.name for p in staging.glob("*.jar")]
    if any(n.startswith(("log4j-slf4j-impl-", "log4j-slf4j2-impl-")) for n in names):
        return
    core = sorted(n for n in names if n.startswith("log4j-core-"))
    slf4j = sorted(n for n in names if n.startswith("slf4j-api-"))
    if not core or not slf4j:
        return
    log4j_version = core[-1].removeprefix("log4j-core-").removesuffix(".jar")
    binding = "log4j-slf4j2-impl" if slf4j[-1].startswith("slf4j-api-2.") else "log4j-slf4j-impl"
    _run_maven(
        [
            f"{DEPENDENCY_PLUGIN}:copy",
            f"-Dartifact=org.apache.logging.log4j:{binding}:{log4j_version}",
            f"-DoutputDirectory={staging}",
        ],
        workdir,
    )


def fetch(version: str | None = None, log=None, jar_set: str = "lib") -> Path:
    """Resolve one set of Kafka's jars (`JAR_SETS`) into the cache (idempotent) and return
    its directory."""
    version = version or kafka_version()
    lib = lib_dir(version, jar_set)
    if (lib / COMPLETE_MARKER).exists():
        return lib
    require_tools(("mvn",))
    if log:
        log(f"reference-kafka: fetching Apache Kafka {version} jars from Maven Central into {lib}")
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="coterie-kafka-fetch-") as tmp:
        workdir = Path(tmp)
        deps = "\n".join(
            _DEPENDENCY_TEMPLATE.format(group=g, artifact=a, version=v)
            for g, a, v in _artifacts(version, jar_set)
        )
        (workdir / "pom.xml").write_text(_POM_TEMPLATE.format(dependencies=deps))
        staging = lib.parent / f"lib.partial-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            _run_maven(
                [
                    f"{DEPENDENCY_PLUGIN}:copy-dependencies",
                    "-DincludeScope=runtime",
                    f"-DoutputDirectory={staging}",
                ],
                workdir,
            )
            _add_slf4j_binding(staging, workdir)
            (staging / COMPLETE_MARKER).write_text(f"kafka {version} {jar_set}\n")
            if (lib / COMPLETE_MARKER).exists():  # another process finished first
                return lib
            shutil.rmtree(lib, ignore_errors=True)
            staging.rename(lib)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return lib


# --------------------------------------------------------------------------- configuring


def new_cluster_id() -> str:
    """A random KRaft cluster id: 16 random bytes, URL-safe base64 without padding."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):  # would read like a command-line flag
            return cid


def server_properties(
    port: int,
    controller_port: int,
    data_dir: Path,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Configuration of a single combined broker+controller node on loopback."""
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data_dir / "kraft-logs"),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
    }
    props.update(overrides or {})
    return props


def parse_overrides(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ReferenceKafkaError(f"--override wants key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def java_command(lib: Path, main: str, args: Sequence[str], data_dir: Path,
                 heap: str = DEFAULT_HEAP) -> list[str]:
    return [
        "java",
        f"-Xmx{heap}",
        "-Xms128m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={data_dir / 'log4j2.properties'}",
        "-cp",
        f"{lib}{os.sep}*",
        main,
        *args,
    ]


def prepare(
    port: int,
    data_dir: Path,
    controller_port: int | None = None,
    overrides: Mapping[str, str] | None = None,
    version: str | None = None,
    heap: str = DEFAULT_HEAP,
    format_args: Sequence[str] = (),
) -> list[str]:
    """Fetch jars, write configs into data_dir, format the storage once, and return the
    command line that runs the broker. `format_args` are added to the storage tool's
    `format` (e.g. `--add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]'`: a
    secured broker's first SCRAM user exists only if it is written at format time)."""
    require_tools(("java",))
    lib = fetch(version)
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    controller_port = controller_port or free_port()
    props = server_properties(port, controller_port, data_dir, overrides)
    props_path = data_dir / "server.properties"
    props_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    (data_dir / "log4j2.properties").write_text(_LOG4J2_PROPERTIES)
    log_dirs = [Path(d) for d in props["log.dirs"].split(",")]
    if not all((d / "meta.properties").exists() for d in log_dirs):
        fmt = java_command(
            lib,
            STORAGE_TOOL_MAIN,
            ["format", "--cluster-id", new_cluster_id(), "--config", str(props_path),
             "--ignore-formatted", *format_args],
            data_dir,
            heap="256m",
        )
        proc = subprocess.run(fmt, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ReferenceKafkaError(
                f"formatting {data_dir} failed:\n{(proc.stdout + proc.stderr).strip()}"
            )
    return java_command(lib, SERVER_MAIN, [str(props_path)], data_dir, heap=heap)


# --------------------------------------------------------------------------- command line


def _cmd_fetch(args: argparse.Namespace) -> int:
    lib = fetch(args.kafka_version, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(lib)
    return 0


def _cmd_start(args: argparse.Namespace) -> int:
    require_tools(("java",))
    overrides = {}
    if args.no_rebalance_delay:
        overrides["group.initial.rebalance.delay.ms"] = "0"
    overrides.update(parse_overrides(args.override))
    data_dir = Path(args.data_dir)
    fetch(args.kafka_version, log=lambda m: print(m, file=sys.stderr, flush=True))
    format_args = [arg for spec in args.add_scram for arg in ("--add-scram", spec)]
    cmd = prepare(args.port, data_dir, args.controller_port, overrides, args.kafka_version,
                  args.heap, format_args)
    version = args.kafka_version or kafka_version()
    print(f"reference-kafka: Apache Kafka {version} bootstrap {HOST}:{args.port} "
          f"(data {data_dir.resolve()})", flush=True)
    os.execvp(cmd[0], cmd)  # the broker replaces this process and runs in the foreground
    return 0  # pragma: no cover


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="reference-kafka",
        description="Fetch and run the pinned Apache Kafka reference broker (single KRaft node).",
    )
    parser.add_argument("--kafka-version", default=None,
                        help=f"Kafka version (default $COTERIE_KAFKA_VERSION or {KAFKA_VERSION})")
    sub = parser.add_subparsers(dest="command", required=True)

    p_fetch = sub.add_parser("fetch", help="download the jars into the cache (idempotent)")
    p_fetch.set_defaults(func=_cmd_fetch)

    p_start = sub.add_parser("start", help="format and run a broker in the foreground")
    p_start.add_argument("--port", type=int, required=True, help="PLAINTEXT listener port")
    p_start.add_argument("--data-dir", required=True, help="directory for config and logs")
    p_start.add_argument("--controller-port", type=int, default=None,
                         help="KRaft controller port (default: a free port)")
    p_start.add_argument("--heap", default=DEFAULT_HEAP, help="JVM max heap (default 512m)")
    p_start.add_argument("--no-rebalance-delay", action="store_true",
                         help="set group.initial.rebalance.delay.ms=0")
    p_start.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                         help="extra broker property; repeatable")
    p_start.add_argument("--add-scram", action="append", default=[], metavar="CREDENTIAL",
                         help="a SCRAM user written when the storage is formatted, e.g. "
                              "'SCRAM-SHA-512=[name=admin,password=admin-secret]'; repeatable")
    p_start.set_defaults(func=_cmd_start)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ReferenceKafkaError as exc:
        msg = str(exc) if isinstance(exc, ToolMissingError) else f"reference-kafka: {exc}"
        print(msg, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
