"""One small local Spark session for the Spark tests (2 cores, no UI, few shuffle partitions)."""
from __future__ import annotations

import pytest

from tests.support import require_module, require_tool

SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
}


@pytest.fixture(scope="session")
def spark():
    require_module("pyspark")
    require_tool("java")
    from analysis.spark.session import spark_session
    session = spark_session("local[2]", SPARK_CONF)
    yield session
    session.stop()
