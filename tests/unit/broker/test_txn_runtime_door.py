"""The transaction coordinator's door (`TxnRuntime.handle`, `describe`, `listing`): until
its partitions are loaded every API is answered COORDINATOR_LOAD_IN_PROGRESS, once there for
all of them; then the core answers. An in-process broker on a temporary data directory."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kio.schema.errors import ErrorCode

from coterie.broker.config import BrokerConfig
from coterie.broker.server import Broker

LOADING = ErrorCode.coordinator_load_in_progress


def test_until_loaded_every_transaction_api_answers_load_in_progress(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker = Broker(BrokerConfig.load("127.0.0.1", 0, tmp_path / "d", overrides={
            "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
            "group.events.enable": "false"}))
        txn = broker.transactions
        try:
            assert txn.handle("t", lambda m, now: m.init_producer_id(
                "t", 60_000, -1, -1, now)).error == LOADING
            assert txn.handle("t", lambda m, now: m.add_offsets(
                "t", 1, 0, "g", now)).error == LOADING
            assert txn.describe("t") == LOADING
            assert txn.listing([], (), -1) is None
            await txn.load()
            init = txn.handle("t", lambda m, now: m.init_producer_id(
                "t", 60_000, -1, -1, now))
            assert init.error == ErrorCode.none and init.producer_id >= 0
            # AddOffsetsToTxn's INVALID_GROUP_ID is the core's, before anything else.
            assert txn.handle("t", lambda m, now: m.add_offsets(
                "t", init.producer_id, init.producer_epoch, "", now)).error == (
                ErrorCode.invalid_group_id)
            assert txn.describe("unknown") == ErrorCode.transactional_id_not_found
            assert [m.transactional_id for m in txn.listing([], (), -1)] == ["t"]
        finally:
            broker.groups.close()
            broker.logs.close()

    asyncio.run(scenario())
