"""The transaction coordinator's pure core: transactional ids, their producer ids and epochs,
and the state of their transactions, as records of `__transaction_state` (no I/O)."""
