"""`--jobs N` writes what one process writes, byte for byte: every shipped capture, every format
and level of `read`, connections dealt by client address (the default) and one by one, rotated
captures read as one, a damaged capture, and a run the checks stop (finished in one process)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dissector.cli import main
from dissector.parallel import driver
from tests.spark.rotate import rotate
from tests.support import use_walker

CAPTURES = sorted(Path(__file__).resolve().parents[2].joinpath("captures").glob("*.pcap"))


def port_of(capture):
    return "19093" if "aiokafka" in capture.name else "9092"


def outputs(tmp_path, capsys, *argv):
    """(exit status, output file, stderr) of `kafka-dissect read ARGV` with --jobs 1 and with
    --jobs 2 dealing by client and by connection."""
    results = []
    for extra in (["--jobs", "1"], ["--jobs", "2"], ["--jobs", "2", "--jobs-by", "connection"]):
        out = tmp_path / f"out{len(results)}"
        code = main(["read", *map(str, argv), "--out", str(out), *extra])
        results.append((code, out.read_bytes(), capsys.readouterr().err))
    return results


def stopped_at(monkeypatch, n) -> list:
    """The parallel runs' checks made to stop the workers at their nth chunk; the list they
    note each chunk in."""
    checked = []

    def chunk(self, msgs):
        checked.append(len(msgs))
        return "forced" if len(checked) == n else None
    monkeypatch.setattr(driver.Checks, "chunk", chunk)
    return checked


def same(results):
    first = results[0]
    assert first[1], "nothing written"
    for other in results[1:]:
        assert other == first


SHAPES = (("text", "bodies"), ("csv", "headers"), ("jsonl", "records"))


@pytest.mark.parametrize("capture", CAPTURES, ids=[c.name for c in CAPTURES])
def test_every_capture(tmp_path, capsys, capture):
    fmt, level = SHAPES[CAPTURES.index(capture) % len(SHAPES)]   # each shape on 4 captures
    same(outputs(tmp_path, capsys, capture, "--port", port_of(capture), "--format", fmt,
                 "--level", level))


def test_every_format_and_level_with_bodies_and_a_filter(tmp_path, capsys):
    capture = next(c for c in CAPTURES if c.name == "librdkafka_produce_consume.mss1448.pcap")
    for level in ("headers", "bodies", "records"):
        same(outputs(tmp_path, capsys, capture, "--format", "jsonl", "--level", level,
                     "--bodies"))
        same(outputs(tmp_path, capsys, capture, "--format", "csv", "--level", level,
                     "--filter", "exchange % 3 == 1 or connection_id == 2"))
        same(outputs(tmp_path, capsys, capture, "--format", "text", "--level", level,
                     "--filter", "exchange > 5"))


def test_rotated_files_read_as_one(tmp_path, capsys):
    capture = next(c for c in CAPTURES if c.name == "transactions.mss1448.pcap")
    parts = rotate(capture, tmp_path / "rotated", 5)
    for fmt in ("text", "csv"):
        same(outputs(tmp_path, capsys, *parts, "--format", fmt))


def test_a_damaged_capture_stops_alike(tmp_path, capsys):
    capture = next(c for c in CAPTURES if c.name == "codecs.mss1448.pcap")
    parts = rotate(capture, tmp_path / "rotated", 3)
    data = parts[1].read_bytes()
    parts[1].write_bytes(data[:len(data) * 2 // 3])   # a record cut short mid-file
    results = outputs(tmp_path, capsys, *parts, "--format", "csv")
    same(results)
    code, _, err = results[0]
    assert code == 2 and "part001.pcap" in err and "Traceback" not in err


def test_a_run_that_may_differ_is_finished_in_one_process(tmp_path, capsys, monkeypatch):
    capture = next(c for c in CAPTURES if c.name == "transactions.mss1448.pcap")
    parts = rotate(capture, tmp_path / "rotated", 6)   # a step per file
    checked = stopped_at(monkeypatch, 4)
    for fmt in ("text", "jsonl"):
        checked.clear()
        same(outputs(tmp_path, capsys, *parts, "--format", fmt))
        assert len(checked) >= 4


@pytest.mark.parametrize("walker", ["compiled", "python"])
def test_both_packet_walkers_skip_the_other_workers_flows(tmp_path, capsys, monkeypatch, walker):
    use_walker(monkeypatch, walker)
    capture = next(c for c in CAPTURES if c.name == "codecs.mss1448.pcap")
    same(outputs(tmp_path, capsys, capture, "--format", "csv", "--level", "headers"))


def analysis_outputs(tmp_path, capsys, command, *argv):
    """(exit status, the files written, stderr) of an analysis command with --jobs 1 and 2."""
    results = []
    for extra in (["--jobs", "1"], ["--jobs", "2", "--jobs-by", "connection"]):
        out = tmp_path / f"{command}{len(results)}"
        where = {"export": ["--out", str(out)], "report": ["--html", str(out)],
                 "stats": ["--width", "150"]}[command]
        code = main([command, *map(str, argv), *where, *extra])
        captured = capsys.readouterr()
        files = ({p.name: p.read_bytes() for p in sorted(out.iterdir())} if out.is_dir()
                 else out.read_bytes() if out.exists() else captured.out)
        results.append((code, files, captured.err.replace(str(out), "OUT")))
    return results


def test_export_and_stats_of_a_damaged_rotated_capture(tmp_path, capsys):
    capture = next(c for c in CAPTURES if c.name == "transactions.mss1448.pcap")
    parts = rotate(capture, tmp_path / "rotated", 4)
    data = parts[2].read_bytes()
    parts[2].write_bytes(data[:len(data) // 2])   # a record cut short: a capture.error issue
    for command in ("export", "stats"):
        results = analysis_outputs(tmp_path, capsys, command, *parts)
        same(results)
        assert results[0][0] == 2


@pytest.mark.parametrize("name", ["librdkafka_produce_consume.pcap", "codecs.mss1448.pcap"])
def test_stats_and_export(tmp_path, capsys, name):
    # (report loads its tables as stats does; its HTML differs from run to run: plot ids)
    capture = next(c for c in CAPTURES if c.name == name)
    for command in ("stats", "export"):
        same(analysis_outputs(tmp_path, capsys, command, capture, "--filter",
                              "exchange != 4"))


def _interleaved(tmp_path, name):
    """A dozen clients of a shipped capture at once: connections on both workers."""
    from benchmarks import corpus
    source = next(c for c in CAPTURES if c.name == name)
    capture = tmp_path / "interleaved.pcap"
    corpus.build(capture, 12 * source.stat().st_size, src=str(source), parallel=12)
    return capture


def test_export_cuts_its_row_groups_where_one_process_does(tmp_path, capsys, monkeypatch):
    """The workers hand the parent their rows in columns; its Parquet row groups (cut by rows
    and by bytes; the records' by records and bytes) are one process's, byte for byte."""
    import pyarrow.parquet as pq

    from analysis import columns, records_table
    monkeypatch.setattr(columns, "BATCH_ROWS", 1000)
    monkeypatch.setattr(columns, "BATCH_BYTES", 40_000)
    monkeypatch.setattr(records_table, "CHUNK_ROWS", 1000)
    monkeypatch.setattr(records_table, "CHUNK_BYTES", 8000)
    capture = _interleaved(tmp_path, "librdkafka_produce_consume.pcap")
    results = analysis_outputs(tmp_path, capsys, "export", capture, "--level", "records")
    same(results)
    out = tmp_path / "export1"
    groups = {name: pq.ParquetFile(out / f"{name}.parquet").metadata.num_row_groups
              for name in ("exchanges", "partitions", "records")}
    assert min(groups.values()) > 5, groups


def test_load_with_workers_gives_the_same_tables(tmp_path):
    import analysis
    capture = _interleaved(tmp_path, "librdkafka_produce_consume.pcap")
    one, two = (analysis.load(capture, records=True, jobs=jobs) for jobs in (1, 2))
    for name in analysis.TABLES:
        assert two.arrow[name].equals(one.arrow[name]), name
    assert len(one.records) > 1000 and len(one.partitions) > 500


def test_tables_of_a_run_the_checks_stop_are_one_process_s(tmp_path, capsys, monkeypatch):
    """Where the workers may differ from one process, the tables are made again by one
    process from the start (the files begun again: some batches were written)."""
    from analysis import columns, records_table
    monkeypatch.setattr(columns, "BATCH_ROWS", 20)
    monkeypatch.setattr(records_table, "CHUNK_ROWS", 50)
    capture = _interleaved(tmp_path, "codecs.pcap")
    parts = rotate(capture, tmp_path / "rotated", 5)
    expected = {command: analysis_outputs(tmp_path, capsys, command, *parts, "--level",
                                          "records")[0] for command in ("export", "stats")}
    checked = stopped_at(monkeypatch, 3)
    for command in ("export", "stats"):
        checked.clear()
        results = analysis_outputs(tmp_path, capsys, command, *parts, "--level", "records")
        assert len(checked) == 3
        same([expected[command]] + results)


def records_outputs(tmp_path, capsys, *argv):
    results = []
    for extra in (["--jobs", "1"], ["--jobs", "2", "--jobs-by", "connection"]):
        out = tmp_path / f"records{len(results)}"
        code = main(["records", *map(str, argv), "--out", str(out), *extra])
        err = capsys.readouterr().err.replace(str(out), "OUT")
        results.append((code, out.read_bytes(), err))
    return results


@pytest.mark.parametrize("fmt", ["text", "csv", "jsonl", "parquet"])
def test_records(tmp_path, capsys, monkeypatch, fmt):
    capture = next(c for c in CAPTURES if c.name == "codecs.mss1448.pcap")
    same(records_outputs(tmp_path, capsys, capture, "--format", fmt))
    parts = rotate(capture, tmp_path / "rotated", 5)
    data = parts[3].read_bytes()
    parts[3].write_bytes(data[:len(data) // 2])
    results = records_outputs(tmp_path, capsys, *parts, "--format", fmt)
    same(results)
    assert results[0][0] == 2
    stopped_at(monkeypatch, 3)   # the workers stopped: one process writes the rest
    same(records_outputs(tmp_path, capsys, *parts, "--format", fmt))


@pytest.mark.parametrize("fmt", ["text", "csv", "jsonl"])
def test_records_rendered_as_they_complete_are_one_process_s(tmp_path, capsys, monkeypatch, fmt):
    """The records text holds connection ids, not exchange numbers: a worker renders an
    exchange as it completes where its connection's global id is known by then (it opened in
    an earlier step), the others once their step is numbered. Both happen here (a step a MiB,
    each numbered before the next is read), and the output is one process's, byte for byte."""
    from analysis.commands import records as records_cmd
    from dissector.parallel import worker
    monkeypatch.setattr(records_cmd, "STEP_CHUNKS", 1)
    monkeypatch.setattr(worker, "MAX_HELD", 0)
    log = tmp_path / "rendered"   # written by the forked workers

    def noting(kind, method):
        def call(self, exchanges, *rest):
            pieces = method(self, exchanges, *rest)
            with open(log, "a") as f:
                f.write(f"{kind} {sum(p is not None for p in pieces)}\n")
            return pieces
        return call
    monkeypatch.setattr(worker._Worker, "_early", noting("early", worker._Worker._early))
    monkeypatch.setattr(worker._Worker, "numbered", noting("late", worker._Worker.numbered))
    same(records_outputs(tmp_path, capsys, _interleaved(tmp_path, "codecs.pcap"),
                         "--format", fmt))
    counts = {"early": 0, "late": 0}
    for line in log.read_text().splitlines():
        kind, n = line.split()
        counts[kind] += int(n)
    assert counts["early"] > 50 and counts["late"] > 50, counts


