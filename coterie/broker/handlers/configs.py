"""DescribeConfigs v1-v4, IncrementalAlterConfigs v0-v1 and AlterConfigs v0-v2: topic and
broker configs as Kafka 4.2 describes and changes them.

A topic's answer lists every topic config Kafka 4.2 lists (coterie.log.config
`TOPIC_CONFIG_DEFS`), with the value the log acts on, the source (the topic's own setting,
the broker's file or command line, or the default) and, when asked, the synonyms: the topic
setting, then the primary broker property as set and as defaulted. A broker's answer lists
the properties coterie reads, all read-only (coterie changes none of them at run time yet),
STATIC_BROKER_CONFIG when set in the file or on the command line, DEFAULT_CONFIG otherwise.
Resource name "" of a broker is the cluster-wide dynamic default, of which coterie has none
(an empty list, as Kafka answers when none is set). Group configs are in
coterie.broker.group_configs, broker loggers (their levels, changed at run time) in
coterie.broker.loggers. Asked for documentation, topic and group configs carry a sentence
on what they mean (coterie.log.config_docs); broker properties carry none (null).

A topic's configs change as Kafka changes them: IncrementalAlterConfigs sets, deletes,
appends to or subtracts from single settings (append and subtract only for list settings,
starting from the default when the topic has no setting of its own); the legacy AlterConfigs
replaces the topic's whole set. Every change is checked first (unknown names and unusable
values are INVALID_CONFIG with Kafka's message; a name twice in one resource is
INVALID_REQUEST), then written durably with the topic's metadata and applied to its
partitions at once (retention, segment size and roll time, message size, cleanup policy);
`validate_only` checks and changes nothing. Broker configs cannot be changed at run time yet.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker import loggers
from coterie.broker.config import DEFAULTS
from coterie.broker.context import RequestContext
from coterie.broker.dynamic_configs import BROKER as BROKER_SCOPE
from coterie.broker.dynamic_configs import CLUSTER as CLUSTER_SCOPE
from coterie.broker.dynamic_configs import DYNAMIC_KEYS, NotDynamic
from coterie.broker.groups import GROUP_DEFAULTS
from coterie.log.config import (
    BOOLEAN,
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    INT,
    LIST,
    LONG,
    STATIC_BROKER_CONFIG,
    STRING,
    TOPIC_CONFIG_DEFS,
    DescribedConfig,
    describe_topic_configs,
)
from coterie.log.errors import InvalidConfigError, StorageError, UnknownTopicError

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32


def describe_configs(ctx: RequestContext, request: Any) -> Any:
    synonyms = bool(getattr(request, "include_synonyms", False))
    docs = bool(getattr(request, "include_documentation", False))
    return ctx.respond({"results": [_describe(ctx, r, synonyms, docs)
                                    for r in request.resources]})


def _describe(ctx: RequestContext, resource: Any, synonyms: bool,
              docs: bool) -> dict[str, Any]:
    kind, name = resource.resource_type, resource.resource_name
    result: dict[str, Any] = {"resource_type": kind, "resource_name": name,
                              "error_code": ErrorCode.none, "error_message": None,
                              "configs": []}
    config = ctx.services.config
    if kind == TOPIC:
        info = ctx.services.logs.topics.get(name)
        if info is None:
            return {**result, "error_code": ErrorCode.unknown_topic_or_partition,
                    "error_message": f"Topic {name} does not exist."}
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
                                     f"received {name}"}
        described = loggers.describe()
    elif kind == BROKER:
        if name == "":  # the cluster-wide dynamic defaults
            described = [DescribedConfig(k, v, DYNAMIC_DEFAULT_BROKER_CONFIG, _type_of(v),
                                         ((k, v, DYNAMIC_DEFAULT_BROKER_CONFIG),))
                         for k, v in sorted(_dynamic_layers(ctx)[CLUSTER_SCOPE].items())]
        elif name.strip() != str(config.node_id):
            return {**result, "error_code": ErrorCode.invalid_request,
                    "error_message": f"Unexpected broker id, expected {config.node_id} "
                                     f"or empty string, but received {name}"}
        else:
            described = _broker_configs(ctx)
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


def _broker_configs(ctx: RequestContext) -> list[DescribedConfig]:
    """The properties coterie reads and the ones changed at run time, with their values
    now. Only the broker synonyms of topic configs can change at run time; the others are
    read-only, as Kafka's static broker configs are."""
    config = ctx.services.config
    layers = _dynamic_layers(ctx)
    defaults = {**GROUP_DEFAULTS, **DEFAULTS}
    static = {**defaults, **config.props}
    out = []
    for name in sorted({*static, *layers[CLUSTER_SCOPE], *layers[BROKER_SCOPE]}):
        synonyms: list[tuple[str, str | None, int]] = []
        for layer, source in ((layers[BROKER_SCOPE], DYNAMIC_BROKER_CONFIG),
                              (layers[CLUSTER_SCOPE], DYNAMIC_DEFAULT_BROKER_CONFIG)):
            if name in layer:
                synonyms.append((name, layer[name], source))
        if name in config.explicit:
            synonyms.append((name, static[name], STATIC_BROKER_CONFIG))
        if name in defaults:
            synonyms.append((name, defaults[name], DEFAULT_CONFIG))
        value, source = (synonyms[0][1], synonyms[0][2]) if synonyms else (
            static.get(name), DEFAULT_CONFIG)
        out.append(DescribedConfig(name, value, source, _type_of(value or ""),
                                   tuple(synonyms), read_only=name not in DYNAMIC_KEYS,
                                   sensitive=_sensitive(name)))
    return out


