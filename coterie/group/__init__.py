"""The group coordinator, pure: what the broker may use of it.

The broker reaches groups through this face only (an import-linter contract holds it to
that): one `GroupShard` per `__consumer_offsets` partition, whose `handle(request, now_ms)`
serves every group API, the values those requests and answers are made of, the records and
their codec, the timer keys, the topic picture, and the group events. Everything else in
`coterie.group` (the group types, their rules and records) is internal to it.
"""

from coterie.group.classic.config import ClassicConfig
from coterie.group.classic.messages import (
    DescribedGroup,
    DescribeGroupRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeavingMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coterie.group.codec import RecordDecodeError, UnknownRecordType, decode, encode
from coterie.group.config import ShardConfig
from coterie.group.consumer.client_assignment import (
    InstallAssignmentRequest,
    InstallAssignmentResponse,
    InstalledMember,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
)
from coterie.group.consumer.config import ConsumerGroupConfig
from coterie.group.consumer.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedTopicPartitions,
    Requester,
    SettledHeartbeat,
    TopicPartitions,
)
from coterie.group.events import Event, EventDeriver
from coterie.group.group import Group, ListedGroup
from coterie.group.limits import MAX_STRING_BYTES, too_long
from coterie.group.offsets.messages import (
    CommitPartition,
    DeleteGroupRequest,
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from coterie.group.records.record import Record
from coterie.group.records.tasks import TaskSet
from coterie.group.result import Result, TimerOp, VerifyTransaction
from coterie.group.shard import GroupShard, Revert
from coterie.group.share.config import ShareGroupConfig
from coterie.group.share.messages import (
    DescribedShareGroup,
    DescribedShareMember,
    DescribedShareTopic,
    ShareGroupDescribeRequest,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
    ShareTopicPartitions,
)
from coterie.group.streams.config import StreamsGroupConfig
from coterie.group.streams.configured_topology import InternalTopic
from coterie.group.streams.messages import (
    DescribedStreamsGroup,
    DescribedStreamsMember,
    Endpoint,
    EndpointPartitions,
    StreamsGroupDescribeRequest,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResponse,
    StreamsSettledHeartbeat,
    TaskOffset,
)
from coterie.group.streams.status import GroupStatus, StreamsGroupStatus
from coterie.group.streams.topology import CopartitionGroup, Subtopology, Topology
from coterie.group.streams.topology import TopicInfo as StreamsTopicInfo
from coterie.group.timers import TimerKey, TimerKind
from coterie.group.topic_image import TopicImage, TopicInfo

__all__ = [
    "MAX_STRING_BYTES",
    "ClassicConfig",
    "CommitPartition",
    "ConsumerGroupConfig",
    "ConsumerGroupDescribeRequest",
    "ConsumerHeartbeatRequest",
    "ConsumerHeartbeatResponse",
    "CopartitionGroup",
    "DeleteGroupRequest",
    "DescribeGroupRequest",
    "DescribedConsumerGroup",
    "DescribedConsumerMember",
    "DescribedGroup",
    "DescribedShareGroup",
    "DescribedShareMember",
    "DescribedShareTopic",
    "DescribedStreamsGroup",
    "DescribedStreamsMember",
    "DescribedTopicPartitions",
    "Endpoint",
    "EndpointPartitions",
    "Event",
    "EventDeriver",
    "FetchedOffset",
    "Group",
    "GroupShard",
    "GroupStatus",
    "HeartbeatRequest",
    "InstallAssignmentRequest",
    "InstallAssignmentResponse",
    "InstalledMember",
    "InternalTopic",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "LeavingMember",
    "ListedGroup",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetDeleteRequest",
    "OffsetDeleteResponse",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "PrepareAssignmentRequest",
    "PrepareAssignmentResponse",
    "Record",
    "RecordDecodeError",
    "Requester",
    "Result",
    "Revert",
    "SettledHeartbeat",
    "ShardConfig",
    "ShareGroupConfig",
    "ShareGroupDescribeRequest",
    "ShareHeartbeatRequest",
    "ShareHeartbeatResponse",
    "ShareTopicPartitions",
    "StreamsGroupConfig",
    "StreamsGroupDescribeRequest",
    "StreamsGroupStatus",
    "StreamsHeartbeatRequest",
    "StreamsHeartbeatResponse",
    "StreamsSettledHeartbeat",
    "StreamsTopicInfo",
    "Subtopology",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "TaskOffset",
    "TaskSet",
    "TimerKey",
    "TimerKind",
    "TimerOp",
    "TopicImage",
    "TopicInfo",
    "TopicPartitions",
    "Topology",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitResponse",
    "UnknownRecordType",
    "VerifyTransaction",
    "decode",
    "encode",
    "too_long",
]
