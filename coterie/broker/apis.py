"""The API table: which (api key, version range) coterie answers, and with what.

ApiVersions advertises exactly this table, so the table is the single place where support
for an API or version is declared.

Keys 32000 and up are coterie's own extension APIs (`coterie.wire.extensions`,
docs/extensions.md), far outside Apache Kafka's range. They are advertised like the rest:
clients skip API keys they do not know in an ApiVersions answer (librdkafka, kafka-python
and aiokafka are exercised against this table by the integration tests), and a coterie
client learns from the same answer whether the broker offers them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from coterie.broker.handlers import (
    acls,
    api_versions,
    client_assignment,
    client_quotas,
    cluster,
    configs,
    consumer_groups,
    fetch,
    groups,
    metadata,
    offset_commit,
    offsets,
    produce,
    producers,
    records,
    sasl,
    scram_credentials,
    share_fetch,
    share_groups,
    share_offsets,
    streams_groups,
    topics,
    transactions,
)
from coterie.wire.extensions import (
    CONSUMER_GROUP_INSTALL_ASSIGNMENT,
    CONSUMER_GROUP_PREPARE_ASSIGNMENT,
)


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Callable[..., Any]

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


API_VERSIONS = 18

APIS: dict[int, Api] = {
    api.key: api
    for api in (
        Api(0, "Produce", 3, 12, produce.handle),
        Api(1, "Fetch", 4, 16, fetch.handle),
        Api(2, "ListOffsets", 1, 8, offsets.list_offsets),
        Api(3, "Metadata", 0, 13, metadata.handle),
        Api(8, "OffsetCommit", 2, 9, offset_commit.offset_commit),
        Api(9, "OffsetFetch", 1, 9, offset_commit.offset_fetch),
        Api(10, "FindCoordinator", 0, 6, groups.find_coordinator),
        Api(11, "JoinGroup", 0, 9, groups.join_group),
        Api(12, "Heartbeat", 0, 4, groups.heartbeat),
        Api(13, "LeaveGroup", 0, 5, groups.leave_group),
        Api(14, "SyncGroup", 0, 5, groups.sync_group),
        Api(15, "DescribeGroups", 0, 6, groups.describe_groups),
        Api(16, "ListGroups", 0, 5, groups.list_groups),
        Api(17, "SaslHandshake", 1, 1, sasl.handshake),
        Api(18, "ApiVersions", 0, 3, api_versions.handle),
        Api(19, "CreateTopics", 2, 7, topics.create_topics),
        Api(20, "DeleteTopics", 1, 6, topics.delete_topics),
        Api(21, "DeleteRecords", 0, 2, records.delete_records),
        Api(22, "InitProducerId", 0, 5, producers.init_producer_id),
        Api(23, "OffsetForLeaderEpoch", 2, 4, offsets.offset_for_leader_epoch),
        Api(24, "AddPartitionsToTxn", 0, 3, transactions.add_partitions_to_txn),
        Api(25, "AddOffsetsToTxn", 0, 4, transactions.add_offsets_to_txn),
        Api(26, "EndTxn", 0, 5, transactions.end_txn),
        Api(27, "WriteTxnMarkers", 1, 1, transactions.write_txn_markers),
        Api(28, "TxnOffsetCommit", 0, 5, offset_commit.txn_offset_commit),
        Api(29, "DescribeAcls", 2, 3, acls.describe_acls),
        Api(30, "CreateAcls", 2, 3, acls.create_acls),
        Api(31, "DeleteAcls", 2, 3, acls.delete_acls),
        Api(32, "DescribeConfigs", 1, 4, configs.describe_configs),
        Api(33, "AlterConfigs", 0, 2, configs.alter_configs),
        Api(35, "DescribeLogDirs", 1, 4, records.describe_log_dirs),
        Api(36, "SaslAuthenticate", 0, 2, sasl.authenticate),
        Api(37, "CreatePartitions", 0, 3, topics.create_partitions),
        Api(42, "DeleteGroups", 0, 2, groups.delete_groups),
        Api(44, "IncrementalAlterConfigs", 0, 1, configs.incremental_alter_configs),
        Api(47, "OffsetDelete", 0, 0, offset_commit.offset_delete),
        Api(48, "DescribeClientQuotas", 0, 1, client_quotas.describe_client_quotas),
        Api(50, "DescribeUserScramCredentials", 0, 0,
            scram_credentials.describe_user_scram_credentials),
        Api(51, "AlterUserScramCredentials", 0, 0,
            scram_credentials.alter_user_scram_credentials),
        Api(60, "DescribeCluster", 0, 2, cluster.describe_cluster),
        Api(61, "DescribeProducers", 0, 0, producers.describe_producers),
        Api(65, "DescribeTransactions", 0, 0, transactions.describe_transactions),
        Api(66, "ListTransactions", 0, 1, transactions.list_transactions),
        Api(68, "ConsumerGroupHeartbeat", 0, 1, consumer_groups.consumer_group_heartbeat),
        Api(69, "ConsumerGroupDescribe", 0, 1, consumer_groups.consumer_group_describe),
        Api(76, "ShareGroupHeartbeat", 1, 1, share_groups.share_group_heartbeat),
        Api(77, "ShareGroupDescribe", 1, 1, share_groups.share_group_describe),
        Api(78, "ShareFetch", 1, 2, share_fetch.share_fetch),
        Api(79, "ShareAcknowledge", 1, 2, share_fetch.share_acknowledge),
        Api(88, "StreamsGroupHeartbeat", 0, 0, streams_groups.streams_group_heartbeat),
        Api(89, "StreamsGroupDescribe", 0, 0, streams_groups.streams_group_describe),
        Api(90, "DescribeShareGroupOffsets", 0, 1,
            share_offsets.describe_share_group_offsets),
        Api(91, "AlterShareGroupOffsets", 0, 0, share_offsets.alter_share_group_offsets),
        Api(92, "DeleteShareGroupOffsets", 0, 0, share_offsets.delete_share_group_offsets),
        # coterie extensions (client-side assignors for KIP-848 consumer groups)
        Api(CONSUMER_GROUP_PREPARE_ASSIGNMENT, "ConsumerGroupPrepareAssignment", 0, 0,
            client_assignment.prepare_assignment),
        Api(CONSUMER_GROUP_INSTALL_ASSIGNMENT, "ConsumerGroupInstallAssignment", 0, 0,
            client_assignment.install_assignment),
    )
}
