"""Captures -> pandas tables (exchanges, partitions, records, issues, connections), and Parquet.

Exchanges are streamed from the dissector straight into typed column builders; no Exchange object
is kept once its values are appended. `load()` keeps every table in memory (as Arrow batches);
`export()` streams each table's batches into its Parquet file, so its memory stays flat as
captures grow.
"""
from __future__ import annotations

import gc
import importlib
import os
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dissector.gc_pace import paced
from dissector.tables import EXCHANGE_COLUMN_NAMES, connection_tls_row, exchange_row, issue_row

from .columns import ColumnBuilder, table_schema, to_pandas
from .extras import exchange_extras
from .parquet_codec import DEFAULT as DEFAULT_CODEC
from .parquet_sink import ParquetSink
from .partition_columns import PartitionTable
from .records_table import RECORD_TABLE_COLUMNS, RecordTable
from .schema import (CONNECTION_COLUMNS, EXCHANGE_EXTRA_COLUMNS, PARTITION_COLUMNS,
                     exchange_columns, issue_columns)

TABLES = ("exchanges", "partitions", "records", "issues", "connections")
# computed from the tables above once they are whole (across connections and files), on first use
DERIVED = ("deliveries", "clients", "rebalances")
EXCHANGE_NAMES = EXCHANGE_COLUMN_NAMES + tuple(n for n, _ in EXCHANGE_EXTRA_COLUMNS)
_CLIENT_ID = EXCHANGE_NAMES.index("client_id")


def table_columns(name: str) -> tuple:
    """The (column, type name) pairs of table `name`."""
    return {"exchanges": exchange_columns(), "partitions": PARTITION_COLUMNS,
            "records": RECORD_TABLE_COLUMNS, "issues": issue_columns(),
            "connections": CONNECTION_COLUMNS}[name]


