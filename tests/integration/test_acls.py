"""Kafka's ACL APIs (issue 25, ACLs first part) against a real broker: confluent-kafka's
AdminClient creates, describes and deletes ACLs (literal, prefixed and wildcard patterns;
ANY, MATCH and PREFIXED filters), invalid bindings are refused with Kafka's reasons, a broker
without an authorizer answers SECURITY_DISABLED, only a principal allowed on the cluster
may change ACLs, the ACLs survive kill -9, and Kafka 4.2.1's own `kafka-acls` adds and lists
them.

The brokers run with `authorizer.class.name` set to Kafka's StandardAuthorizer and
`super.users=User:ANONYMOUS`: a PLAINTEXT connection's principal, as on Kafka.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.delete_acls.v2.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.describe_acls.v2.request import DescribeAclsRequest
from kio.schema.errors import ErrorCode

from tests.fixtures.coterie_broker import CoterieBroker
from tests.fixtures.reference_broker import kafka_tool
from tests.kafka_raw import RawConnection

pytestmark = pytest.mark.timeout(120)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_SETTINGS = {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"}
RT, PT, OP, PERM = ResourceType, ResourcePatternType, AclOperation, AclPermissionType
# DescribeAcls v2 of every ACL (raw: librdkafka drops this API's error code, so a refused
# DescribeAcls reads as an empty list through the AdminClient).
_DESCRIBE_ALL = DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                                    pattern_type_filter=1, principal_filter=None,
                                    host_filter=None, operation=1, permission_type=1)


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoterieBroker]:
    b = CoterieBroker(tmp_path_factory.mktemp("acls") / "data", config=ACL_SETTINGS)
    b.start()
    yield b
    b.stop()


def _admin(b: CoterieBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def _acl(name: str, pattern: ResourcePatternType = PT.LITERAL,
         rtype: ResourceType = RT.TOPIC, principal: str = "User:alice",
         op: AclOperation = OP.READ, perm: AclPermissionType = PERM.ALLOW,
         host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def _filter(rtype: ResourceType = RT.ANY, name: str | None = None,
            pattern: ResourcePatternType = PT.ANY, principal: str | None = None,
            op: AclOperation = OP.ANY) -> AclBindingFilter:
    return AclBindingFilter(rtype, name, pattern, principal, None, op, PERM.ANY)


def _create(admin: AdminClient, acls: list[AclBinding]) -> None:
    for future in admin.create_acls(acls, request_timeout=10).values():
        future.result(10)


def _described(admin: AdminClient, f: AclBindingFilter) -> set[tuple]:
    return {(a.restype, a.name, a.resource_pattern_type, a.principal, a.operation)
            for a in admin.describe_acls(f, request_timeout=10).result(10)}


def test_create_describe_and_delete_with_the_admin_client(acl_broker: CoterieBroker) -> None:
    admin = _admin(acl_broker)
    for future in admin.delete_acls([_filter()], request_timeout=10).values():
        future.result(10)  # what other tests of the module left
    acls = [_acl("orders"), _acl("orders-", PT.PREFIXED), _acl("ord", PT.PREFIXED, op=OP.WRITE),
            _acl("*", principal="User:*", op=OP.DESCRIBE), _acl("payments"),
            _acl("app", rtype=RT.GROUP), _acl("kafka-cluster", rtype=RT.BROKER, op=OP.ALTER),
            _acl("orders", perm=PERM.DENY, principal="User:bob")]
    _create(admin, acls)
    _create(admin, acls[:2])  # again: no change, no error
    everything = _described(admin, _filter())
    assert len(everything) == len(acls)

    # MATCH: every ACL that applies to the topic orders-eu (its prefixes and the wildcard).
    assert _described(admin, _filter(RT.TOPIC, "orders-eu", PT.MATCH)) == {
        (RT.TOPIC, "orders-", PT.PREFIXED, "User:alice", OP.READ),
        (RT.TOPIC, "ord", PT.PREFIXED, "User:alice", OP.WRITE),
        (RT.TOPIC, "*", PT.LITERAL, "User:*", OP.DESCRIBE)}
    # ANY: the exact name in either pattern type; LITERAL and PREFIXED: that type only.
    assert {x[2] for x in _described(admin, _filter(RT.TOPIC, "orders", PT.ANY))} == {
        PT.LITERAL}
    assert _described(admin, _filter(RT.TOPIC, None, PT.PREFIXED)) == {
        (RT.TOPIC, "orders-", PT.PREFIXED, "User:alice", OP.READ),
        (RT.TOPIC, "ord", PT.PREFIXED, "User:alice", OP.WRITE)}
    assert {x[0] for x in _described(admin, _filter(principal="User:bob"))} == {RT.TOPIC}
    assert len(_described(admin, _filter(op=OP.READ))) == 5

    # Delete: each filter reports what it removed; what is left is described.
    futures = admin.delete_acls([_filter(RT.TOPIC, None, PT.PREFIXED),
                                 _filter(RT.GROUP, "app", PT.LITERAL),
                                 _filter(RT.TOPIC, "nothing-here", PT.LITERAL)],
                                request_timeout=10)
    removed = [sorted(a.name for a in f.result(10)) for f in futures.values()]
    assert removed == [["ord", "orders-"], ["app"], []]
    left = _described(admin, _filter())
    assert len(left) == len(acls) - 3
    assert not any(x[2] == PT.PREFIXED for x in left)
    for future in admin.delete_acls([_filter()], request_timeout=10).values():
        assert len(future.result(10)) == len(left)
    assert _described(admin, _filter()) == set()


def test_invalid_bindings_are_refused_with_kafkas_reasons(acl_broker: CoterieBroker) -> None:
    def creation(**changes: object) -> AclCreation:
        fields = dict(resource_type=2, resource_name="t", resource_pattern_type=3,
                      principal="User:alice", host="*", operation=3, permission_type=3)
        return AclCreation(**{**fields, **changes})  # type: ignore[arg-type]

    creations = (creation(), creation(resource_type=4, resource_name="my-cluster"),
                 creation(resource_name=""), creation(resource_pattern_type=2),
                 creation(resource_type=1), creation(operation=1), creation(permission_type=1),
                 creation(principal="alice"), creation(host="broker.example.com"))
    with RawConnection(acl_broker.host, acl_broker.port) as conn:
        got = conn.request(CreateAclsRequest(creations=creations))
        assert [(r.error_code, r.error_message) for r in got.results] == [
            (ErrorCode.none, None),
            (ErrorCode.invalid_request,
             "The only valid name for the CLUSTER resource is kafka-cluster"),
            (ErrorCode.invalid_request, "Invalid empty resource name"),
            (ErrorCode.invalid_request, "Invalid patternType MATCH"),
            (ErrorCode.invalid_request, "Invalid resourceType ANY"),
            (ErrorCode.invalid_request, "Invalid operation ANY"),
            (ErrorCode.invalid_request, "Invalid permissionType ANY"),
            (ErrorCode.invalid_request, "Could not parse principal from `alice` (no colon is "
                                        "present separating the principal type from the "
                                        "principal name)"),
            (ErrorCode.invalid_request, "Invalid host 'broker.example.com': an ACL's host is "
                                        "'*' or an IP address")]
        # DescribeAcls v2: only the valid one was stored; an UNKNOWN filter is refused.
        described = conn.request(DescribeAclsRequest(
            resource_type_filter=2, resource_name_filter="t", pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1))
        assert described.error_code == ErrorCode.none
        assert [(r.resource_name, [a.principal for a in r.acls])
                for r in described.resources] == [("t", ["User:alice"])]
        unknown = conn.request(DescribeAclsRequest(
            resource_type_filter=0, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1))
        assert (unknown.error_code, unknown.error_message) == (
            ErrorCode.invalid_request, "Unknown patternFilter.")
        deleted = conn.request(DeleteAclsRequest(filters=(
            DeleteAclsFilter(resource_type_filter=2, resource_name_filter="t",
                             pattern_type_filter=3, principal_filter=None, host_filter=None,
                             operation=0, permission_type=1),
            DeleteAclsFilter(resource_type_filter=2, resource_name_filter="t",
                             pattern_type_filter=3, principal_filter=None, host_filter=None,
                             operation=1, permission_type=1))))
        assert [(r.error_code, r.error_message, len(r.matching_acls))
                for r in deleted.filter_results] == [
            (ErrorCode.invalid_request, "Unknown entryFilter.", 0), (ErrorCode.none, None, 1)]


def test_without_an_authorizer_the_acl_apis_are_security_disabled(
        coterie: CoterieBroker) -> None:
    with pytest.raises(KafkaException) as refused:
        _create(_admin(coterie), [_acl("t")])
    assert refused.value.args[0].code() == ErrorCode.security_disabled
    with RawConnection(coterie.host, coterie.port) as conn:
        got = conn.request(CreateAclsRequest(creations=(AclCreation(
            resource_type=2, resource_name="t", resource_pattern_type=3,
            principal="User:alice", host="*", operation=3, permission_type=3),)))
        assert [(r.error_code, r.error_message) for r in got.results] == [
            (ErrorCode.security_disabled, "No Authorizer is configured.")]
        described = conn.request(_DESCRIBE_ALL)
        assert (described.error_code, described.error_message) == (
            ErrorCode.security_disabled, "No Authorizer is configured on the broker")


def test_only_a_principal_allowed_on_the_cluster_changes_acls(tmp_path: Path) -> None:
    """With `allow.everyone.if.no.acl.found`, anyone may do what no ACL covers: ANONYMOUS
    creates an ACL giving bob ALTER on the cluster, and from then on the cluster has ACLs,
    none of them for ANONYMOUS: its DescribeAcls and CreateAcls are refused."""
    b = CoterieBroker(tmp_path / "data", config={"authorizer.class.name": STANDARD,
                                                 "allow.everyone.if.no.acl.found": "true"})
    b.start()
    try:
        admin = _admin(b)
        _create(admin, [_acl("kafka-cluster", rtype=RT.BROKER, principal="User:bob",
                             op=OP.ALTER)])
        with RawConnection(b.host, b.port) as conn:
            described = conn.request(_DESCRIBE_ALL)
        assert (described.error_code, described.error_message) == (
            ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
        with pytest.raises(KafkaException) as refused:
            _create(admin, [_acl("t")])
        assert refused.value.args[0].code() == ErrorCode.cluster_authorization_failed
    finally:
        b.stop()


def test_acls_survive_kill_9(acl_broker: CoterieBroker) -> None:
    carol = "User:carol"
    admin = _admin(acl_broker)
    _create(admin, [_acl("durable", principal=carol),
                    _acl("durable-", PT.PREFIXED, op=OP.WRITE, principal=carol)])
    for future in admin.delete_acls([_filter(RT.TOPIC, "durable", PT.LITERAL, carol)],
                                    request_timeout=10).values():
        assert len(future.result(10)) == 1
    acl_broker.restart_after_kill9()
    assert _described(_admin(acl_broker), _filter(principal=carol)) == {
        (RT.TOPIC, "durable-", PT.PREFIXED, carol, OP.WRITE)}


def test_kafka_acls_adds_and_lists(acl_broker: CoterieBroker) -> None:
    """Kafka 4.2.1's AclCommand (`kafka-acls`), skipped without java and mvn."""
    main = "org.apache.kafka.tools.AclCommand"
    kafka_tool(main, acl_broker.bootstrap, "--add", "--allow-principal", "User:alice",
               "--operation", "Read", "--topic", "java-t")
    listed = kafka_tool(main, acl_broker.bootstrap, "--list", "--topic", "java-t")
    assert "name=java-t, patternType=LITERAL" in listed, listed
    assert "principal=User:alice, host=*, operation=READ, permissionType=ALLOW" in listed, listed
