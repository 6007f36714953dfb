"""The ACL handlers in-process (coterie.broker.handlers.acls) over a single broker's
authorizer (coterie.broker.acls): the ACL file is what a restarted broker finds, the
settings are read as Kafka reads them, and any well-formed CreateAcls, DescribeAcls or
DeleteAcls, odd codes and nulls included, is answered with an encodable response."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.errors import ErrorCode

from coterie.broker.acls import (
    ACL_FILE,
    AuthorizerConfigError,
    BrokerAuthorizer,
    authorizer_settings,
)
from coterie.broker.config import BrokerConfig, ConfigError
from coterie.broker.context import RequestContext
from coterie.broker.handlers import acls as handlers
from coterie.security import AclOperation, AuthorizerSettings, ResourceType
from coterie.wire.codec import encode_response, request_schema
from tests.wire_requests import entity

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUPER = AuthorizerSettings(frozenset({"User:ANONYMOUS"}))
HANDLERS = {29: handlers.describe_acls, 30: handlers.create_acls, 31: handlers.delete_acls}


def _ctx(authorizer: BrokerAuthorizer, api_key: int, version: int) -> RequestContext:
    services = SimpleNamespace(authorizer=authorizer, cluster=None)
    return RequestContext(services, api_key, version, 1, "test",  # type: ignore[arg-type]
                          "10.0.0.9:4242")


def _answer(authorizer: BrokerAuthorizer, api_key: int, version: int, request: Any) -> Any:
    out = HANDLERS[api_key](_ctx(authorizer, api_key, version), request)
    if inspect.isawaitable(out):
        out = asyncio.run(out)
    encode_response(1, out, api_key, version)  # the wire takes it
    return out


def test_settings_are_read_as_kafka_reads_them() -> None:
    assert authorizer_settings({}) is None
    assert authorizer_settings({"authorizer.class.name": " "}) is None
    s = authorizer_settings({"authorizer.class.name": STANDARD,
                             "super.users": " User:admin ; User:CN=a,O=b;;",
                             "allow.everyone.if.no.acl.found": "TRUE"})
    assert s == AuthorizerSettings(frozenset({"User:admin", "User:CN=a,O=b"}), True)
    assert authorizer_settings({"authorizer.class.name": "kafka.security.authorizer."
                                "AclAuthorizer", "allow.everyone.if.no.acl.found": "yes"}
                               ) == AuthorizerSettings()
    with pytest.raises(AuthorizerConfigError, match=r"authorizer\.class\.name=com\.acme\.Auth: "):
        authorizer_settings({"authorizer.class.name": "com.acme.Auth"})
    with pytest.raises(AuthorizerConfigError, match=r"super\.users: 'admin' is not a principal"):
        authorizer_settings({"authorizer.class.name": STANDARD, "super.users": "admin"})


def test_an_unknown_authorizer_class_stops_the_broker_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="other classes cannot be loaded"):
        BrokerConfig.load("127.0.0.1", 0, tmp_path,
                          overrides={"authorizer.class.name": "com.acme.Auth"})
    BrokerConfig.load("127.0.0.1", 0, tmp_path, overrides={"authorizer.class.name": STANDARD})


def test_the_acl_file_is_what_a_restarted_broker_finds(tmp_path: Path) -> None:
    first = BrokerAuthorizer(SUPER, tmp_path)
    answer = _answer(first, 30, 3, CreateAclsRequest(creations=tuple(
        AclCreation(resource_type=2, resource_name=name, resource_pattern_type=pattern,
                    principal="User:alice", host="*", operation=3, permission_type=3)
        for name, pattern in (("a", 3), ("b-", 4)))))
    assert [r.error_code for r in answer.results] == [ErrorCode.none] * 2
    assert (tmp_path / ACL_FILE).exists()
    again = BrokerAuthorizer(SUPER, tmp_path)
    assert again.acls == first.acls and len(again.acls) == 2
    ctx = _ctx(again, 0, 0)
    ctx.principal = "User:alice"
    assert again.authorize(ctx, AclOperation.READ, ResourceType.TOPIC, "b-1")
    assert again.authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, "a")
    assert not again.authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, "a")
    assert BrokerAuthorizer(None, tmp_path).authorize(ctx, AclOperation.WRITE,
                                                      ResourceType.TOPIC, "a")


_drawn = st.sampled_from([(k, v) for k in HANDLERS for v in (2, 3)]).flatmap(
    lambda kv: entity(request_schema(*kv)).map(lambda r: (kv[0], kv[1], r)))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_drawn)
def test_any_well_formed_acl_request_is_answered(tmp_path: Path, drawn: Any) -> None:
    api_key, version, request = drawn
    _answer(BrokerAuthorizer(SUPER, tmp_path), api_key, version, request)
    _answer(BrokerAuthorizer(None, tmp_path), api_key, version, request)
