"""The PostgreSQL schema of coterie's storage, as an ordered list of migrations.

Why migrations rather than one CREATE script: a database outlives the coterie that created
it. Each change to the schema is appended here as the next version and never edited once
released; `migrations.migrate` applies, in order, the ones a database lacks, and records each
in `schema_version`. A database at a version newer than the last one here was migrated by a
newer coterie, and this one refuses it (errors.SchemaTooNew).

The reasons behind each table and index are in docs/storage-postgresql.md; in short:

- `batches` holds one row per Kafka record batch, its bytes exactly as a producer sent them
  (only baseOffset and partitionLeaderEpoch rewritten), so a fetch concatenates rows and
  re-encodes nothing. The header fields a broker needs without opening the bytes are columns.
  `byte_position` is where the batch would start in one endless file of the partition (the
  sum of the sizes of every batch before it): a fetch's max_bytes becomes an index range on
  it. `running_max_timestamp` is the largest maxTimestamp of the partition up to this batch:
  it never decreases with the offset, so it is a time index, and "the first batch with a
  timestamp >= T" is one index lookup, as with Kafka's .timeindex files.
- `partitions` holds each partition's counters (log start, next offset, next byte position,
  largest timestamp); an append locks its row, which orders appends to one partition.
- `leases` and `brokers`: who serves what, until when (database time), at which epoch.
- `producer_id_blocks`: the blocks of producer ids handed to brokers, never twice.
- `cluster`: the cluster id every broker on the database answers with.
- `share_states` and `share_state_entries`: the durable state of KIP-932 share partitions,
  per group and partition, as the opaque entries its leader wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MIGRATIONS", "Migration", "latest_version"]


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema version: its number (1, 2, ... with no gap), what it changes, its SQL."""

    version: int
    summary: str
    sql: str


_V1 = """
CREATE TABLE topics (
    topic_id        uuid PRIMARY KEY,
    name            text NOT NULL UNIQUE,
    partition_count integer NOT NULL CHECK (partition_count > 0),
    configs         jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(configs) = 'object'),
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE partitions (
    topic_id         uuid NOT NULL REFERENCES topics (topic_id) ON DELETE CASCADE,
    partition        integer NOT NULL CHECK (partition >= 0),
    log_start_offset bigint NOT NULL DEFAULT 0,
    next_offset      bigint NOT NULL DEFAULT 0,
    next_position    bigint NOT NULL DEFAULT 0,
    max_timestamp    bigint NOT NULL DEFAULT -1,
    leader_epoch     integer NOT NULL DEFAULT -1,
    PRIMARY KEY (topic_id, partition),
    CHECK (0 <= log_start_offset AND log_start_offset <= next_offset)
);

CREATE TABLE batches (
    topic_id              uuid NOT NULL,
    partition             integer NOT NULL,
    base_offset           bigint NOT NULL,
    last_offset           bigint NOT NULL,
    byte_position         bigint NOT NULL,
    size                  integer NOT NULL,
    max_timestamp         bigint NOT NULL,
    running_max_timestamp bigint NOT NULL,
    leader_epoch          integer NOT NULL,
    producer_id           bigint NOT NULL,
    producer_epoch        smallint NOT NULL,
    base_sequence         integer NOT NULL,
    record_count          integer NOT NULL,
    is_transactional      boolean NOT NULL,
    is_control            boolean NOT NULL,
    data                  bytea NOT NULL,
    PRIMARY KEY (topic_id, partition, base_offset),
    FOREIGN KEY (topic_id, partition) REFERENCES partitions ON DELETE CASCADE,
    CHECK (last_offset >= base_offset)
);
-- Producers compress their batches themselves; compressing them again costs CPU for nothing.
ALTER TABLE batches ALTER COLUMN data SET STORAGE EXTERNAL;
-- Fetch: the batch holding an offset (the first whose last offset reaches it) ...
CREATE INDEX batches_by_last_offset ON batches (topic_id, partition, last_offset);
-- ... then the batches within max_bytes of it; and retention by size.
CREATE INDEX batches_by_position ON batches (topic_id, partition, byte_position);
-- ListOffsets by timestamp and retention by time.
CREATE INDEX batches_by_time ON batches (topic_id, partition, running_max_timestamp, base_offset);

CREATE TABLE brokers (
    node_id       integer PRIMARY KEY CHECK (node_id >= 0),
    host          text NOT NULL,
    port          integer NOT NULL CHECK (port BETWEEN 0 AND 65535),
    rack          text,
    incarnation   uuid NOT NULL,
    registered_at timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL
);

CREATE TABLE leases (
    kind       text NOT NULL,
    name       text NOT NULL,
    owner      integer,
    epoch      integer NOT NULL CHECK (epoch > 0),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (kind, name)
);
CREATE INDEX leases_by_owner ON leases (owner) WHERE owner IS NOT NULL;

CREATE TABLE producer_id_blocks (
    first_id     bigint PRIMARY KEY CHECK (first_id >= 0),
    block_size   integer NOT NULL CHECK (block_size > 0),
    node_id      integer NOT NULL,
    allocated_at timestamptz NOT NULL DEFAULT now()
);
"""

# The cluster's identity: one row, written by the first broker that starts on the database
# (its cluster id is what Metadata and DescribeCluster answer on every broker).
_V2 = """
CREATE TABLE cluster (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    cluster_id text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
"""

