"""The data source's options, read and checked once on the driver.

Why a module of its own: every mistake in an option must fail while Spark plans the query,
with a message that names the option, instead of as a task failure deep in an executor. So
the raw option map (case-insensitive strings, as Spark hands them over) is turned here into
frozen dataclasses of plain values; those are what readers, writers and input partitions
carry to the executors (they pickle trivially: no sockets, no loops).

The names mirror Spark's Kafka source so that a job ports by changing the format name:
`bootstrap.servers` (or `kafka.bootstrap.servers`), exactly one of `subscribe`,
`subscribePattern` and `assign`, `startingOffsets`, `endingOffsets`, `maxOffsetsPerTrigger`,
`failOnDataLoss`, `includeHeaders`, `minPartitions`; `group.id` (or `kafka.group.id`) turns on
group commits. Options Spark's Kafka source has but this source does not implement (the
timestamp-based starting points, Kafka consumer pools...) are refused by name rather than
silently ignored.

Security, as Spark's Kafka source takes it: Kafka's client properties with the `kafka.`
prefix (`kafka.security.protocol`, `kafka.sasl.mechanism`, `kafka.sasl.jaas.config`,
`kafka.ssl.truststore.location`, ...; librdkafka's `kafka.sasl.username`,
`kafka.ssl.ca.location`, ... too), read by `coterie.client.security`. A mistake is a
CoterieOptionError naming the `kafka.` option. Certificate and key files are named by path
and read where a connection is opened: on the driver (planning, offsets) and on every
executor (reads, writes), so the paths must exist on every node, as for Spark's Kafka source
(ship them with `--files` and name them relative to the working directory, or put them on
every node's disk).

Topic patterns are RE2 (google-re2, already a coterie dependency): linear-time matching, the
common Java-regex syntax, but no back-references or look-around. Like Spark's Kafka source
the pattern must match the whole topic name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import re2

from coterie.client.cluster import parse_bootstrap
from coterie.client.errors import SecuritySettingError
from coterie.client.security import SecuritySettings

EARLIEST = -2
LATEST = -1

#: Spark Kafka options this source refuses by name (see the module docstring).
UNSUPPORTED = ("startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp",
               "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy",
               "kafka.isolation.level")

DEFAULT_MAX_RECORDS_PER_PARTITION = 200_000
DEFAULT_FETCH_MAX_BYTES = 8 * 1024 * 1024


class CoterieOptionError(ValueError):
    """An option of the coterie data source is missing, contradictory or malformed."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"coterie data source: option '{option}' {problem}")
        self.option = option


#: {topic: {partition: offset}}, offset >= 0 or EARLIEST / LATEST.
PartitionOffsets = dict[str, dict[int, int]]


@dataclass(frozen=True, slots=True)
class Connect:
    """How to reach the brokers (shared by readers and writers)."""

    bootstrap: str
    client_id: str = "coterie-spark"
    request_timeout_ms: int = 30_000
    security: SecuritySettings = field(default_factory=SecuritySettings)


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """A reader's options, checked. Exactly one of subscribe / pattern / assign is set."""

    connect: Connect
    subscribe: tuple[str, ...] | None
    pattern: str | None
    assign: tuple[tuple[str, int], ...] | None
    starting: str | PartitionOffsets  # "earliest", "latest" or specific offsets
    ending: str | PartitionOffsets
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    include_headers: bool
    group_id: str | None
    min_partitions: int | None
    max_records_per_partition: int
    fetch_max_bytes: int

    def matches(self, topic: str) -> bool:
        """Is `topic` one this reader reads (for subscribe / pattern; assign names its own)?"""
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.pattern is not None:
            return re2.fullmatch(self.pattern, topic) is not None
        return self.assign is not None and any(t == topic for t, _ in self.assign)

    def named_topics(self) -> tuple[str, ...]:
        """Topics named outright (subscribe or assign): each must exist."""
        if self.subscribe is not None:
            return self.subscribe
        if self.assign is not None:
            return tuple(sorted({t for t, _ in self.assign}))
        return ()


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """A writer's options, checked."""

    connect: Connect
    topic: str | None  # the default topic for rows without a topic column (or null topic)
    acks: int
    batch_bytes: int


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise CoterieOptionError(name, f"must be true or false, got {raw!r}")
    return value == "true"


