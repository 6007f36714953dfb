"""Which version of each API the client speaks, and how one is chosen per connection.

A request's version is the highest one that three parties accept: the broker (its ApiVersions
answer), `kio` (a generated codec must exist for that version) and the calling code (it must
know what the fields of that version mean). The calling code states its range once, in
`MEMBER_API_RANGES` (or per call), so a version whose fields it does not handle is never sent
just because broker and kio both know it.

Pure: no I/O here; `coterie.client.connection` asks the broker and then calls `pick_version`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from functools import cache

from kio.index import KioIndexError, load_request_schema, load_response_schema


class ApiKey(enum.IntEnum):
    """Kafka API keys the client library uses or is expected to use (the consumer's and the
    operator commands' of `coterie.admin` too)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DESCRIBE_CONFIGS = 32
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_DESCRIBE = 77
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


VersionRange = tuple[int, int]

# What the group-member runtime handles, inclusive. The code that builds each request reads
# version-dependent fields with these ranges in mind (JoinGroup v0 has no rebalance timeout,
# v4+ may answer MEMBER_ID_REQUIRED, v5+ carries group.instance.id, FindCoordinator v4+ is
# batched, LeaveGroup v3+ lists members, SyncGroup v5+ names the protocol ...).
MEMBER_API_RANGES: Mapping[int, VersionRange] = {
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.METADATA: (1, 13),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
}

# SASL, sent by every connection on a SASL listener whatever it is for: SaslHandshake v1
# (v0, the unframed tokens, is gone from Kafka 4 and was never served by coterie), then
# SaslAuthenticate in the highest version the broker offers (v1 adds the session lifetime,
# v2 flexible fields).
SASL_API_RANGES: Mapping[int, VersionRange] = {
    ApiKey.SASL_HANDSHAKE: (1, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
}


@cache
def kio_has(api_key: int, version: int) -> bool:
    """Does kio ship both the request and the response codec of this version?"""
    try:
        load_request_schema(api_key, version)
        load_response_schema(api_key, version)
    except (KioIndexError, ImportError, ValueError, AttributeError):
        return False
    return True


def pick_version(api_key: int, broker: VersionRange | None, wanted: VersionRange) -> int | None:
    """The highest version inside both ranges that kio can encode, or None if there is none."""
    if broker is None:
        return None
    low = max(broker[0], wanted[0])
    for version in range(min(broker[1], wanted[1]), low - 1, -1):
        if kio_has(api_key, version):
            return version
    return None
