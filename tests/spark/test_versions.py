"""The extras' version bounds fit together: PySpark supports the pandas and pyarrow that
`pip install '.[analysis,spark]'` resolves, so a user sees none of its compatibility warnings."""
from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

from tests.support import CAPTURES, require_module, require_tool


def test_pyspark_fully_supports_the_installed_pandas_and_pyarrow():
    require_module("pyspark")
    from pyspark.sql.pandas.utils import require_minimum_pandas_version, require_minimum_pyarrow_version
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # "does not yet fully support pandas >= 3.0.0" fails here
        require_minimum_pandas_version()
        require_minimum_pyarrow_version()


def test_spark_command_prints_no_warning(tmp_path):
    require_module("pyspark")
    require_tool("java")
    script = Path(sys.executable).with_name("kafka-dissect")
    run = subprocess.run([str(script), "spark", str(CAPTURES / "kafka_python.pcap"),
                          "--out", str(tmp_path / "out"), "--master", "local[1]",
                          "--conf", "spark.ui.enabled=false"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    # Python warnings print as "<file>:<line>: SomethingWarning: ..."; the JVM's own log lines do not
    assert not re.search(r"[A-Za-z]+Warning: ", run.stderr), run.stderr
    assert "does not yet fully support" not in run.stderr, run.stderr
    # nor Spark's chatter at every start (its log profile and level, WARN lines of the host's
    # name and Hadoop's native library): Spark logs errors only (quiet.log4j2.properties)
    for chatter in ("log4j profile", "Setting default log level", " WARN "):
        assert chatter not in run.stderr, run.stderr
