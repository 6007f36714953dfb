"""ApiVersions: the first thing every client asks.

A client that asks with a version newer than ours gets the version-0 answer with
UNSUPPORTED_VERSION and our full list: clients decode that shape whatever they asked with,
then retry with the highest version we listed. That fallback is built in `server.py`, which
sees the unsupported version before any handler.
"""

from __future__ import annotations

from typing import Any

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode

from coterie.broker.context import RequestContext
from coterie.broker.services import Services
from coterie.txn.versions import FEATURE as TXN_FEATURE
from coterie.txn.versions import LEVEL as TXN_LEVEL
from coterie.txn.versions import TV2_END_TXN, TV2_PRODUCE, TV2_TXN_OFFSET_COMMIT
from coterie.wire.build import build


def _api_list(services: Services) -> list[dict[str, int]]:
    caps = _CLUSTER_CAPS if services.cluster is not None else {}
    return [{"api_key": api.key, "min_version": api.min_version,
             "max_version": min(api.max_version, caps.get(api.key, api.max_version))}
            for api in services.apis]


# A cluster serves transactions version 1 (docs/cluster.md): the versions that would make
# a partition's leader add it to a transaction coordinated by another broker (Produce v12,
# TxnOffsetCommit v5) and EndTxn's epoch bump (v5) are not offered, and `transaction.version`
# is finalized at 1, so Kafka's clients add partitions and offsets explicitly.
_CLUSTER_CAPS = {0: TV2_PRODUCE - 1, 26: TV2_END_TXN - 1, 28: TV2_TXN_OFFSET_COMMIT - 1}
_CLUSTER_TXN_LEVEL = 1


# Features (KIP-584), from ApiVersions v3: what coterie supports and has finalized, as a
# Kafka 4.x broker reports them for what coterie serves. A Kafka 4.x producer uses
# transactions version 2 when `transaction.version` is finalized at 2 (coterie.txn.versions);
# `group.version` 1 is the consumer group protocol (KIP-848), `share.version` 1 share groups
# (KIP-932: finalized at 1 by a Kafka 4.2 cluster formatted with its defaults). coterie is
# not a KRaft cluster, so metadata.version and kraft.version are not reported.
SUPPORTED_FEATURES = ((TXN_FEATURE, 0, TXN_LEVEL), ("group.version", 0, 1),
                      ("share.version", 0, 1))
FINALIZED_FEATURES = ((TXN_FEATURE, TXN_LEVEL), ("group.version", 1), ("share.version", 1))
# Clients keep the finalized features of the highest epoch they saw; they never change here.
FINALIZED_FEATURES_EPOCH = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    finalized = FINALIZED_FEATURES
    if ctx.services.cluster is not None:
        finalized = tuple((n, _CLUSTER_TXN_LEVEL if n == TXN_FEATURE else level)
                          for n, level in FINALIZED_FEATURES)
    return ctx.respond({
        "error_code": ErrorCode.none, "api_keys": _api_list(ctx.services),
        "supported_features": [{"name": n, "min_version": lo, "max_version": hi}
                               for n, lo, hi in SUPPORTED_FEATURES],
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": [{"name": n, "min_version_level": level,
                                "max_version_level": level}
                               for n, level in finalized]})


def unsupported_version_answer(services: Services) -> Any:
    """The v0-shaped answer for an ApiVersions request of a version we do not know."""
    return build(ApiVersionsResponseV0, {
        "error_code": ErrorCode.unsupported_version, "api_keys": _api_list(services),
    })
