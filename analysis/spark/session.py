"""The SparkSession: local mode by default, any cluster by master URL or spark-submit."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

DEFAULT_MASTER = "local[*]"
QUIET_LOG = Path(__file__).with_name("quiet.log4j2.properties")


class NoJava(RuntimeError):
    """Spark's driver needs a Java runtime and none is installed."""


def _check_java() -> None:
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return
    raise NoJava("Spark needs a Java runtime (Java 17 or newer): install one, e.g. "
                 "`apt-get install default-jre-headless`, or set JAVA_HOME")


def spark_session(master=None, conf=None, quiet=False):
    """A SparkSession for the job.

    master None: the master spark-submit gave, else local[*]. In local mode the workers run
    this interpreter; on a cluster the dissector's code is shipped to the executors (they need
    Python 3.11+ with pyarrow and pandas, the packages of the `spark` extra). conf: extra
    settings. quiet: Spark logs errors only.
    """
    from pyspark.sql import SparkSession
    _check_java()
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ   # driver started by spark-submit
    if master is None and not submitted:
        master = DEFAULT_MASTER
    local = master is not None and master.startswith("local")
    if local:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("kafka-dissect")
    if master is not None:
        builder = builder.master(master)
    settings = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.legacy.parquet.nanosAsLong": "true",   # our timestamps are nanoseconds
        "spark.sql.session.timeZone": "UTC",
    }
    if local:   # shuffle files stay on this machine's disk: compressing them costs more CPU than
        # the disk time it saves (measured on the benchmark corpus)
        settings.update({"spark.shuffle.compress": "false", "spark.shuffle.spill.compress": "false"})
        # The JVM only moves index rows and Arrow blobs here: its optimizing JIT compiler and
        # parallel GC threads cost more CPU than they save (measured: a third of a small run's
        # CPU), and in local mode they take it from the Python workers' cores.
        java = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
        if quiet:   # errors only from the start: setLogLevel comes after the start's chatter
            java += f" -Dlog4j2.configurationFile={QUIET_LOG.as_uri()}"
        settings["spark.driver.extraJavaOptions"] = java
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if quiet:   # Spark's own warnings are not the user's business on the command line
        spark.sparkContext.setLogLevel("ERROR")
    if not local:
        spark.sparkContext.addPyFile(str(_code_zip()))
    return spark


def _code_zip() -> Path:
    """The dissector and analysis packages as a zip for the executors' Python path."""
    root = Path(__file__).resolve().parents[2]
    path = Path(tempfile.mkdtemp(prefix="kafka-dissect-")) / "kafka_dissector.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for package in ("dissector", "analysis"):
            for f in sorted((root / package).rglob("*.py")):
                z.write(f, f.relative_to(root))
    return path