class Tables:
    """The analysis tables as Arrow-backed pandas DataFrames (and the Arrow tables they came from).

    `errors` lists one-line messages about unreadable or damaged captures. The DERIVED tables
    (`deliveries`, `clients`, `rebalances`: the functions of those names in the modules of those
    names) are computed on first use unless `arrow` holds them (read back from Parquet).
    """

    def __init__(self, arrow: dict, errors=()):
        self.arrow = arrow
        self.errors = list(errors)
        for name in TABLES:
            setattr(self, name, to_pandas(arrow[name]))
        self._derived = {name: to_pandas(arrow[name]) for name in DERIVED if name in arrow}

    @property
    def deliveries(self):
        """End-to-end record latency: analysis.deliveries.deliveries(self), computed once."""
        return self._derive("deliveries")

    @property
    def clients(self):
        """Who talks to whom: analysis.clients.clients(self), computed once."""
        return self._derive("clients")

    @property
    def rebalances(self):
        """Per consumer group and generation: analysis.rebalances.rebalances(self), computed
        once."""
        return self._derive("rebalances")

    def _derive(self, name):
        if name not in self._derived:
            self._derived[name] = getattr(_derived_module(name), name)(self)
        return self._derived[name]

    def write_parquet(self, directory, codec=DEFAULT_CODEC) -> list[Path]:
        """One Parquet file per table in `directory` (created if needed), compressed with
        `codec` (analysis.parquet_codec)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for name in TABLES:
            path = out / f"{name}.parquet"
            pq.write_table(self.arrow[name], path, compression=codec)
            paths.append(path)
        for name in DERIVED:
            path = out / f"{name}.parquet"
            pq.write_table(pa.Table.from_pandas(getattr(self, name), preserve_index=False), path,
                           compression=codec)
            paths.append(path)
        return paths

    def __repr__(self):
        sizes = ", ".join(f"{n}={len(getattr(self, n))}" for n in TABLES)
        return f"Tables({sizes})"


class _Collector:
    """Column builders for one load, fed exchange by exchange. `sinks` maps table names to
    where their full batches go (export); tables without one are kept for arrow()."""

    def __init__(self, records: bool, keep=None, sinks=None):
        self.sinks = sinks or {}
        self.exchanges, self.issues = (ColumnBuilder(table_columns(name), self.sinks.get(name))
                                       for name in ("exchanges", "issues"))
        self.partitions = PartitionTable(self.sinks.get("partitions"))
        self.records = RecordTable(self.sinks.get("records"))
        self.conn_stats = {}   # connection_id -> [exchanges, request bytes, response bytes, ids]
        self.want_records = records
        self.keep = keep

    def add(self, ex) -> None:
        row = self.row(ex)
        if row is None:
            return
        self.exchanges.append(row)
        self.partitions.add_exchange(ex, row)   # straight into its columns: no piece to copy
        for issue in ex.issues:
            self.issues.append(issue_row(issue))
        self.count(row[0], row[_CLIENT_ID], ex.request.length if ex.request is not None else 0,
                   ex.response.length if ex.response is not None else 0)
        if self.want_records:
            self.records.add_exchange(ex)

    def row(self, ex):
        """The exchange's row; None when the filter leaves it out."""
        row = exchange_row(ex) + exchange_extras(ex)
        if self.keep is not None and not self.keep(dict(zip(EXCHANGE_NAMES, row))):
            return None
        return row

    def count(self, connection_id, client_id, request_bytes, response_bytes) -> None:
        """An exchange in its connection's totals."""
        stats = self.conn_stats.get(connection_id)
        if stats is None:
            stats = self.conn_stats[connection_id] = [0, 0, 0, []]
        stats[0] += 1
        stats[1] += request_bytes
        stats[2] += response_bytes
        if client_id is not None and client_id not in stats[3]:
            stats[3].append(client_id)

    def count_all(self, connection_ids, client_ids, request_bytes, response_bytes) -> None:
        """count() of exchanges given column by column (a parallel run's step, in order): the
        totals summed per connection in numpy, each connection's client ids in the order they
        first came."""
        ids = np.asarray(connection_ids)
        if ids.dtype.kind != "i":   # not all plain ids: one by one
            for values in zip(connection_ids, client_ids, request_bytes, response_bytes):
                self.count(*values)
            return
        conns, which = np.unique(ids, return_inverse=True)
        sums = np.zeros((2, len(conns)), np.int64)
        np.add.at(sums[0], which, np.asarray(request_bytes, np.int64))
        np.add.at(sums[1], which, np.asarray(response_bytes, np.int64))
        stats = self.conn_stats
        for c, n, req, resp in zip(conns.tolist(), np.bincount(which).tolist(),
                                   sums[0].tolist(), sums[1].tolist()):
            s = stats.get(c)
            if s is None:
                s = stats[c] = [0, 0, 0, []]
            s[0] += n
            s[1] += req
            s[2] += resp
        for c, client_id in dict.fromkeys(zip(connection_ids, client_ids)):
            if client_id is not None and client_id not in stats[c][3]:
                stats[c][3].append(client_id)

    def finish(self, run, capture: str) -> None:
        self.issues.append_rows(issue_row(issue) for issue in run.issues)
        conns = ColumnBuilder(CONNECTION_COLUMNS, self.sinks.get("connections"))
        for c in run.connections:
            s = self.conn_stats.get(c.connection_id, (0, 0, 0, []))
            conns.append((c.connection_id, capture, c.client_ip, c.client_port, c.broker_ip,
                          c.broker_port, c.first_ts, c.last_ts, c.first_packet, s[0], s[1], s[2],
                          s[3]) + connection_tls_row(c))
        self.connections = conns
        for name in TABLES:
            getattr(self, name).finish()

    def arrow(self) -> dict:
        return {"exchanges": self.exchanges.table(), "partitions": self.partitions.table(),
                "records": self.records.table(), "issues": self.issues.table(),
                "connections": self.connections.table()}


def _ports(port):
    """(ports, auto) from a port number, a string ("9092", "auto"), or a list of them."""
    from dissector.pipeline import DEFAULT_PORTS
    if port is None:
        return DEFAULT_PORTS, False
    given = [port] if isinstance(port, (int, str)) else list(port)
    auto = "auto" in given
    try:
        ports = tuple(int(p) for p in given if p != "auto")
    except (TypeError, ValueError):
        raise ValueError(f"port must be a port number, a list of them or 'auto', not {port!r}") \
            from None
    return (ports or DEFAULT_PORTS) if not auto else ports, auto


def keylog_or_default(keylog):
    """The key material to decrypt TLS with: `keylog` as given (a path, a list of paths or a
    dissector.tls.keylog.KeyLog), else the KeyLog of the file $SSLKEYLOGFILE names, else None
    (no keys). That variable is often set for other programs and its file written only once a
    TLS client runs: a file it names that cannot be read is a UserWarning, and no keys."""
    if keylog is not None:
        return keylog
    from dissector.pipeline import as_keylog
    from dissector.tls.keylog import default_paths
    paths = default_paths()
    try:
        return as_keylog(paths) if paths else None
    except OSError as exc:
        from .user_warning import warn_user
        warn_user(f"SSLKEYLOGFILE {paths[0]}: {exc.strerror or exc}: TLS is read without its "
                  f"keys")
        return None


