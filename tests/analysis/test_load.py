"""analysis.load on constructed captures (header level): columns, dtypes, hand-computed times,
several captures, filters, and the Parquet round trip."""
import pandas as pd
import pyarrow as pa
import pytest
from pandas.testing import assert_frame_equal

import analysis
from analysis.load import DERIVED, TABLES

from .build import Capture, ms, request_bytes, response_bytes

METADATA, API_VERSIONS, FETCH = 3, 18, 1


@pytest.fixture
def capture(tmp_path):
    """Two connections: three Metadata requests answered after 4, 2 and 9 ms (request and
    response each in two segments), one ApiVersions never answered."""
    cap = Capture()
    a = cap.connection(client_port=40001, ts=ms(0))
    a.request([ms(10), ms(11)], request_bytes(METADATA, 1, 1, b"\x00" * 4, client_id="app-a"))
    a.response([ms(15), ms(17)], response_bytes(1, b"\x00" * 30))
    a.request(ms(20), request_bytes(METADATA, 1, 2, b"\x00" * 4, client_id="app-a"))
    a.response(ms(22), response_bytes(2, b"\x00" * 30))
    b = cap.connection(client_ip="10.0.0.3", client_port=40002, ts=ms(1))
    b.request(ms(30), request_bytes(METADATA, 4, 7, b"\x00" * 5, client_id="app-b"))
    b.response([ms(39), ms(39.5)], response_bytes(7, b"\x00" * 40))
    b.request(ms(50), request_bytes(API_VERSIONS, 0, 8, client_id="app-b"))
    return cap.write(tmp_path / "small.pcap")


def test_exchanges_values(capture):
    t = analysis.load(capture, level="headers")
    ex = t.exchanges.sort_values("request_ts").reset_index(drop=True)
    assert list(ex["api_name"].astype(str)) == ["Metadata", "Metadata", "Metadata", "ApiVersions"]
    assert list(ex["client_id"].astype(str)) == ["app-a", "app-a", "app-b", "app-b"]
    assert list(ex["latency_ms"].iloc[:3]) == [4.0, 2.0, 9.0]        # response_ts - request_end_ts
    assert list(ex["total_ms"].iloc[:3]) == [7.0, 2.0, 9.5]          # response_end_ts - request_ts
    assert pd.isna(ex["latency_ms"].iloc[3])
    assert list(ex["status"].astype(str)) == ["ok", "ok", "ok", "unanswered"]
    assert ex["request_ts"].iloc[0] == pd.Timestamp(ms(10), unit="ns", tz="UTC")
    # 25 = 4 (size) + 10 (header) + 5 (client id) + 4 (body) + ... on the wire
    assert ex["request_bytes"].iloc[0] == 4 + 2 + 2 + 4 + 2 + 5 + 4
    assert ex["response_bytes"].iloc[2] == 4 + 4 + 40
    assert list(ex["correlation_id"]) == [1, 2, 7, 8]
    assert ex["client_ip"].astype(str).tolist() == ["10.0.0.1"] * 2 + ["10.0.0.3"] * 2
    # the 3-way handshakes are packets 1-6 (sorted by time); the first request is in 7 and 8
    assert ex["request_packet"].iloc[0] == 7


def test_dtypes_are_arrow_backed_with_categories_and_utc(capture):
    t = analysis.load(capture, level="headers")
    for name in TABLES:
        df = getattr(t, name)
        assert all(isinstance(dt, pd.ArrowDtype) for dt in df.dtypes), name
    ex = t.exchanges
    for col in ("api_name", "status", "client_id", "error_name"):
        assert pa.types.is_dictionary(ex[col].dtype.pyarrow_dtype), col
    ts = ex["request_ts"].dtype.pyarrow_dtype
    assert pa.types.is_timestamp(ts) and ts.tz == "UTC" and ts.unit == "ns"
    assert ex["latency_ms"].dtype.pyarrow_dtype == pa.float64()


def test_connections_table(capture):
    t = analysis.load(capture, level="headers")
    c = t.connections.sort_values("connection_id").reset_index(drop=True)
    assert len(c) == 2
    assert c["exchange_count"].tolist() == [2, 2]
    assert [list(x) for x in c["client_ids"]] == [["app-a"], ["app-b"]]
    assert c["client_port"].tolist() == [40001, 40002]


