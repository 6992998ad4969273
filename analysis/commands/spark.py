"""`kafka-dissect spark`: the analysis tables of many captures, computed on Spark, as Parquet."""
from __future__ import annotations

import importlib.util
import sys

from dissector.cli import PLUGIN_HELP
from dissector.commands.common import add_keylog_option, parse_ports
from dissector.pipeline import MAX_FRAME
from dissector.session import LEVELS

from .. import parquet_codec


def add_parser(sub) -> None:
    p = sub.add_parser(
        "spark", help=PLUGIN_HELP["spark"],
        description="Dissect capture files (rotated files from one or several capture points; "
                    "files, directories, globs or any URI Spark reads) on Spark, and write "
                    "exchanges, partitions, records, issues and connections as Parquet under "
                    "DIR/<table>.parquet/. The files are read as one capture, in the order of "
                    "their first packet. Local mode (local[*]) unless --master or spark-submit "
                    "says otherwise.")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="capture files, directories (read recursively) or globs")
    p.add_argument("--out", metavar="DIR", required=True, help="directory for the Parquet tables")
    p.add_argument("--master", metavar="URL",
                   help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument("--port", action="append", metavar="PORT|auto",
                   help="broker port (repeatable; default 9092); 'auto' finds Kafka on any port")
    p.add_argument("--level", choices=LEVELS, default="bodies",
                   help="how deep to decode: headers, bodies (default), records (also fills "
                        "the records table)")
    p.add_argument("--max-frame", type=int, default=MAX_FRAME, metavar="BYTES",
                   help="largest Kafka message accepted (default 100 MiB)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting (repeatable)")
    add_keylog_option(p)
    parquet_codec.add_option(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from dissector.cli import UsageError
    from dissector.commands.common import keylog_from
    if importlib.util.find_spec("pyspark") is None:
        raise UsageError("the spark command needs pyspark: pip install 'kafka-dissector[spark]'")
    from analysis.spark import run as spark_run
    from analysis.spark.inputs import InputError
    from analysis.spark.session import NoJava
    ports, auto = parse_ports(args.port)
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--conf takes KEY=VALUE, not {item!r}")
        conf[key.strip()] = value
    keylog = keylog_from(args)
    try:
        result = spark_run(args.inputs, args.out, args.master, ports=ports, auto=auto,
                           level=args.level, max_frame=args.max_frame, conf=conf, keylog=keylog,
                           codec=args.parquet_codec)
    except (InputError, NoJava) as exc:
        raise UsageError(str(exc)) from None
    rows = result.rows
    print(f"{len(result.files)} files: {rows['exchanges']} exchanges, {rows['partitions']} "
          f"partition rows, {rows['records']} records, {rows['issues']} issues, "
          f"{rows['connections']} connections -> {args.out} ({result.seconds:.1f} s)",
          file=sys.stderr)
    for message in result.errors:
        print(f"kafka-dissect: error: {message}", file=sys.stderr)
    if not (auto or result.errors or rows["exchanges"]):
        _no_traffic(result.files, ports)
    return 2 if result.errors else 0


def _no_traffic(files, ports) -> None:
    """Where the broker ports gave no exchange: the busiest TCP server ports of the local
    input files (dissector.capture_survey), as the other commands name them."""
    from analysis.spark.inputs import local_path
    from dissector.capture_survey import hint
    local = [path for path in map(local_path, files) if path is not None]
    line = hint(local, ports) if local else None
    if line:
        print(f"kafka-dissect: {line}", file=sys.stderr)