def test_the_workers_write_into_the_file_one_at_a_time(tmp_path, capsys, monkeypatch):
    """Into a file, the workers write their own records (parallel.placing), and the parent hands
    the next worker its offsets only once the last has written: two writers of one file wait on
    its lock. Over many steps, at most one worker is writing at any time; the file is one
    process's."""
    from analysis.commands import records as records_cmd
    from dissector.parallel import pipes, worker
    monkeypatch.setattr(records_cmd, "STEP_CHUNKS", 1)
    capture = _interleaved(tmp_path, "codecs.pcap")
    events = []   # "sent" for each offsets message, "wrote" for each answer
    put, handle = pipes.Workers.put, driver._Parent.handle

    def noting_put(self, w, msg):
        if msg[0] == worker.OFFSETS:
            events.append("sent")
        return put(self, w, msg)

    def noting_handle(self, msg):
        if msg[0] == worker.WROTE:
            events.append("wrote")
        return handle(self, msg)
    monkeypatch.setattr(pipes.Workers, "put", noting_put)
    monkeypatch.setattr(driver._Parent, "handle", noting_handle)
    for fmt in ("csv", "jsonl"):
        events.clear()
        same(records_outputs(tmp_path, capsys, capture, "--format", fmt))
        assert events.count("sent") == events.count("wrote") >= 10
        writing = 0
        for e in events:
            writing += 1 if e == "sent" else -1
            assert writing in (0, 1), events


