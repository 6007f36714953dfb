"""Fixtures for the Spark data source tests: one SparkSession and one coterie broker per session.

Spark takes seconds to start and each query spawns Python workers, so everything is shared:
one `local[2]` session (UI off, two shuffle partitions, UTC) and one coterie broker, each test
on topics of its own. The tests skip, saying why, when pyspark or java is missing (each test
module checks for pyspark itself, the `spark` fixture for java).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.coterie_broker import CoterieBroker


def _session():
    """The shared session: `getOrCreate` returns the live one, or builds it again if another
    test module stopped it; registering the format again is harmless."""
    from pyspark.sql import SparkSession

    import coterie.spark

    session = (SparkSession.builder.master("local[2]")
               .appName("coterie-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.streaming.pollingDelay", "50ms")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    coterie.spark.register(session)
    return session


@pytest.fixture(scope="session")
def spark_environment() -> Iterator[None]:
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH: Spark needs a JVM")
    # Spark's Python workers must run this interpreter (it has coterie and its dependencies).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    yield
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


@pytest.fixture
def spark(spark_environment: None):
    """A live `local[2]` SparkSession with format "coterie" registered."""
    return _session()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoterieBroker]:
    """One coterie broker for the whole Spark test session."""
    root: Path = tmp_path_factory.mktemp("coterie-spark")
    b = CoterieBroker(root / "data")
    b.start()
    yield b
    b.stop()
