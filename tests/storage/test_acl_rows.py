"""The ACL rows of a cluster (coterie.storage.acl_rows) on a real PostgreSQL: a binding
stored twice is one row; two brokers deleting with overlapping filters at once remove each
row once (each reports only what it removed); a delete past its limit removes nothing; the
digest a round compares changes exactly when the rows do."""

from __future__ import annotations

import asyncio

from coterie.security import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from coterie.storage import acl_rows
from coterie.storage.database import Database
from tests.storage.helpers import with_dbs


def _acl(name: str, pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, "User:alice", "*", AclOperation.READ,
                      AclPermissionType.ALLOW)


def test_acl_rows(pg_dsn: str) -> None:
    async def scenario(a: Database, b: Database) -> None:
        empty = await acl_rows.fingerprint(a)
        stored = [_acl(f"t{i}") for i in range(20)] + [_acl("p-", PatternType.PREFIXED)]
        await acl_rows.add_acls(a, stored)
        await acl_rows.add_acls(b, stored[:3])  # again: no change
        full = await acl_rows.fingerprint(b)
        assert full != empty and full == await acl_rows.fingerprint(a)
        assert sorted(await acl_rows.acls(b), key=AclBinding.key) == sorted(
            stored, key=AclBinding.key)

        every = AclBindingFilter()
        assert await acl_rows.delete_acls(a, [every], limit=5) is None  # too many: none go
        assert await acl_rows.fingerprint(a) == full
        prefixed = AclBindingFilter(pattern_type=PatternType.PREFIXED)
        one, two = await asyncio.gather(acl_rows.delete_acls(a, [every, prefixed]),
                                        acl_rows.delete_acls(b, [every]))
        assert one is not None and two is not None
        # Whichever went first removed everything; the other found nothing left.
        assert sorted(len(x) for x in (one[0], two[0])) == [0, 21]
        assert len(one[1]) == (1 if one[0] else 0)
        assert await acl_rows.acls(a) == []
        assert await acl_rows.fingerprint(b) == empty

    with_dbs(pg_dsn, scenario, 2)