def _type_of(value: str) -> int:
    if value in ("true", "false"):
        return BOOLEAN
    try:
        n = int(value)
    except ValueError:
        return STRING
    return INT if -(2**31) <= n < 2**31 else LONG


def _sensitive(name: str) -> bool:
    return "password" in name or name.endswith(".secret") or "jaas" in name


# -- changing configs -------------------------------------------------------------------------
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    return _alter(ctx, request, incremental=True)


def alter_configs(ctx: RequestContext, request: Any) -> Any:
    return _alter(ctx, request, incremental=False)


def _alter(ctx: RequestContext, request: Any, incremental: bool) -> Any:
    seen: dict[tuple[int, str], int] = {}
    for r in request.resources:
        key = (r.resource_type, r.resource_name)
        seen[key] = seen.get(key, 0) + 1
    answers = []
    for r in request.resources:
        answer = {"resource_type": r.resource_type, "resource_name": r.resource_name,
                  "error_code": ErrorCode.none, "error_message": None}
        try:
            if seen[(r.resource_type, r.resource_name)] > 1:
                raise _Refused(ErrorCode.invalid_request,
                               f"Duplicate resource {r.resource_name!r} in the request")
            _alter_one(ctx, r, incremental, bool(request.validate_only))
        except _Refused as refused:
            answer.update(error_code=refused.code, error_message=refused.message)
        answers.append(answer)
    return ctx.respond({"responses": answers})


