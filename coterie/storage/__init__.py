"""Durable storage behind a seam: the partition log, topics, leases and brokers in PostgreSQL.

Why a package of its own: issue 24 lets several stateless brokers share one PostgreSQL
database, each partition and coordinator shard served by one broker at a time through a lease.
Everything that must survive a broker lives here, and every write here is conditional on the
writer's lease, so the broker above never has to reason about fencing itself.

Modules, each named for what it holds:

- `api.py`: the seam (typing Protocols) a partition log offers the broker, which the local
  file log (coterie.log) and the PostgreSQL log both fit, and its values (`Lease`, ...).
- `errors.py`: what the storage raises (`LeaseLost`, `SchemaTooNew`, `NodeIdInUse`, ...).
- `schema.py`: the SQL schema as an ordered list of migrations; `migrations.py` applies them.
- `database.py`: one connection and the lock that keeps its transactions apart.
- `topics.py`, `leases.py`, `brokers.py`, `producer_ids.py`, `cluster_id.py`: topic rows,
  leases with epochs, broker registration, producer-id blocks, the cluster's id.
- `postgres_log.py`: the partition log over the `batches` table (append with group commit,
  read, offsets, timestamps, DeleteRecords, retention); `batch_rows.py`, its pure part: the
  rows a produce payload becomes at a partition's tail.
- `membership.py`: one broker's rounds in a cluster: registration, renewals, its share of
  the resources by `tenure.spread`, what it gained and lost (for the broker to load and
  unload).
- `group_commit.py`: appends arriving together share one transaction.
- `files_log.py`: the local file log (coterie.log) behind the same seam, for one broker.
- `share_state.py`: the seam for KIP-932 share partitions' durable state (opaque entries per
  group and partition, written by the partition's leader under its lease), with
  `postgres_share_state.py` (the `share_states` and `share_state_entries` tables) and
  `files_share_state.py` (files in the data directory, one broker) behind it
  (docs/share-state-storage.md).
- `lease_table.py`: the lease rule of `leases.py` in memory, with the time passed in (the
  fault simulation of brokers and leases drives it); `tenure.py`: what one broker believes
  it owns (never longer than the database does) and which live broker should own what
  (`spread`). Both pure.

It sits just above coterie.log (whose pure batch helpers it reuses) and below the broker, and
never imports the coordinators (an import-linter contract). The design and the schema's
reasons: docs/storage-postgresql.md.
"""