def test_several_captures_at_once(capture, tmp_path):
    cap = Capture()
    c = cap.connection(client_port=41000, ts=ms(1000))
    c.request(ms(1001), request_bytes(METADATA, 1, 99, b"\x00" * 4, client_id="later"))
    c.response(ms(1004), response_bytes(99, b"\x00" * 8))
    second = cap.write(tmp_path / "later.pcap")
    t = analysis.load([capture, second], level="headers")
    assert len(t.exchanges) == 5
    later = t.exchanges[t.exchanges["client_id"] == "later"]
    assert later["latency_ms"].tolist() == [3.0]
    assert len(t.connections) == 3


def test_filter(capture):
    t = analysis.load(capture, level="headers", filter='api_name == "Metadata" and latency_ms > 3')
    assert sorted(t.exchanges["latency_ms"].tolist()) == [4.0, 9.0]
    with pytest.raises(ValueError):
        analysis.load(capture, level="headers", filter="latency_ms >")


def test_parquet_round_trip(capture, tmp_path):
    t = analysis.load(capture, level="headers")
    t.write_parquet(tmp_path / "out")
    back = analysis.load_parquet(tmp_path / "out")
    for name in TABLES + DERIVED:
        assert_frame_equal(getattr(back, name), getattr(t, name), check_exact=True)


def test_load_parquet_missing_table(tmp_path):
    with pytest.raises(FileNotFoundError):
        analysis.load_parquet(tmp_path)


def test_load_parquet_points_spark_output_to_its_reader(tmp_path):
    for name in TABLES:   # the shape `kafka-dissect spark` writes: a folder of parts per table
        (tmp_path / f"{name}.parquet").mkdir()
    with pytest.raises(ValueError, match="load_output"):
        analysis.load_parquet(tmp_path)


def test_port_forms(capture):
    assert len(analysis.load(capture, port="9092", level="headers").exchanges) == 4
    assert len(analysis.load(capture, port=[9092], level="headers").exchanges) == 4
    with pytest.warns(UserWarning, match=r"no TCP on port 9093; .*: 9092 \(2 connections\)"):
        assert len(analysis.load(capture, port=9093, level="headers").exchanges) == 0
    assert len(analysis.load(capture, port="auto", level="headers").exchanges) == 4
    with pytest.raises(ValueError, match="port"):
        analysis.load(capture, port="kafka")


def test_collector_paced_while_loading(capture):
    """analysis.load (a notebook's call) runs with the CLI's sparse collector thresholds, and
    gives the caller's back; a caller's sparser ones are kept."""
    import gc

    from dissector.gc_pace import OLDER, YOUNG
    seen = []
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)   # Python's defaults
        analysis.load(capture, progress=lambda path, done: seen.append(gc.get_threshold()))
        assert seen and all(t == (YOUNG,) + OLDER for t in seen) and YOUNG > 700
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(1_000_000, 5, 5)
        seen.clear()
        analysis.load(capture, progress=lambda path, done: seen.append(gc.get_threshold()))
        assert seen and all(t == (1_000_000, 5, 5) for t in seen)
    finally:
        gc.set_threshold(*before)


def test_jobs_by_default_as_the_cli(monkeypatch):
    """load() and export() take the CLI's --jobs default: every core for large captures (here
    any size, on two cores), one process otherwise; the tables are the same either way."""
    import importlib

    from dissector.parallel import plan
    from tests.support import CAPTURES
    L = importlib.import_module("analysis.load")   # the module: the package names its function
    path = CAPTURES / "librdkafka_produce_consume.pcap"
    one = analysis.load(path, records=True)
    used = []
    real = L._parallel
    monkeypatch.setattr(L, "_parallel", lambda *a, **k: used.append(a[6]) or real(*a, **k))
    assert analysis.load(path).exchanges is not None and used == []   # under 64 MiB
    monkeypatch.setattr(plan, "PARALLEL_FROM", 0)
    monkeypatch.setattr(plan, "cores", lambda: 2)
    two = analysis.load(path, records=True)
    assert used == [2]
    for name in TABLES:
        assert_frame_equal(getattr(one, name), getattr(two, name))
    assert analysis.load(path, jobs=1).exchanges is not None and used == [2]
