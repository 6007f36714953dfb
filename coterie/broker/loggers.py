"""The broker's loggers as Kafka's BROKER_LOGGER config resource shows them: every `coterie`
logger and the root, each with its level in Kafka's names (TRACE, DEBUG, INFO, WARN, ERROR,
FATAL, OFF), changeable at run time. A logger without a level of its own shows the level it
inherits; setting one gives it its own; deleting it inherits again (the root's cannot be
deleted). Nothing is kept across a restart, as in Kafka."""

from __future__ import annotations

import logging

from coterie.log.config import DescribedConfig

ROOT = "root"
DYNAMIC_BROKER_LOGGER_CONFIG = 6
_TO_PYTHON = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
              "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
              "OFF": logging.CRITICAL + 10}
_TO_KAFKA = {v: k for k, v in _TO_PYTHON.items()}


def _names() -> list[str]:
    known = [n for n in logging.root.manager.loggerDict
             if n == "coterie" or n.startswith("coterie.")]
    return [ROOT, *sorted(known)]


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT else logging.getLogger(name)


def _kafka_level(level: int) -> str:
    for python_level in sorted(_TO_KAFKA, reverse=True):
        if level >= python_level:
            return _TO_KAFKA[python_level]
    return "TRACE"


def describe() -> list[DescribedConfig]:
    return [DescribedConfig(name, _kafka_level(_logger(name).getEffectiveLevel()),
                            DYNAMIC_BROKER_LOGGER_CONFIG, 0, ()) for name in _names()]


def check(changes: list[tuple[str, str | None]]) -> None:
    """Raise ValueError (with Kafka's wording) unless every change can be made."""
    names = set(_names())
    for name, level in changes:
        if name not in names:
            raise ValueError(f"Logger {name} does not exist!")
        if level is None:
            if name == ROOT:
                raise ValueError("Removing the log level of the root logger is not allowed")
            continue
        if level.upper() not in _TO_PYTHON:
            raise ValueError(f"Cannot set the log level of {name} to {level} as it is not a "
                             f"supported log level. Valid log levels are "
                             f"{', '.join(_TO_PYTHON)}")


def apply(changes: list[tuple[str, str | None]]) -> None:
    for name, level in changes:
        _logger(name).setLevel(logging.NOTSET if level is None else _TO_PYTHON[level.upper()])