def _alter_one(ctx: RequestContext, resource: Any, incremental: bool,
               validate_only: bool) -> None:
    kind, name = resource.resource_type, resource.resource_name
    if kind == BROKER:
        _alter_broker(ctx, resource, incremental, validate_only)
        return
    if kind == GROUP and ctx.services.group_configs is not None:
        _alter_group(ctx, resource, incremental, validate_only)
        return
    if kind == BROKER_LOGGER:
        _alter_loggers(ctx, resource, incremental, validate_only)
        return
    if kind != TOPIC:
        raise _Refused(ErrorCode.invalid_request,
                       f"coterie does not change resource type {kind}")
    logs = ctx.services.logs
    info = logs.topics.get(name)
    if info is None:
        raise _Refused(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise _Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
    configs = _new_set(dict(info.configs), resource.configs, incremental, "topic")
    try:
        if validate_only:
            logs.check_topic_configs(name, configs)
        else:
            logs.alter_topic_configs(name, configs)
    except UnknownTopicError as e:
        raise _Refused(ErrorCode.unknown_topic_or_partition, str(e)) from e
    except InvalidConfigError as e:
        raise _Refused(ErrorCode.invalid_config, str(e)) from e
    except (StorageError, OSError) as e:
        raise _Refused(ErrorCode.kafka_storage_error,
                       f"cannot write the configs of topic '{name}': {e}") from e


def _alter_group(ctx: RequestContext, resource: Any, incremental: bool,
                 validate_only: bool) -> None:
    """A group's own settings (coterie.broker.group_configs): any group id, existing or
    not, as in Kafka."""
    store = ctx.services.group_configs
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise _Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
    configs = _new_set(store.current(resource.resource_name), resource.configs, incremental,
                       "group")
    try:
        if validate_only:
            store.check(configs)
        else:
            store.replace(resource.resource_name, configs)
    except InvalidConfigError as e:
        raise _Refused(ErrorCode.invalid_config, str(e)) from e
    except OSError as e:
        raise _Refused(ErrorCode.kafka_storage_error,
                       f"cannot write the configs of group '{resource.resource_name}': {e}"
                       ) from e


def _alter_broker(ctx: RequestContext, resource: Any, incremental: bool,
                  validate_only: bool) -> None:
    """Dynamic broker configs (coterie.broker.dynamic_configs): resource name "" for the
    cluster-wide default, this broker's id for this broker."""
    store = ctx.services.dynamic_configs
    config = ctx.services.config
    name = resource.resource_name
    if name == "":
        scope = CLUSTER_SCOPE
    elif name.strip() == str(config.node_id):
        scope = BROKER_SCOPE
    else:
        raise _Refused(ErrorCode.invalid_request, f"Unexpected broker id, expected "
                                                  f"{config.node_id} or empty string, but "
                                                  f"received {name}")
    if store is None:
        raise _Refused(ErrorCode.invalid_request, "broker configs cannot change at run time")
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise _Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
    configs = _new_set(dict(store.layers[scope]), resource.configs, incremental, "broker")
    try:
        store.check(configs)
        layers = store.with_scope(scope, configs)
        effective = store.overlay(config.props, layers)
        ctx.services.logs.set_broker_props(effective, check_only=True)
        if validate_only:
            return
        store.save(layers)
        ctx.services.logs.set_broker_props(effective)
    except NotDynamic as e:
        raise _Refused(ErrorCode.invalid_request, str(e)) from e
    except InvalidConfigError as e:
        raise _Refused(ErrorCode.invalid_config, str(e)) from e
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
                                                  f"received {resource.resource_name}")
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
            raise _Refused(ErrorCode.invalid_config,
                           f"Null value not supported for {kind} config '{c.name}'")
        configs[c.name] = c.value
    return configs


def _apply_ops(configs: dict[str, str], ops: Any, kind: str) -> dict[str, str]:
    """The settings after IncrementalAlterConfigs' operations, in order. Only a topic's
    list settings take append and subtract."""
    for op in ops:
        key, code, value = op.name, op.config_operation, op.value
        if code == DELETE:
            configs.pop(key, None)
            continue
        if code not in (SET, APPEND, SUBTRACT):
            raise _Refused(ErrorCode.invalid_request,
                           f"Unknown config operation {code} for {key}")
        if value is None:
            raise _Refused(ErrorCode.invalid_config,
                           f"Null value not supported for {kind} config '{key}'")
        if code == SET:
            configs[key] = value
            continue
        definition = TOPIC_CONFIG_DEFS.get(key) if kind == "topic" else None
        if definition is None and kind == "topic":
            raise _Refused(ErrorCode.invalid_config, f"Unknown topic config name: {key}")
        if definition is None or definition.type != LIST:
            verb = "append" if code == APPEND else "subtract"
            raise _Refused(ErrorCode.invalid_config,
                           f"Config value {verb} is not allowed for config key: {key}")
        assert definition is not None
        current = configs.get(key, definition.default)
        items = [v.strip() for v in current.split(",") if v.strip()]
        given = [v.strip() for v in value.split(",") if v.strip()]
        if code == APPEND:
            items += [v for v in given if v not in items]
        else:
            items = [v for v in items if v not in given]
        configs[key] = ",".join(items)
    return configs
