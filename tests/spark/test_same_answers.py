"""The Spark job gives the single-machine tables row for row, on the project's real captures split
into rotated files (connections spanning files, pcap and pcapng, a directory, a glob and single
files as inputs), and on damaged input."""
from __future__ import annotations

import pandas as pd

from analysis import load
from dissector.capture.files import read_packets
from analysis.spark import load_output, run
from tests.support import require_path

from .compare import assert_tables_equal
from .inputs import CAPTURES, PORTS, damaged_files, reading_order, rotated_tree


def _local(uri: str) -> str:
    return uri[len("file:"):] if uri.startswith("file:") else uri


def test_rotated_captures_give_the_same_tables(spark, tmp_path):
    require_path(CAPTURES / "codecs.pcap")
    tree = rotated_tree(tmp_path / "in")
    inputs = [tmp_path / "in" / "a", str(tmp_path / "in" / "b" / "*.pcapng"),
              *tree["files"]]
    result = run(inputs, tmp_path / "out", ports=PORTS, records=True, spark=spark)
    files = [p for group in tree.values() for p in group]
    order = reading_order(files)
    assert [_local(f) for f in result.files] == [str(p) for p in order]
    assert result.errors == []

    expected = load(order, port=list(PORTS), records=True)
    actual = load_output(tmp_path / "out")
    assert_tables_equal(expected, actual)
    # the comparison is not vacuous: every table has rows, connections span files
    ex = actual.exchanges
    assert len(ex) > 100 and len(actual.records) > 100 and len(actual.partitions) > 50
    assert list(actual.connections["connection_id"].sort_values()) == \
        list(range(1, len(actual.connections) + 1))
    assert (ex["status"] == "ok").mean() > 0.9
    counts = [sum(1 for _ in read_packets(p)) for p in order]
    bounds = [sum(counts[:i + 1]) for i in range(len(order))]   # last packet number of each
    spanning = ((ex["request_packet"].to_numpy()[:, None] <= bounds)
                != (ex["response_packet"].fillna(0).to_numpy()[:, None] <= bounds)).any(axis=1)
    assert spanning.sum() >= 1   # some exchanges start in one file and end in the next
    assert result.rows["exchanges"] == len(ex)
    # the deliveries, joined in Spark across connections and files, are the pandas rows
    assert result.rows["deliveries"] == len(actual.deliveries) > 100
    assert actual.deliveries["delivery_ts"].notna().sum() > 100
    pd.testing.assert_frame_equal(actual.deliveries, expected.deliveries)
    # and the clients, aggregated in Spark across connections and files
    assert result.rows["clients"] == len(actual.clients) >= 5
    pd.testing.assert_frame_equal(actual.clients, expected.clients)
    # and the rebalances, whose members' exchanges cross connections and files
    assert len(actual.rebalances) >= 1
    pd.testing.assert_frame_equal(actual.rebalances, expected.rebalances)


def test_clients_of_thousands_give_the_same_rows(spark, tmp_path):
    """The clients table in Spark SQL against the pandas function on 1,000 synthetic clients
    (no client id for some, two groups for some, stale apis, damaged rows)."""
    import pyarrow.parquet as pq

    from analysis.columns import to_pandas
    from analysis.spark import clients
    from tests.analysis import synthetic_clients
    t = synthetic_clients.tables(1000)
    for name in ("exchanges", "partitions"):
        pq.write_table(t.arrow[name], tmp_path / f"{name}.parquet")
    assert clients.write(spark, str(tmp_path), "snappy") == 1000
    pd.testing.assert_frame_equal(to_pandas(clients.read(tmp_path)), t.clients)


def test_damaged_input_gives_the_same_tables_and_errors(spark, tmp_path):
    require_path(CAPTURES / "kafka_python.pcap")
    from .rotate import rotate
    folder = tmp_path / "in"
    rotate(CAPTURES / "kafka_python.pcap", folder, 2)
    damaged_files(folder)
    result = run([folder], tmp_path / "out", spark=spark)
    order = [_local(f) for f in result.files]
    assert order == [str(p) for p in reading_order(folder.iterdir())]
    assert order[-1].endswith("notes.txt")   # no packet: read last

    expected = load(order)
    actual = load_output(tmp_path / "out")
    assert_tables_equal(expected, actual)
    assert result.errors == expected.errors and len(result.errors) == 2
    codes = set(actual.issues["code"].astype(str))
    assert {"capture.error", "ip.fragment"} <= codes


def test_every_shape_and_reused_tuples_give_the_same_tables(spark, tmp_path):
    """VLAN tags, IP options, IPv6 and unusable packets (payloads carried in the index rows), a
    gzip file among the rotated ones, and every connection's tuple used again ten minutes
    later with new sequence numbers (one index key, two connections); ports or `auto`
    deciding the broker side. (kafka-python names its topics: topic ids are resolved across
    connections.)"""
    import gzip
    import struct

    from dissector.capture.writer import PcapWriter

    from .inputs import mixed_shapes
    from .rotate import rotate
    require_path(CAPTURES / "kafka_python.pcap")
    twice = tmp_path / "twice.pcap"
    with PcapWriter(twice, 1) as w:
        for shift in (0, 1):
            for _no, ts, _lt, data in read_packets(CAPTURES / "kafka_python.pcap"):
                data = bytearray(data)
                tcp = 14 + (data[14] & 0x0F) * 4
                seq, ack = struct.unpack_from("!II", data, tcp + 4)
                struct.pack_into("!II", data, tcp + 4, (seq + shift * 12345) & 0xFFFFFFFF,
                                 (ack + shift * 12345) & 0xFFFFFFFF)
                w.write(ts + shift * 600 * 10**9, bytes(data))
    mixed = mixed_shapes(twice, tmp_path / "mixed.pcap")
    files = rotate(mixed, tmp_path / "in", 3)
    files[1].with_suffix(".pcap.gz").write_bytes(gzip.compress(files[1].read_bytes()))
    files[1].unlink()
    for auto in (False, True):
        out = tmp_path / f"out-{auto}"
        result = run([tmp_path / "in"], out, auto=auto, spark=spark)
        expected = load([_local(f) for f in result.files], port="auto" if auto else None)
        actual = load_output(out)
        assert_tables_equal(expected, actual)
        assert len(actual.connections) == 2 * len(load(CAPTURES / "kafka_python.pcap").connections)
