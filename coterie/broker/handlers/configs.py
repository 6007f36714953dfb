"""DescribeConfigs v1-v4, IncrementalAlterConfigs v0-v1 and AlterConfigs v0-v2: topic and
broker configs as Kafka 4.2 describes and changes them.

A topic's answer lists every topic config Kafka 4.2 lists (coterie.log.config
`TOPIC_CONFIG_DEFS`), with the value the log acts on, the source (the topic's own setting,
a dynamic broker config, the broker's file or command line, or the default) and, when asked,
the synonyms: the topic setting, then the broker properties that set its default, every unit
of them (coterie.log.config `synonym_chain`). A broker's answer (coterie.broker.dynamic_configs
`describe`) lists the settings coterie reads, Kafka's dynamic broker configs and the broker
properties of the topic configs, each with Kafka's type, read-only flag, source and synonyms;
resource name "" is the cluster-wide dynamic default (only what is set there). Group configs
are in coterie.broker.group_configs, broker loggers (their levels, changed at run time) in
coterie.broker.loggers. Asked for documentation, topic and group configs carry a sentence on
what they mean (coterie.log.config_docs); broker properties carry none (null).

A topic's configs change as Kafka changes them: IncrementalAlterConfigs sets, deletes,
appends to or subtracts from single settings (append and subtract only for list settings,
starting from the default when the resource has no setting of its own); the legacy
AlterConfigs replaces the resource's whole set. Every change is checked first (unknown names
and unusable values are INVALID_CONFIG with Kafka's message; a name twice in one resource is
INVALID_REQUEST), then written durably with the topic's metadata and applied to its
partitions at once (retention, segment size and roll time, message size, cleanup policy);
`validate_only` checks and changes nothing. A broker's configs change the same way, for
this broker (its id) or the cluster (""), through coterie.broker.dynamic_configs; what Kafka
refuses there (static names, bad values, per-broker configs as the cluster default) is
INVALID_REQUEST with Kafka's message, as Kafka answers.

ACLs (when an authorizer is configured), as Kafka 4.2 checks them (ConfigHelper for
DescribeConfigs, the controller's authorizeAlterResource for the changes): describing a
resource needs DESCRIBE_CONFIGS and changing it ALTER_CONFIGS, on the topic for a topic, on
the group for a group, on the cluster for a broker or a broker's loggers; else the resource
is answered TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED or
CLUSTER_AUTHORIZATION_FAILED with Kafka's message, before any other check (but a resource
named twice in one change, INVALID_REQUEST first, as in Kafka). DescribeConfigs answers the
refused resources after the others, in Kafka's order.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker import loggers
from coterie.broker.acls import BrokerAuthorizer, enforcing
from coterie.broker.config_defs import config_type, kafka_default
from coterie.broker.context import RequestContext
from coterie.broker.dynamic_configs import BROKER as BROKER_SCOPE
from coterie.broker.dynamic_configs import CLUSTER as CLUSTER_SCOPE
from coterie.broker.dynamic_configs import NotDynamic
from coterie.broker.handlers.known_topics import after_topics_known
from coterie.common.limits import shown
from coterie.log.config import (
    DEFAULT_CONFIG,
    LIST,
    TOPIC_CONFIG_DEFS,
    DescribedConfig,
    describe_topic_configs,
)
from coterie.log.errors import InvalidConfigError, StorageError, UnknownTopicError
from coterie.log.names import validate_topic_name
from coterie.security import CLUSTER_NAME, AclOperation, ResourceType

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32

# Per config resource type: the ACL resource an operation on its configs is checked on
# (None: the resource's own name; else this one), and the error when refused, with Kafka's
# message.
_ACL_RESOURCE: dict[int, tuple[ResourceType, str | None, ErrorCode, str]] = {
    TOPIC: (ResourceType.TOPIC, None, ErrorCode.topic_authorization_failed,
            "Topic authorization failed."),
    GROUP: (ResourceType.GROUP, None, ErrorCode.group_authorization_failed,
            "Group authorization failed."),
    BROKER: (ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed,
             "Cluster authorization failed."),
    BROKER_LOGGER: (ResourceType.CLUSTER, CLUSTER_NAME,
                    ErrorCode.cluster_authorization_failed, "Cluster authorization failed."),
}


def _acl_refusal(ctx: RequestContext, authorizer: BrokerAuthorizer | None,
                 operation: AclOperation, kind: int, name: str) -> tuple[ErrorCode, str] | None:
    """The error and message when the principal may not perform `operation` on the configs
    of resource (`kind`, `name`); None when it may, when no authorizer is configured, or
    when the type is not one Kafka checks (coterie refuses those itself)."""
    if authorizer is None or kind not in _ACL_RESOURCE:
        return None
    resource_type, fixed_name, code, message = _ACL_RESOURCE[kind]
    if authorizer.authorize(ctx, operation, resource_type,
                            name if fixed_name is None else fixed_name):
        return None
    return code, message


def describe_configs(ctx: RequestContext, request: Any) -> Any:
    return after_topics_known(ctx, _topic_names(request), lambda: _describe_all(ctx, request))


def _topic_names(request: Any) -> list[str]:
    return [r.resource_name for r in request.resources if r.resource_type == TOPIC]


def _describe_all(ctx: RequestContext, request: Any) -> Any:
    synonyms = bool(getattr(request, "include_synonyms", False))
    docs = bool(getattr(request, "include_documentation", False))
    authorizer = enforcing(ctx)
    results, refused = [], []
    for r in request.resources:
        refusal = _acl_refusal(ctx, authorizer, AclOperation.DESCRIBE_CONFIGS,
                               r.resource_type, r.resource_name)
        if refusal is None:
            results.append(_describe(ctx, r, synonyms, docs))
        else:
            refused.append({"resource_type": r.resource_type,
                            "resource_name": r.resource_name, "error_code": refusal[0],
                            "error_message": refusal[1], "configs": []})
    return ctx.respond({"results": results + refused})


def _describe(ctx: RequestContext, resource: Any, synonyms: bool,
              docs: bool) -> dict[str, Any]:
    kind, name = resource.resource_type, resource.resource_name
    result: dict[str, Any] = {"resource_type": kind, "resource_name": name,
                              "error_code": ErrorCode.none, "error_message": None,
                              "configs": []}
    config = ctx.services.config
    if kind == TOPIC:
        info = ctx.services.logs.topics.get(name)
        invalid = validate_topic_name(name) if info is None else None
        if invalid is not None:
            return {**result, "error_code": ErrorCode.invalid_topic_exception,
                    "error_message": invalid}
        if info is None:
            return {**result, "error_code": ErrorCode.unknown_topic_or_partition,
                    "error_message": f"Topic {shown(name)} does not exist."}
        explicit = {k: config.props[k] for k in config.explicit if k in config.props}
        layers = _dynamic_layers(ctx)
        described = describe_topic_configs(explicit, info.configs, layers[BROKER_SCOPE],
                                           layers[CLUSTER_SCOPE])
    elif kind == GROUP and ctx.services.group_configs is not None:
        described = ctx.services.group_configs.describe(name)
    elif kind == BROKER_LOGGER:
        if name.strip() != str(config.node_id):
            return {**result, "error_code": ErrorCode.invalid_request,
                    "error_message": f"Unexpected broker id, expected {config.node_id} but "
                                     f"received {shown(name)}"}
        described = loggers.describe()
    elif kind == BROKER:
        if name != "" and name.strip() != str(config.node_id):
            return {**result, "error_code": ErrorCode.invalid_request,
                    "error_message": f"Unexpected broker id, expected {config.node_id} "
                                     f"or empty string, but received {shown(name)}"}
        store = ctx.services.dynamic_configs
        described = [] if store is None else store.describe(per_broker=name != "")
    else:
        return {**result, "error_code": ErrorCode.invalid_request,
                "error_message": f"coterie does not describe resource type {kind}"}
    keys = resource.configuration_keys
    if keys is not None:
        wanted = set(keys)
        described = [d for d in described if d.name in wanted]
    result["configs"] = [_entry(d, synonyms, docs) for d in described]
    return result


def _entry(d: DescribedConfig, synonyms: bool, docs: bool) -> dict[str, Any]:
    hide = d.sensitive  # a password's value is never sent, as in Kafka
    return {"name": d.name, "value": None if hide else d.value, "read_only": d.read_only,
            "config_source": d.source, "is_default": d.source == DEFAULT_CONFIG,
            "is_sensitive": d.sensitive, "config_type": d.type,
            "documentation": d.documentation if docs else None,
            "synonyms": [{"name": n, "value": None if hide else v, "source": s}
                         for n, v, s in d.synonyms] if synonyms else []}


def _dynamic_layers(ctx: RequestContext) -> dict[str, dict[str, str]]:
    store = ctx.services.dynamic_configs
    if store is None:
        return {CLUSTER_SCOPE: {}, BROKER_SCOPE: {}}
    return store.layers


# -- changing configs -------------------------------------------------------------------------
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    return after_topics_known(ctx, _topic_names(request),
                              lambda: _alter(ctx, request, incremental=True))


def alter_configs(ctx: RequestContext, request: Any) -> Any:
    return after_topics_known(ctx, _topic_names(request),
                              lambda: _alter(ctx, request, incremental=False))


def _alter(ctx: RequestContext, request: Any, incremental: bool) -> Any:
    seen: dict[tuple[int, str], int] = {}
    for r in request.resources:
        key = (r.resource_type, r.resource_name)
        seen[key] = seen.get(key, 0) + 1
    answers = []
    shared: list[tuple[dict[str, Any], int, str, dict[str, str]]] = []  # for a cluster's db
    authorizer = enforcing(ctx)
    for r in request.resources:
        answer = {"resource_type": r.resource_type, "resource_name": r.resource_name,
                  "error_code": ErrorCode.none, "error_message": None}
        try:
            if seen[(r.resource_type, r.resource_name)] > 1:
                raise _Refused(ErrorCode.invalid_request,
                               f"Duplicate resource {r.resource_name!r} in the request")
            if incremental or r.resource_type != BROKER_LOGGER:  # else refused as Kafka
                refusal = _acl_refusal(ctx, authorizer, AclOperation.ALTER_CONFIGS,
                                       r.resource_type, r.resource_name)
                if refusal is not None:
                    raise _Refused(*refusal)
            configs = _alter_one(ctx, r, incremental, bool(request.validate_only))
            if configs is not None:
                shared.append((answer, r.resource_type, r.resource_name, configs))
        except _Refused as refused:
            answer.update(error_code=refused.code, error_message=refused.message)
        answers.append(answer)
    if shared:
        return _alter_in_cluster(ctx, answers, shared)
    return ctx.respond({"responses": answers})


async def _alter_in_cluster(ctx: RequestContext, answers: list[dict[str, Any]],
                            shared: list[tuple[dict[str, Any], int, str, dict[str, str]]]
                            ) -> Any:
    """A cluster broker's topic and group configs and the cluster-wide broker configs go to
    the database first, so that every broker describes and applies them
    (coterie.broker.cluster `alter_topic_configs`, `alter_group_configs`,
    `alter_cluster_broker_configs`)."""
    cluster = ctx.services.cluster
    for answer, kind, name, configs in shared:
        what = {TOPIC: "topic", GROUP: "group"}.get(kind, "broker")
        try:
            if kind == TOPIC:
                await cluster.alter_topic_configs(name, configs)
            elif kind == GROUP:
                await cluster.alter_group_configs(name, configs)
            else:
                await cluster.alter_cluster_broker_configs(configs)
        except UnknownTopicError as e:
            answer.update(error_code=ErrorCode.unknown_topic_or_partition, error_message=str(e))
        except (StorageError, OSError) as e:
            answer.update(error_code=ErrorCode.kafka_storage_error,
                          error_message=f"cannot write the configs of {what} "
                                        f"'{shown(name)}': {e}")
    return ctx.respond({"responses": answers})


def _alter_one(ctx: RequestContext, resource: Any, incremental: bool,
               validate_only: bool) -> dict[str, str] | None:
    """Change one resource's configs; for a topic of a cluster broker, only check them and
    return the new set, for the database (`_alter_in_cluster`)."""
    kind, name = resource.resource_type, resource.resource_name
    if kind == BROKER:
        return _alter_broker(ctx, resource, incremental, validate_only)
    if kind == GROUP and ctx.services.group_configs is not None:
        return _alter_group(ctx, resource, incremental, validate_only)
    if kind == BROKER_LOGGER:
        _alter_loggers(ctx, resource, incremental, validate_only)
        return None
    if kind != TOPIC:
        raise _Refused(ErrorCode.invalid_request,
                       f"coterie does not change resource type {kind}")
    logs = ctx.services.logs
    info = logs.topics.get(name)
    invalid = validate_topic_name(name) if info is None else None
    if invalid is not None:
        raise _Refused(ErrorCode.invalid_topic_exception, invalid)
    if info is None:
        raise _Refused(ErrorCode.unknown_topic_or_partition,
                       f"Topic '{shown(name)}' does not exist.")
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise _Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
    configs = _new_set(dict(info.configs), resource.configs, incremental, "topic")
    try:
        if validate_only or ctx.services.cluster is not None:
            logs.check_topic_configs(name, configs)
            return None if validate_only else configs
        logs.alter_topic_configs(name, configs)
        return None
    except UnknownTopicError as e:
        raise _Refused(ErrorCode.unknown_topic_or_partition, str(e)) from e
    except InvalidConfigError as e:
        raise _Refused(ErrorCode.invalid_config, str(e)) from e
    except (StorageError, OSError) as e:
        raise _Refused(ErrorCode.kafka_storage_error,
                       f"cannot write the configs of topic '{shown(name)}': {e}") from e


def _alter_group(ctx: RequestContext, resource: Any, incremental: bool,
                 validate_only: bool) -> dict[str, str] | None:
    """A group's own settings (coterie.broker.group_configs): any group id, existing or
    not, as in Kafka. A cluster broker only checks them here and returns the new set, for
    the database."""
    store = ctx.services.group_configs
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise _Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
    configs = _new_set(store.current(resource.resource_name), resource.configs, incremental,
                       "group")
    try:
        if validate_only or ctx.services.cluster is not None:
            store.check(configs)
            return None if validate_only else configs
        store.replace(resource.resource_name, configs)
        return None
    except InvalidConfigError as e:
        raise _Refused(ErrorCode.invalid_config, str(e)) from e
    except OSError as e:
        raise _Refused(ErrorCode.kafka_storage_error,
                       f"cannot write the configs of group '{shown(resource.resource_name)}': {e}"
                       ) from e


def _alter_broker(ctx: RequestContext, resource: Any, incremental: bool,
                  validate_only: bool) -> dict[str, str] | None:
    """Dynamic broker configs (coterie.broker.dynamic_configs): resource name "" for the
    cluster-wide default, this broker's id for this broker. What the store refuses is
    INVALID_REQUEST, as Kafka answers. A cluster broker only checks the cluster-wide set
    here and returns it, for the database."""
    store = ctx.services.dynamic_configs
    node = ctx.services.config.node_id
    name = resource.resource_name
    if name == "":
        scope = CLUSTER_SCOPE
    elif not name.strip().lstrip("+-").isdigit():
        raise _Refused(ErrorCode.invalid_request,
                       f"Node id must be an integer, but it is: {shown(name)}")
    elif int(name) != node:
        raise _Refused(ErrorCode.invalid_request,
                       f"Unexpected broker id, expected {node}, but received {shown(name)}")
    else:
        scope = BROKER_SCOPE
    if store is None:
        raise _Refused(ErrorCode.invalid_request, "broker configs cannot change at run time")
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise _Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
    configs = _new_set(dict(store.layers[scope]), resource.configs, incremental, "broker")
    shared = scope == CLUSTER_SCOPE and ctx.services.cluster is not None
    try:
        store.alter(scope, configs, validate_only or shared)
        return configs if shared and not validate_only else None
    except (NotDynamic, InvalidConfigError) as e:
        raise _Refused(ErrorCode.invalid_request, str(e)) from e
    except OSError as e:
        raise _Refused(ErrorCode.kafka_storage_error,
                       f"cannot write the broker configs: {e}") from e


def _alter_loggers(ctx: RequestContext, resource: Any, incremental: bool,
                   validate_only: bool) -> None:
    """Log levels of the broker's loggers, changed at run time (not kept across a restart,
    as in Kafka): SET a level, DELETE to inherit the root logger's again."""
    node = ctx.services.config.node_id
    if resource.resource_name.strip() != str(node):
        raise _Refused(ErrorCode.invalid_request, f"Unexpected broker id, expected {node} but "
                                                  f"received {shown(resource.resource_name)}")
    if not incremental:
        raise _Refused(ErrorCode.invalid_request,
                       "broker loggers are changed with IncrementalAlterConfigs")
    changes: list[tuple[str, str | None]] = []
    for c in resource.configs:
        if c.config_operation == SET:
            changes.append((c.name, c.value))
        elif c.config_operation == DELETE:
            changes.append((c.name, None))
        else:
            raise _Refused(ErrorCode.invalid_request,
                           f"{'APPEND' if c.config_operation == APPEND else 'SUBTRACT'} "
                           "operation is not allowed for the BROKER_LOGGER resource")
    try:
        loggers.check(changes)
    except ValueError as e:
        raise _Refused(ErrorCode.invalid_config, str(e)) from e
    if not validate_only:
        loggers.apply(changes)