def kept_bodies():
    """The bodies a load keeps: all but ApiVersions' (cluster_facts decodes an answer again
    only where it is new, and clients that reconnect get the same one on each connection),
    Produce's and Fetch's (the byte walk hands over what the partitions table and the request
    settings read of them: partition_columns.row_specs)."""
    from dissector.decoding import AllBut
    from .cluster_facts import API_VERSIONS
    from .extras import WALKED_NESTED, WALKED_SETTINGS
    from .partition_columns import row_specs
    return AllBut({API_VERSIONS}, row_specs(WALKED_SETTINGS, WALKED_NESTED))


@paced()
def collect(paths, port=None, *, level="bodies", keep=None, progress=None, max_frame=None,
            sinks=None, keylog=None, jobs=None):
    """Dissect `paths` (read in order as one capture) into a _Collector; `keep(row_dict)` selects
    exchanges; `sinks` as for _Collector; `keylog` as for keylog_or_default; jobs: worker
    processes (dissector.parallel; None: as the CLI's --jobs default). Returns (collector,
    dissection)."""
    from dissector.parallel import jobs_for
    from dissector.pipeline import dissect   # imported here: the core's heavy part
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    ports, auto = _ports(port)
    kwargs = {} if max_frame is None else {"max_frame": max_frame}
    run = dissect(paths, ports, auto=auto, level=level, progress=progress,
                  keylog=keylog_or_default(keylog), keep_bodies=kept_bodies(), **kwargs)
    col = _Collector(level == "records", keep, sinks)
    capture = ", ".join(os.path.basename(p) for p in paths)
    jobs = jobs_for(jobs, paths, auto)
    if jobs > 1:
        from dissector.parallel import Diverged
        try:
            result = _parallel(paths, ports, level, keep, progress, col, jobs,
                               run.dissector.tls.keylog, **kwargs)
            col.finish(result, capture)
            return col, result
        except Diverged:   # one process from the start: its batches are cut elsewhere
            for sink in col.sinks.values():
                sink.reset()
            col = _Collector(level == "records", keep, sinks)
    for ex in run:
        col.add(ex)
    col.finish(run, capture)
    return col, run


def _parallel(paths, ports, level, keep, progress, col, jobs, keylog, **kwargs):
    """The exchanges' rows made by `jobs` worker processes (parallel_tables), added to `col`
    in order."""
    from dissector.parallel import Plan, run

    from .parallel_tables import WorkerTables, add_step
    importing = None   # pandas, on a thread once the workers run

    def render():   # in each worker
        _without_pandas()
        return WorkerTables(_Collector(False, keep).row, table_columns("exchanges"),
                            table_columns("issues"), _CLIENT_ID, col.want_records).render

    def write(tokens, _first, whose, shared):
        nonlocal importing
        if importing is None:
            importing = _import_meanwhile("pandas")
        add_step(col, tokens, whose, shared)
    plan = Plan(paths, render, jobs, ports, level=level, keylog=keylog, tables=True,
                keep_bodies=kept_bodies(), **kwargs)
    return run(plan, write, progress)


def _without_pandas():
    """In a worker: pyarrow imports pandas, if it can, at its first pa.array, only to ask
    whether the values are a pandas object (they never are here); 0.4 s a worker. A parent
    that has pandas already (a notebook) gave it to the workers too."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())


class _NoPandas:
    """An import finder for which pandas is not there (pyarrow then goes on without it)."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not imported in a worker", name=name)
        return None


def _import_meanwhile(name):
    """Import module `name` on a thread (the parent while its workers run: the derived tables
    need pandas at the end, and before the workers started its import held them up)."""
    thread = threading.Thread(target=importlib.import_module, args=(name,), daemon=True)
    thread.start()
    return thread


def load(paths, port=None, records=False, filter=None, level=None, progress=None,
         keylog=None, jobs=None) -> Tables:
    """Dissect one or more captures (read in order as one capture, like the CLI) into Tables.

    port: a port number, a list of them, or "auto" (default 9092). records=True decodes every
    record into the `records` table (slower). filter: an expression over exchange columns
    (dissector.filters), e.g. 'api_name == "Fetch" and latency_ms > 100'. level: "headers"
    for a fast load without bodies (no partitions, errors or topics), default "bodies" (or
    "records" when records=True). keylog: TLS key log file(s) (NSS format) to decrypt TLS
    connections with, a path or a list of them (default: $SSLKEYLOGFILE, if set). jobs: worker
    processes to split the captures over by connection (dissector.parallel), by default as the
    CLI's --jobs: one per core for captures over 64 MiB in all, else 1; the tables are the same
    whatever their number.
    """
    if level is None:
        level = "records" if records else "bodies"
    keep = None
    if filter:
        from dissector.filters import compile_filter
        keep = compile_filter(filter)
    col, run = collect(paths, port, level=level, keep=keep, progress=progress, keylog=keylog,
                       jobs=jobs)
    _capture_hints(paths, port, run)
    return Tables(col.arrow(), run.errors)