def test_workers_waiting_for_their_turn_to_write_do_not_run_ahead(tmp_path, capsys,
                                                                   monkeypatch):
    """Writes slower than the workers read (a slow disk) hold them back as a slow parent does:
    a worker with worker.MAX_HELD steps waiting for their turn to be written waits for it
    instead of reading on, so the text it holds stays bounded. The file is one process's."""
    import time

    from benchmarks import corpus
    from analysis.commands import records as records_cmd
    from dissector.parallel import worker
    source = next(c for c in CAPTURES if c.name == "codecs.pcap")
    capture = tmp_path / "long.pcap"
    corpus.build(capture, 40 * source.stat().st_size, src=str(source), parallel=12)
    monkeypatch.setattr(records_cmd, "STEP_CHUNKS", 1)   # a step per MiB of the capture
    monkeypatch.setattr(worker, "MAX_HELD", 1)
    write_at = worker.write_at

    def slow(*args):
        time.sleep(0.05)
        return write_at(*args)
    monkeypatch.setattr(worker, "write_at", slow)   # inherited by the forked workers
    ahead = []   # per step reported: how many steps before it are not written yet
    handle = driver._Parent.handle

    def noting(self, msg):
        if msg[0] == worker.KEYS:
            ahead.append(msg[2] - self.to_ack)
        return handle(self, msg)
    monkeypatch.setattr(driver._Parent, "handle", noting)
    same(records_outputs(tmp_path, capsys, capture, "--format", "csv"))
    assert len(ahead) >= 16 and max(ahead) <= 2 * worker.MAX_HELD + 2, ahead


