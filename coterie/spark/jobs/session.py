"""The Spark session every job starts from, with the coterie data source registered.

Local by default (`local[2]`: the jobs are demos and tests, on small machines), any cluster
with `--master`; the UI is off unless asked for, and shuffles are small, because the data
these jobs see is small. On a local master the Python workers run this interpreter, so they
import what the driver imports; on a cluster, PYSPARK_PYTHON is the cluster's business.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def spark_session(app: str, master: str = "local[2]", shuffle_partitions: int = 4,
                  ui: bool = False, conf: dict[str, str] | None = None) -> Any:
    """A SparkSession for `app` with format "coterie" available."""
    from pyspark.sql import SparkSession

    if master.startswith("local") and "PYSPARK_PYTHON" not in os.environ:
        # Local workers must import what this interpreter does (the job's own modules).
        os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (SparkSession.builder.appName(app).master(master)
               .config("spark.ui.enabled", str(ui).lower())
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def register(spark: Any) -> None:
    """Make format "coterie" available in `spark` (coterie.spark's own helper if present)."""
    import coterie.spark as source

    helper = getattr(source, "register", None)
    if helper is not None:
        helper(spark)
    else:
        spark.dataSource.register(source.CoterieDataSource)
