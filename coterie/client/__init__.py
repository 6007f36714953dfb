"""coterie.client: an asyncio member runtime for Kafka-compatible group coordinators.

    GroupMember        join / sync / heartbeat / rejoin / leave around an EmbeddedProtocol
    EmbeddedProtocol   the extension point (metadata, assign, on_assignment, on_revoke, on_lost)
    LeaderElection     exactly one leader among the members of a group
    TaskDistribution   Connect-style distribution of tasks among workers
    Consumer           a group consumer: eager or cooperative (KIP-429) rebalancing, or the
                       consumer group protocol (KIP-848, group_protocol="consumer"); fetch
                       loop, auto and manual commits
    Cluster            bootstrap, Metadata, FindCoordinator, dedicated connections
    Connection         one broker connection (kio codecs, version negotiation, TLS, SASL)
    SecuritySettings   TLS and SASL under Kafka's client property names (every API's
                       `security=` also takes the property map itself)

Errors are in `coterie.client.errors`.
"""

from coterie.client.cluster import Cluster, ClusterMetadata, Node
from coterie.client.connection import Connection
from coterie.client.consumer import Consumer, ConsumerRebalanceListener
from coterie.client.election import LeaderElection, LeaderInfo, Leadership
from coterie.client.member import GroupMember, MemberState
from coterie.client.protocol import EmbeddedProtocol, Generation, JoinedMember
from coterie.client.records import ConsumerRecord
from coterie.client.security import SecuritySettings
from coterie.client.subscription import TopicPartition
from coterie.client.task_assignor import Worker, balanced_assignment
from coterie.client.tasks import TaskDistribution

__all__ = [
    "Cluster",
    "ClusterMetadata",
    "Connection",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "EmbeddedProtocol",
    "Generation",
    "GroupMember",
    "JoinedMember",
    "LeaderElection",
    "LeaderInfo",
    "Leadership",
    "MemberState",
    "Node",
    "SecuritySettings",
    "TaskDistribution",
    "TopicPartition",
    "Worker",
    "balanced_assignment",
]