def test_records_parquet_row_groups_where_one_process_cuts_them(tmp_path, capsys, monkeypatch):
    """The workers send the records as arrays; the parent's row groups (cut by records and by
    bytes, across the workers' steps) are one process's, byte for byte."""
    import pyarrow.parquet as pq

    from analysis.commands import records as records_cmd
    capture = _interleaved(tmp_path, "codecs.pcap")
    for rows, data_bytes in ((50, 1 << 30), (1 << 20, 8000)):
        monkeypatch.setattr(records_cmd, "ROW_GROUP", rows)
        monkeypatch.setattr(records_cmd, "ROW_GROUP_BYTES", data_bytes)
        same(records_outputs(tmp_path, capsys, capture, "--format", "parquet"))
        assert pq.ParquetFile(tmp_path / "records1").metadata.num_row_groups > 10


def test_tls_with_and_without_the_key_log(tmp_path, capsys):
    tls = CAPTURES[0].parent / "tls"
    capture, keys = tls / "kafka_tls.pcap", tls / "kafka_tls.keys.log"
    same(outputs(tmp_path, capsys, capture, "--port", "9093", "--keylog", keys, "--format", "csv",
                 "--level", "records"))
    (tmp_path / "empty.log").write_text("")
    results = outputs(tmp_path, capsys, capture, "--port", "9093", "--keylog",
                      tmp_path / "empty.log")
    assert results[1] == results[0] == results[2]   # nothing decrypted: no exchange
    assert "7 TLS connections not decrypted" in results[0][2]
    for command in ("stats", "export"):
        same(analysis_outputs(tmp_path, capsys, command, capture, "--port", "9093", "--keylog",
                              keys))
    for fmt in ("csv", "parquet"):   # the records of the decrypted connections
        results = records_outputs(tmp_path, capsys, capture, "--port", "9093", "--keylog", keys,
                                  "--format", fmt)
        same(results)
        assert results[0][0] == 0


