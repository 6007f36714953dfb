"""The metrics settings (coterie.broker.metrics; docs/operations.md): read apart from
the metrics themselves so that the broker's config checks (coterie.broker.config) can refuse
a bad value at start without importing the broker's parts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["METRICS_DEFAULTS", "MetricsConfigError", "MetricsSettings", "metrics_settings",
           "parse_listen"]

METRICS_DEFAULTS = {
    "metrics.listen": "",
    "metrics.group.partition.series.enable": "true",
    "metrics.series.max": "10000",
}


class MetricsConfigError(ValueError):
    """A metrics.* setting coterie cannot use."""


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    host: str
    port: int
    partition_series: bool
    series_max: int


def parse_listen(value: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:9404`; an empty host is every address) as (host,
    port); MetricsConfigError says what is wrong."""
    text = value.strip()
    host, colon, port_text = text.rpartition(":")
    if not colon:
        raise MetricsConfigError(f"metrics.listen={value!r}: expected HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise MetricsConfigError(f"metrics.listen={value!r}: write an IPv6 host in "
                                 "brackets, [::1]:9404")
    try:
        port = int(port_text)
    except ValueError:
        raise MetricsConfigError(f"metrics.listen={value!r}: the port is not a "
                                 "number") from None
    if not 0 <= port <= 65535:
        raise MetricsConfigError(f"metrics.listen={value!r}: the port must be 0 to 65535")
    return host or "0.0.0.0", port


def metrics_settings(props: Mapping[str, str]) -> MetricsSettings | None:
    """The metrics settings, None when `metrics.listen` is not set (metrics off)."""
    p = {**METRICS_DEFAULTS, **{k: v for k, v in props.items() if v is not None}}
    listen = p["metrics.listen"].strip()
    if not listen:
        return None
    host, port = parse_listen(listen)
    enable = p["metrics.group.partition.series.enable"].strip().lower()
    if enable not in ("true", "false"):
        raise MetricsConfigError("metrics.group.partition.series.enable="
                                 f"{enable!r} is not true or false")
    try:
        series_max = int(p["metrics.series.max"])
    except ValueError:
        raise MetricsConfigError(f"metrics.series.max={p['metrics.series.max']!r} is not "
                                 "an integer") from None
    if series_max < 0:
        raise MetricsConfigError("metrics.series.max must be 0 or more")
    return MetricsSettings(host, port, enable == "true", series_max)
