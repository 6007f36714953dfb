"""Kafka's ACL enums, with Kafka's wire codes and names.

CreateAcls, DescribeAcls and DeleteAcls carry these as int8 codes; the names are what
Kafka prints (`kafka-acls --list`, error messages such as "Invalid patternType MATCH"), so
they are kept exactly. A code Kafka does not know reads as UNKNOWN (`of`), as Kafka's
`fromCode` does: a request from a newer client is then refused as Kafka refuses it, not
crashed on.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Self


class _Coded(IntEnum):
    """An enum whose unknown codes read as its UNKNOWN member (code 0)."""

    @classmethod
    def of(cls, code: int) -> Self:
        try:
            return cls(code)
        except ValueError:
            return cls(0)


class ResourceType(_Coded):
    """What an ACL is about. ANY is only for filters."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Coded):
    """How an ACL's resource name is read. LITERAL (the name itself, or `*`: every name)
    and PREFIXED (every name starting with it) are an ACL's; ANY and MATCH are only for
    filters: ANY takes either by the exact name, MATCH takes every ACL that would apply to
    a resource of that name."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Coded):
    """What a principal does. ANY is only for filters; ALL in an ACL covers every
    operation."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(_Coded):
    """Whether an ACL allows or denies. ANY is only for filters."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The name of the one CLUSTER resource (Kafka's Resource.CLUSTER_NAME).
CLUSTER_NAME = "kafka-cluster"
# The resource name and host that match every name and host, and the principal that
# matches every principal.
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
