"""Which request versions mean transactions version 2 (KIP-890 part 2).

Kafka decides per request: a Produce from v12 and a TxnOffsetCommit from v5 add their
partition to the transaction themselves (a version-2 client sends no AddPartitionsToTxn and
no AddOffsetsToTxn), and an EndTxn from v5 bumps the producer epoch and answers with it.
A client uses those versions when the broker's ApiVersions finalizes the
`transaction.version` feature at level 2 (`FEATURE`, `LEVEL`).
"""

FEATURE = "transaction.version"
LEVEL = 2
TV2_PRODUCE = 12
TV2_TXN_OFFSET_COMMIT = 5
TV2_END_TXN = 5
# The first versions that know TRANSACTION_ABORTABLE (KIP-890): older ones are told
# INVALID_TXN_STATE when a write is not part of an open transaction.
ABORTABLE_PRODUCE = 11
ABORTABLE_TXN_OFFSET_COMMIT = 4