def _positive_int(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise CoterieOptionError(name, f"must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise CoterieOptionError(name, f"must be a positive integer, got {raw!r}")
    return value


def _connect(opts: dict[str, str]) -> Connect:
    servers = opts.get("bootstrap.servers") or opts.get("kafka.bootstrap.servers")
    if not servers:
        raise CoterieOptionError("bootstrap.servers",
                                 "is required (also accepted as kafka.bootstrap.servers)")
    try:
        parse_bootstrap(servers)
    except ValueError as e:
        raise CoterieOptionError("bootstrap.servers", f"is malformed: {e}") from None
    timeout = _positive_int(opts, "kafka.request.timeout.ms") or 30_000
    client_id = opts.get("kafka.client.id") or "coterie-spark"
    return Connect(servers, client_id, timeout, _security(opts))


def _security(opts: dict[str, str]) -> SecuritySettings:
    """The `kafka.`-prefixed security options as the client library's settings."""
    kafka = {k.removeprefix("kafka."): v for k, v in opts.items()
             if k.startswith(("kafka.security.", "kafka.ssl.", "kafka.sasl."))}
    try:
        return SecuritySettings.from_properties(kafka)
    except SecuritySettingError as e:
        raise CoterieOptionError(f"kafka.{e.setting}", e.problem) from None


def _topic_list(raw: str) -> tuple[str, ...]:
    topics = tuple(t.strip() for t in raw.split(",") if t.strip())
    if not topics:
        raise CoterieOptionError("subscribe", f"names no topic: {raw!r}")
    return topics


def _parse_assign(raw: str) -> tuple[tuple[str, int], ...]:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        raise CoterieOptionError("assign", f"is not JSON ({e.msg}): {raw!r}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise CoterieOptionError("assign", 'must be a JSON object like {"topic":[0,1]}, '
                                 f"got {raw!r}")
    out: list[tuple[str, int]] = []
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts):
            raise CoterieOptionError("assign", f"topic {topic!r} needs a list of partition "
                                     f"numbers, got {parts!r}")
        out.extend((topic, p) for p in parts)
    if not out:
        raise CoterieOptionError("assign", f"names no partition: {raw!r}")
    return tuple(sorted(set(out)))


def parse_offsets(name: str, raw: str) -> str | PartitionOffsets:
    """"earliest", "latest" or Spark's JSON form {"topic":{"0":23,"1":-2}} (-2 earliest,
    -1 latest)."""
    value = raw.strip()
    if value.lower() in ("earliest", "latest"):
        return value.lower()
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        raise CoterieOptionError(name, 'must be "earliest", "latest" or JSON like '
                                 f'{{"topic":{{"0":23}}}}, got {raw!r}') from None
    if not isinstance(parsed, dict) or not parsed:
        raise CoterieOptionError(name, f'must be a JSON object like {{"topic":{{"0":23}}}}, '
                                 f"got {raw!r}")
    out: PartitionOffsets = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise CoterieOptionError(name, f"topic {topic!r} needs an object of partition: "
                                     f"offset, got {parts!r}")
        for p, off in parts.items():
            if not str(p).isdigit() or not isinstance(off, int) or isinstance(off, bool) \
                    or off < EARLIEST:
                raise CoterieOptionError(name, f"has a bad entry {topic!r}: {{{p!r}: {off!r}}}"
                                         " (partition number: offset >= 0, -2 earliest or "
                                         "-1 latest)")
            out.setdefault(topic, {})[int(p)] = off
    return out


def read_options(options: Mapping[str, str], *, streaming: bool | None) -> ReadOptions:
    """Check a reader's options (raises CoterieOptionError naming the option). `streaming`
    None: the query's kind is not known yet (the data source's constructor); the checks that
    depend on it wait for the reader."""
    opts = _lower(options)
    for name in UNSUPPORTED:
        if name in opts:
            raise CoterieOptionError(name, "is not supported by the coterie data source")
    connect = _connect(opts)
    chosen = [n for n in ("subscribe", "subscribepattern", "assign") if opts.get(n)]
    if len(chosen) != 1:
        raise CoterieOptionError("subscribe", "(or subscribePattern or assign): exactly one "
                                 f"must be given, got {len(chosen)}")
    subscribe = pattern = assign = None
    if chosen[0] == "subscribe":
        subscribe = _topic_list(opts["subscribe"])
    elif chosen[0] == "subscribepattern":
        pattern = opts["subscribepattern"]
        try:
            re2.compile(pattern)
        except re2.error as e:
            raise CoterieOptionError("subscribePattern",
                                     f"is not a valid RE2 expression: {e}") from None
    else:
        assign = _parse_assign(opts["assign"])

    starting = parse_offsets("startingOffsets",
                             opts.get("startingoffsets", "latest" if streaming else "earliest"))
    ending: str | PartitionOffsets = "latest"
    if "endingoffsets" in opts:
        if streaming is True:
            raise CoterieOptionError("endingOffsets", "is for batch queries only")
        ending = parse_offsets("endingOffsets", opts["endingoffsets"])
    if streaming is False:
        if starting == "latest" or (isinstance(starting, dict) and any(
                o == LATEST for parts in starting.values() for o in parts.values())):
            raise CoterieOptionError("startingOffsets", "cannot be latest for batch queries")
        if ending == "earliest" or (isinstance(ending, dict) and any(
                o == EARLIEST for parts in ending.values() for o in parts.values())):
            raise CoterieOptionError("endingOffsets", "cannot be earliest for batch queries")
    max_per_trigger = _positive_int(opts, "maxOffsetsPerTrigger")
    group_id = opts.get("group.id") or opts.get("kafka.group.id") or None
    return ReadOptions(
        connect=connect, subscribe=subscribe, pattern=pattern, assign=assign,
        starting=starting, ending=ending, max_offsets_per_trigger=max_per_trigger,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        group_id=group_id,
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=(_positive_int(opts, "maxRecordsPerPartition")
                                   or DEFAULT_MAX_RECORDS_PER_PARTITION),
        fetch_max_bytes=(_positive_int(opts, "kafka.max.partition.fetch.bytes")
                         or DEFAULT_FETCH_MAX_BYTES),
    )


def write_options(options: Mapping[str, str]) -> WriteOptions:
    """Check a writer's options (raises CoterieOptionError naming the option)."""
    opts = _lower(options)
    connect = _connect(opts)
    acks_raw = opts.get("kafka.acks", "all").strip().lower()
    acks = {"all": -1, "-1": -1, "1": 1}.get(acks_raw)
    if acks is None:
        raise CoterieOptionError("kafka.acks", f"must be all, -1 or 1, got {acks_raw!r} "
                                 "(acks=0 would make the sink lose data silently)")
    batch_bytes = _positive_int(opts, "kafka.batch.size") or 1024 * 1024
    return WriteOptions(connect=connect, topic=opts.get("topic") or None, acks=acks,
                        batch_bytes=batch_bytes)