def _capture_hints(paths, port, run):
    """What the commands print of a look at the capture's first packets (report_capture_hints),
    as UserWarnings: where its TCP servers are when the broker ports gave no exchange, and
    packets the snapshot length cut."""
    from dissector.capture_survey import hints

    from .user_warning import warn_user
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    for line in hints(run, paths, *_ports(port), option="port="):
        warn_user(line)


def export(paths, directory, port=None, *, level="bodies", keep=None, progress=None,
           max_frame=None, keylog=None, jobs=None, codec=DEFAULT_CODEC):
    """Dissect `paths` like load() (`keylog` as there) and write the tables as Parquet files in
    `directory` (created if needed) as they fill, batch by batch (one row group each), compressed
    with `codec` (analysis.parquet_codec): memory stays bounded however large the
    captures. load_parquet(directory) reads back what load() returns. Returns (collector,
    dissection): len(collector.exchanges) etc. count the rows written, and dissection.errors
    lists damaged captures."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    sinks = {}
    try:
        for name in TABLES:
            sinks[name] = ParquetSink(out / f"{name}.parquet", table_schema(table_columns(name)),
                                      codec)
        result = collect(paths, port, level=level, keep=keep, progress=progress,
                         max_frame=max_frame, sinks=sinks, keylog=keylog, jobs=jobs)
    finally:
        for sink in sinks.values():
            sink.close()
    write_derived(out, codec)
    return result


def _derived_module(name):
    from importlib import import_module
    return import_module(f".{name}", __package__)


def write_derived(directory, codec=DEFAULT_CODEC) -> None:
    """The DERIVED tables of the Parquet tables in `directory`, written next to them (compressed
    with `codec`): each computed from the columns its module NEEDS (of the rows of the api keys
    its ROWS names, when it does), read back (export streamed the tables out of memory)."""
    d = Path(directory)
    for name in DERIVED:
        module = _derived_module(name)
        rows = getattr(module, "ROWS", {})
        arrow = {table: _read_columns(d / f"{table}.parquet", cols, rows.get(table))
                 for table, cols in module.NEEDS.items()}
        frame = getattr(module, name)(_Columns(arrow))
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), d / f"{name}.parquet",
                       compression=codec)
        del arrow, frame   # each table's memory given back before the next: the peak stays flat
        gc.collect()
        pa.default_memory_pool().release_unused()


def _read_columns(path, columns, api_keys=None) -> pa.Table:
    """`columns` of the Parquet table at `path` (only the rows of `api_keys` when given), read
    batch by batch on this thread: pq.read_table reads ahead on threads, ~30 MB more at the
    peak, and iter_batches's own threads kept another ~20 MB (export's peak then grew with the
    capture)."""
    import pyarrow.compute as pc
    schema = pq.read_schema(path)
    schema = pa.schema([schema.field(c) for c in columns])
    keys = None if api_keys is None else pa.array(api_keys, schema.field("api_key").type)
    parts = [batch if keys is None else batch.filter(pc.is_in(batch.column("api_key"), keys))
             for batch in pq.ParquetFile(path).iter_batches(columns=list(columns),
                                                            use_threads=False)]
    return pa.Table.from_batches(parts, schema=schema).unify_dictionaries()


class _Columns:
    """Tables of only some columns, as pandas frames, for the derived tables' functions."""

    def __init__(self, arrow):
        for name, table in arrow.items():
            setattr(self, name, to_pandas(table))


def load_parquet(directory) -> Tables:
    """Read back the tables written by Tables.write_parquet / `kafka-dissect export`."""
    d = Path(directory)
    arrow = {}
    for name in TABLES:
        path = d / f"{name}.parquet"
        if path.is_dir():   # Spark writes a folder of parts per table, in its own order
            raise ValueError(f"{path} is a folder: read the output of `kafka-dissect spark` "
                             "with analysis.spark.load_output()")
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing (not written by kafka-dissect export?)")
        # row groups written batch by batch have dictionaries of their own: one for all, as load()
        arrow[name] = pq.read_table(path).unify_dictionaries()
    for name in DERIVED:
        if (d / f"{name}.parquet").is_file():
            arrow[name] = pq.read_table(d / f"{name}.parquet").unify_dictionaries()
    return Tables(arrow)

