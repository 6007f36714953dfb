"""What each topic and group config means, in one or two sentences: the documentation
DescribeConfigs returns when a client asks for it (consoles show it next to the value).
Written for coterie; where coterie keeps a setting without acting on it, the text says so."""

from __future__ import annotations

TOPIC_CONFIG_DOCS: dict[str, str] = {
    "cleanup.policy": "How old log segments are discarded: \"delete\" removes them by time or "
                      "size (retention.ms, retention.bytes), \"compact\" keeps the latest "
                      "record per key; both may be given.",
    "compression.gzip.level": "Compression level for gzip when compression.type is gzip.",
    "compression.lz4.level": "Compression level for lz4 when compression.type is lz4.",
    "compression.type": "The compression of stored batches; \"producer\" keeps what the "
                        "producer sent. Stored, coterie keeps batches as sent.",
    "compression.zstd.level": "Compression level for zstd when compression.type is zstd.",
    "delete.retention.ms": "How long a delete marker (tombstone) of a compacted topic is kept "
                           "so that readers can see it.",
    "file.delete.delay.ms": "How long a deleted segment file is kept before it is removed.",
    "flush.messages": "Records appended between two forced flushes of the log to disk.",
    "flush.ms": "Longest time an appended record may stay unflushed to disk.",
    "follower.replication.throttled.replicas": "Replicas whose follower replication is "
                                               "throttled (a single node has none).",
    "index.interval.bytes": "Bytes of records between two entries of the offset index.",
    "leader.replication.throttled.replicas": "Replicas whose leader replication is throttled "
                                             "(a single node has none).",
    "local.retention.bytes": "Bytes kept on local disk when tiered storage is on (-2: same "
                             "as retention.bytes).",
    "local.retention.ms": "Time kept on local disk when tiered storage is on (-2: same as "
                          "retention.ms).",
    "max.compaction.lag.ms": "Longest time a record may stay uncompacted in a compacted "
                             "topic.",
    "max.message.bytes": "The largest record batch the topic accepts, in bytes.",
    "message.timestamp.after.max.ms": "How far in the future a record's timestamp may be "
                                      "(CreateTime topics).",
    "message.timestamp.before.max.ms": "How far in the past a record's timestamp may be "
                                       "(CreateTime topics).",
    "message.timestamp.type": "Whether record timestamps are the producer's (CreateTime) or "
                              "the broker's append time (LogAppendTime).",
    "min.cleanable.dirty.ratio": "Share of a compacted log that must be uncompacted before "
                                 "the cleaner works on it.",
    "min.compaction.lag.ms": "Shortest time a record stays uncompacted in a compacted topic.",
    "min.insync.replicas": "Replicas that must have a write for acks=all to succeed (a "
                           "single node: 1).",
    "preallocate": "Whether segment files are allocated at full size when created.",
    "remote.log.copy.disable": "Stop copying segments to tiered storage (tiered storage is "
                               "not supported: stored only).",
    "remote.log.delete.on.disable": "Delete tiered-storage data when tiered storage is turned "
                                    "off (stored only).",
    "remote.storage.enable": "Tiered storage for this topic (not supported: stored only).",
    "retention.bytes": "Size a partition may reach before its oldest segments are deleted "
                       "(-1: no limit).",
    "retention.ms": "How long records are kept before their segment may be deleted (-1: "
                    "forever).",
    "segment.bytes": "Size of a log segment file; a new segment starts when it is full.",
    "segment.index.bytes": "Size of a segment's offset index file.",
    "segment.jitter.ms": "Random time taken off segment.ms so that segments do not all roll "
                         "at once.",
    "segment.ms": "Time after which a new segment starts even if the current one is not full.",
    "unclean.leader.election.enable": "Whether an out-of-sync replica may become leader (a "
                                      "single node is always in sync).",
}

GROUP_CONFIG_DOCS: dict[str, str] = {
    "consumer.session.timeout.ms": "How long a consumer-protocol member may go without a "
                                   "heartbeat before it is removed from this group.",
    "consumer.heartbeat.interval.ms": "How often consumer-protocol members of this group are "
                                      "told to heartbeat.",
    "share.session.timeout.ms": "Session timeout of share group members (share groups are not "
                                "supported yet: stored only).",
    "share.heartbeat.interval.ms": "Heartbeat interval of share group members (stored only).",
    "share.record.lock.duration.ms": "How long a share group member holds a record it "
                                     "fetched (stored only).",
    "share.auto.offset.reset": "Where a share group starts reading a partition it has no "
                               "position in (stored only).",
    "share.isolation.level": "Whether a share group reads transactional records before they "
                             "commit (stored only).",
    "streams.session.timeout.ms": "Session timeout of streams group members (streams groups "
                                  "are not supported yet: stored only).",
    "streams.heartbeat.interval.ms": "Heartbeat interval of streams group members (stored "
                                     "only).",
    "streams.num.standby.replicas": "Standby task replicas a streams group keeps (stored "
                                    "only).",
    "streams.initial.rebalance.delay.ms": "Delay before a new streams group's first "
                                          "assignment (stored only).",
}
