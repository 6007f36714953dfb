"""DescribeConfigs v1-v4: topic and broker configs as Kafka 4.2 describes them.

A topic's answer lists every topic config Kafka 4.2 lists (coterie.log.config
`TOPIC_CONFIG_DEFS`), with the value the log acts on, the source (the topic's own setting,
the broker's file or command line, or the default) and, when asked, the synonyms: the topic
setting, then the primary broker property as set and as defaulted. A broker's answer lists
the properties coterie reads, all read-only (coterie changes none of them at run time yet),
STATIC_BROKER_CONFIG when set in the file or on the command line, DEFAULT_CONFIG otherwise.
Resource name "" of a broker is the cluster-wide dynamic default, of which coterie has none
(an empty list, as Kafka answers when none is set). Broker loggers and group configs are not
described yet: INVALID_REQUEST with a message that says so. Documentation strings are not
given (null), even when asked.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from coterie.broker.config import DEFAULTS
from coterie.broker.context import RequestContext
from coterie.broker.groups import GROUP_DEFAULTS
from coterie.log.config import (
    BOOLEAN,
    DEFAULT_CONFIG,
    INT,
    LONG,
    STATIC_BROKER_CONFIG,
    STRING,
    DescribedConfig,
    describe_topic_configs,
)

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32


def describe_configs(ctx: RequestContext, request: Any) -> Any:
    synonyms = bool(getattr(request, "include_synonyms", False))
    return ctx.respond({"results": [_describe(ctx, r, synonyms) for r in request.resources]})


def _describe(ctx: RequestContext, resource: Any, synonyms: bool) -> dict[str, Any]:
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
        described = describe_topic_configs(explicit, info.configs)
    elif kind == BROKER:
        if name == "":
            described = []  # no cluster-wide dynamic defaults
        elif name.strip() != str(config.node_id):
            return {**result, "error_code": ErrorCode.invalid_request,
                    "error_message": f"Unexpected broker id, expected {config.node_id} "
                                     f"or empty string, but received {name}"}
        else:
            described = _broker_configs(ctx)
    else:
        what = {BROKER_LOGGER: "broker loggers", GROUP: "group configs"}.get(
            kind, f"resource type {kind}")
        return {**result, "error_code": ErrorCode.invalid_request,
                "error_message": f"coterie does not describe {what} yet"}
    keys = resource.configuration_keys
    if keys is not None:
        wanted = set(keys)
        described = [d for d in described if d.name in wanted]
    result["configs"] = [_entry(d, synonyms) for d in described]
    return result


def _entry(d: DescribedConfig, synonyms: bool) -> dict[str, Any]:
    hide = d.sensitive  # a password's value is never sent, as in Kafka
    return {"name": d.name, "value": None if hide else d.value, "read_only": d.read_only,
            "config_source": d.source, "is_default": d.source == DEFAULT_CONFIG,
            "is_sensitive": d.sensitive, "config_type": d.type, "documentation": None,
            "synonyms": [{"name": n, "value": None if hide else v, "source": s}
                         for n, v, s in d.synonyms] if synonyms else []}


def _broker_configs(ctx: RequestContext) -> list[DescribedConfig]:
    """The properties coterie reads, with their values now: read-only, as static broker
    configs are."""
    config = ctx.services.config
    defaults = {**GROUP_DEFAULTS, **DEFAULTS}
    props = {**defaults, **config.props}
    out = []
    for name in sorted(props):
        value = props[name]
        default = defaults.get(name)
        synonyms: list[tuple[str, str | None, int]] = []
        if name in config.explicit:
            synonyms.append((name, value, STATIC_BROKER_CONFIG))
        if default is not None:
            synonyms.append((name, default, DEFAULT_CONFIG))
        source = STATIC_BROKER_CONFIG if name in config.explicit else DEFAULT_CONFIG
        out.append(DescribedConfig(name, value, source, _type_of(value), tuple(synonyms),
                                   read_only=True, sensitive=_sensitive(name)))
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