# Groups' own configs (the GROUP config resource): one row per group that has any, the whole
# set as a JSON object as for topics. Every broker adopts them, whichever coordinates the
# group and whichever an operator altered them through. And the cluster-wide dynamic broker
# configs (the BROKER resource named ""): one row, adopted by every broker the same way.
_V3 = """
CREATE TABLE group_configs (
    group_id text PRIMARY KEY,
    configs  jsonb NOT NULL
);

CREATE TABLE cluster_broker_configs (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    configs   jsonb NOT NULL
);
"""

# Each broker's listeners (coterie.broker.listeners): the advertised address of every
# listener by its name, so that a client is told the addresses of the listener it uses.
_V4 = """
ALTER TABLE brokers ADD COLUMN listeners jsonb NOT NULL DEFAULT '{}'::jsonb
    CHECK (jsonb_typeof(listeners) = 'object');
"""

# Security (issue 25): SCRAM credentials, one row per user and mechanism, holding only
# what RFC 5802 has a server keep (the salt, the iteration count, StoredKey and ServerKey;
# never the password); and the ACLs, one row per binding, Kafka's enum codes as numbers.
_V5 = """
CREATE TABLE scram_credentials (
    user_name  text NOT NULL,
    mechanism  smallint NOT NULL,
    salt       bytea NOT NULL,
    iterations integer NOT NULL CHECK (iterations > 0),
    stored_key bytea NOT NULL,
    server_key bytea NOT NULL,
    PRIMARY KEY (user_name, mechanism)
);

CREATE TABLE acls (
    resource_type   smallint NOT NULL,
    resource_name   text NOT NULL,
    pattern_type    smallint NOT NULL,
    principal       text NOT NULL,
    host            text NOT NULL,
    operation       smallint NOT NULL,
    permission_type smallint NOT NULL,
    PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host, operation,
                 permission_type)
);
"""

# KIP-932 share partitions' durable state (coterie.storage.postgres_share_state), written by
# the leader of the data partition under its lease. `share_states` has one row per (group,
# partition) with state: the group's id and the next entry's sequence number; appends lock
# it (an upsert), which orders them, and deleting it deletes the entries (ON DELETE
# CASCADE), as deleting the topic deletes it. `share_state_entries` has one row per entry,
# its opaque bytes. Both are keyed by the SHA-256 of the group id's UTF-8 (`group_key`), not
# the id: a group id may be 32,767 bytes, past what a btree index entry can hold.
_V6 = """
CREATE TABLE share_states (
    group_key bytea NOT NULL CHECK (length(group_key) = 32),
    topic_id  uuid NOT NULL,
    partition integer NOT NULL,
    group_id  text NOT NULL,
    next_seq  bigint NOT NULL CHECK (next_seq >= 0),
    PRIMARY KEY (group_key, topic_id, partition),
    FOREIGN KEY (topic_id, partition) REFERENCES partitions ON DELETE CASCADE
);
-- Deleting a topic finds its partitions' share states.
CREATE INDEX share_states_by_partition ON share_states (topic_id, partition);

CREATE TABLE share_state_entries (
    group_key bytea NOT NULL,
    topic_id  uuid NOT NULL,
    partition integer NOT NULL,
    seq       bigint NOT NULL CHECK (seq >= 0),
    data      bytea NOT NULL,
    PRIMARY KEY (group_key, topic_id, partition, seq),
    FOREIGN KEY (group_key, topic_id, partition) REFERENCES share_states ON DELETE CASCADE
);
"""

# The state epoch of each share partition's stored state (coterie.storage.share_state): a
# write carrying an older one is refused, so that a leader's copy loaded before an
# administrator's reset (AlterShareGroupOffsets through another broker) cannot overwrite it.
_V7 = """
ALTER TABLE share_states ADD COLUMN state_epoch integer NOT NULL DEFAULT 0;
"""

# A broker taking a partition over copies only its recent batches (coterie.broker.cluster),
# so the producer state as of the copy's start is read from the rows' header columns
# (coterie.storage.producer_rows), never from their bytes. Each question is a short walk of
# one index: a producer's batches by offset (its last five, the skip scan over producer ids),
# its transaction markers (the last one before a point), its transactional data batches
# (the first one after that marker: where its open transaction began). Partial indexes, so
# that batches of no producer cost nothing more, and plain idempotent ones one entry.
_V8 = """
CREATE INDEX batches_by_producer ON batches (topic_id, partition, producer_id, base_offset)
    WHERE producer_id >= 0;
CREATE INDEX batches_markers ON batches (topic_id, partition, producer_id, base_offset)
    WHERE is_control AND producer_id >= 0;
CREATE INDEX batches_transactional ON batches (topic_id, partition, producer_id, base_offset)
    WHERE is_transactional AND NOT is_control AND producer_id >= 0;
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "topics, partitions, batches, brokers, leases, producer-id blocks", _V1),
    Migration(2, "the cluster's id", _V2),
    Migration(3, "groups' own configs and the cluster-wide broker configs", _V3),
    Migration(4, "each broker's listeners", _V4),
    Migration(5, "SCRAM credentials and ACLs", _V5),
    Migration(6, "share partitions' state", _V6),
    Migration(7, "share partitions' state epochs", _V7),
    Migration(8, "producer state from the batches' header columns", _V8),
)


def latest_version(migrations: tuple[Migration, ...] = MIGRATIONS) -> int:
    """The schema version this coterie knows (the last migration's)."""
    return migrations[-1].version if migrations else 0