def test_hundreds_of_connections_in_flight(tmp_path, capsys):
    """More flows of the other worker at once than the compiled walker's table of them holds
    (its slots collide and are overwritten): still one process's output."""
    from benchmarks import corpus
    source = next(c for c in CAPTURES if c.name == "kafka_python.pcap")
    path = tmp_path / "many.pcap"
    built = corpus.build(path, 200 * source.stat().st_size, src=str(source), parallel=200)
    assert built.replicas >= 150
    same(outputs(tmp_path, capsys, path, "--format", "csv", "--level", "bodies"))


def test_lines_that_need_quoting_among_drafted_ones(tmp_path, capsys):
    """CSV lines are drafted as exchanges complete and numbered later; those that need quoting
    (a comma, quote or line break in a client id) are rendered whole once numbered: in their
    places among the others, with their numbers."""
    from tests.analysis.build import Capture, ms, request_bytes, response_bytes
    cap = Capture()
    ids = ["plain", 'say "hi"', "a,b", "two\nlines", "also-plain"]
    conns = [cap.connection(client_ip=f"10.0.1.{i + 1}", client_port=40000 + i, ts=ms(i))
             for i in range(len(ids))]
    for n in range(40):   # the clients' exchanges interleaved
        conn, client_id = conns[n % len(conns)], ids[(n // 3) % len(ids)]
        conn.request(ms(100 + n * 10), request_bytes(18, 0, n, client_id=client_id))
        conn.response(ms(103 + n * 10), response_bytes(n, b"\0\0\0\0\0\0"))
    path = cap.write(tmp_path / "quoting.pcap")
    results = outputs(tmp_path, capsys, path, "--format", "csv", "--port", "9092")
    same(results)
    text = results[0][1].decode()
    assert text.count('"say ""hi"""') > 3 and text.count('"a,b"') > 3
    assert len(text.splitlines()) > 40


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memory files are Linux's")
def test_columns_through_shared_memory_give_the_same_files(tmp_path, capsys, monkeypatch):
    """Every message's columns through memory files (large ones do on a large capture; the
    shipped ones are small): the records' Parquet and the exported tables are one process's."""
    from dissector.parallel import pipes
    monkeypatch.setattr(pipes, "SHARED_FROM", 1)
    mapped = []
    real = pipes._mapped
    monkeypatch.setattr(pipes, "_mapped", lambda *a: mapped.append(1) or real(*a))
    capture = _interleaved(tmp_path, "codecs.pcap")
    same(records_outputs(tmp_path, capsys, capture, "--format", "parquet"))
    records = len(mapped)
    same(analysis_outputs(tmp_path, capsys, "export", capture, "--level", "records"))
    assert records >= 2 and len(mapped) >= records + 2   # each worker's, at least


def _reasons(monkeypatch) -> list:
    """What the parallel runs' checks say, chunk by chunk (None: nothing)."""
    said = []
    real = driver.Checks.chunk

    def chunk(self, msgs):
        said.append(real(self, msgs))
        return said[-1]
    monkeypatch.setattr(driver.Checks, "chunk", chunk)
    return said


def _replicas(tmp_path, parallel):
    """kafka_python.pcap replicated 60 times, `parallel` replicas in flight at once."""
    from benchmarks import corpus
    source = next(c for c in CAPTURES if c.name == "kafka_python.pcap")
    path = tmp_path / f"replicas{parallel}.pcap"
    corpus.build(path, 60 * source.stat().st_size, src=str(source), parallel=parallel)
    return path


def test_more_flows_in_all_than_a_cap_but_never_at_once(tmp_path, capsys, monkeypatch):
    """The caps bound flows at once: a capture with more flows in all than the quiet cap, a
    few at a time, is dissected in parallel to the end."""
    from dissector.tcp import flows
    monkeypatch.setattr(flows, "MAX_QUIET", 12)
    monkeypatch.setattr(driver, "CAPS", (12, flows.MAX_LIVE, flows.MAX_CLOSED))
    said = _reasons(monkeypatch)
    same(outputs(tmp_path, capsys, _replicas(tmp_path, 1), "--format", "csv"))
    assert said and not any(said)


def test_more_flows_at_once_than_a_cap_are_one_process_s(tmp_path, capsys, monkeypatch):
    """More closed flows lingering at once than the (lowered) cap: one process forgets the
    oldest, so the parallel run stops and the rest is one process's."""
    from dissector.tcp import flows
    monkeypatch.setattr(flows, "MAX_CLOSED", 40)
    monkeypatch.setattr(driver, "CAPS", (flows.MAX_QUIET, flows.MAX_LIVE, 40))
    said = _reasons(monkeypatch)
    same(outputs(tmp_path, capsys, _replicas(tmp_path, 8), "--format", "csv"))
    assert any(s and "at once" in s for s in said)


def test_one_client_host_is_shared_by_the_workers(tmp_path, capsys, monkeypatch):
    """Every client on one address (a capture on a client host, or on loopback): its
    connections are shared out, not all one worker's, and the output is one process's."""
    from benchmarks import corpus
    source = next(c for c in CAPTURES if c.name == "librdkafka_produce_consume.pcap")
    path = tmp_path / "one-host.pcap"
    corpus.build(path, 150 * source.stat().st_size, src=str(source), one_host=True)
    opened = [0, 0]
    real = driver.Checks.chunk

    def chunk(self, msgs):
        for w, m in enumerate(msgs):
            opened[w] += len(m[6])
        return real(self, msgs)
    monkeypatch.setattr(driver.Checks, "chunk", chunk)
    same(outputs(tmp_path, capsys, path, "--format", "csv", "--level", "records"))
    assert min(opened) > 0.4 * sum(opened), opened


def test_more_flows_than_the_workers_remember_stay_parallel(tmp_path, capsys, monkeypatch):
    """Past MAX_FLOWS flows (lowered here, and the others' flows a worker marks at once) the
    workers remember no new flow but ask each flow's worker again: the run stays parallel to
    its end, both workers open connections, and the output is the same (420 connections)."""
    from dissector.parallel import part
    monkeypatch.setattr(part, "MAX_FLOWS", 100)
    monkeypatch.setattr(part, "MAX_SKIPPED", 30)
    said, opened = [], [0, 0]
    real = driver.Checks.chunk

    def chunk(self, msgs):
        for w, m in enumerate(msgs):
            opened[w] += len(m[6])
        said.append(real(self, msgs))
        return said[-1]
    monkeypatch.setattr(driver.Checks, "chunk", chunk)
    same(outputs(tmp_path, capsys, _replicas(tmp_path, 8), "--format", "csv"))
    assert said and not any(said)
    assert sum(opened) == 2 * 420 and min(opened) > 0.3 * sum(opened), opened


def test_a_parent_slower_than_its_workers_holds_them_back(tmp_path, capsys, monkeypatch):
    """A parent that writes slower than its workers read (Parquet of bulk traffic, which it
    encodes alone) numbers their steps late: a worker holding worker.MAX_HELD steps waits for
    their numbers instead of reading on, so what it holds, and what the parent has yet to write,
    stays bounded. The file is still one process's."""
    import time

    from benchmarks import corpus
    from analysis.commands import records as records_cmd
    from dissector.parallel import worker
    source = next(c for c in CAPTURES if c.name == "codecs.pcap")
    capture = tmp_path / "long.pcap"
    corpus.build(capture, 40 * source.stat().st_size, src=str(source), parallel=12)
    monkeypatch.setattr(records_cmd, "STEP_CHUNKS", 1)   # a step per MiB of the capture
    monkeypatch.setattr(worker, "MAX_HELD", 1)
    ahead = []   # per step reported: how many steps before it the parent has not numbered yet
    handle, flush = driver._Parent.handle, driver._Parent.flush

    def noting(self, msg):
        if msg[0] == worker.KEYS:
            ahead.append(msg[2] - self.to_number)
        return handle(self, msg)

    def slow(self, pieces):
        time.sleep(0.05)
        return flush(self, pieces)
    monkeypatch.setattr(driver._Parent, "handle", noting)
    monkeypatch.setattr(driver._Parent, "flush", slow)
    same(records_outputs(tmp_path, capsys, capture, "--format", "parquet"))
    assert len(ahead) >= 16 and max(ahead) <= worker.MAX_HELD
