"""Partition-log storage: record batches on disk, Kafka-style segments and indexes.

The package does file I/O only: it never reads a clock (callers pass now_ms), opens no
sockets and starts no threads, so the broker decides when maintenance runs. Entry points:
LogManager (manager.py) for a whole data directory, PartitionLog (partition.py) for one
partition, batch.py for checking produced batches, config.py for topic settings.
"""