def _new_set(current: dict[str, str], changes: Any, incremental: bool,
             kind: str) -> dict[str, str]:
    """The resource's settings after the request: IncrementalAlterConfigs' operations in
    order, or (legacy AlterConfigs) the given set replacing the old one."""
    if incremental:
        return _apply_ops(current, changes, kind)
    configs = {}
    for c in changes:
        if c.value is None:
            raise _null_value(kind, c.name)
        configs[c.name] = c.value
    return configs


def _null_value(kind: str, key: str) -> _Refused:
    """A SET without a value: Kafka's answer for the resource type."""
    if kind == "broker":
        return _Refused(ErrorCode.invalid_request, f"Null value not supported for : {key}")
    return _Refused(ErrorCode.invalid_config, f"Null value not supported for {kind} config '{key}'")


def _apply_ops(configs: dict[str, str], ops: Any, kind: str) -> dict[str, str]:
    """The settings after IncrementalAlterConfigs' operations, in order. Only list settings
    (of a topic or a broker) take append and subtract."""
    for op in ops:
        key, code, value = op.name, op.config_operation, op.value
        if code == DELETE:
            configs.pop(key, None)
            continue
        if code not in (SET, APPEND, SUBTRACT):
            raise _Refused(ErrorCode.invalid_request,
                           f"Unknown config operation {code} for {key}")
        if value is None:
            raise _null_value(kind, key)
        if code == SET:
            configs[key] = value
            continue
        if kind == "topic" and key not in TOPIC_CONFIG_DEFS:
            raise _Refused(ErrorCode.invalid_config, f"Unknown topic config name: {key}")
        list_default = _list_default(kind, key)
        if list_default is None:
            verb = "append" if code == APPEND else "subtract"
            raise _Refused(ErrorCode.invalid_config,
                           f"Config value {verb} is not allowed for config key: {key}")
        current = configs.get(key, list_default)
        items = [v.strip() for v in current.split(",") if v.strip()]
        given = [v.strip() for v in value.split(",") if v.strip()]
        if code == APPEND:
            items += [v for v in given if v not in items]
        else:
            items = [v for v in items if v not in given]
        configs[key] = ",".join(items)
    return configs


def _list_default(kind: str, key: str) -> str | None:
    """The default a list setting's append or subtract starts from when the resource has no
    value of its own; None when `key` is not a list setting of `kind`."""
    if kind == "topic":
        definition = TOPIC_CONFIG_DEFS[key]
        return definition.default if definition.type == LIST else None
    if kind == "broker" and config_type(key) == LIST:
        return kafka_default(key) or ""
    return None
