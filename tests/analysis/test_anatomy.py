"""Latency anatomy (analysis.anatomy): a constructed capture whose every packet time is chosen
here, so each part of an exchange's time is known by hand; and tshark's own TCP analysis
(initial RTT from the handshake, retransmissions) on the same capture as an oracle."""
import subprocess

import pandas as pd
import pytest

import analysis
from analysis.anatomy import where_time_goes
from tests.analysis.build import Capture, ms, request_bytes, response_bytes
from tests.support import CAPTURES, require_path, require_tool

METADATA, PRODUCE = 3, 0


def _capture(path):
    cap = Capture()
    # handshake: SYN at 0, SYN-ACK 2 ms later, the client's ACK 3 ms after the SYN
    c = cap.connection(ts=ms(0), synack_after=2_000_000, ack_after=3_000_000)
    # a request in three segments (10..12 ms), its second segment sent again at 16 ms;
    # the response's first byte at 20 ms, its last at 25 ms
    c.request([ms(10), ms(11), ms(12)], request_bytes(METADATA, 1, 1, b"\x00" * 60))
    c.resend(ms(16), index=1)
    c.zero_window(ms(12) + 500_000, side=1)   # the broker's buffer full, the request all in
    c.response([ms(20), ms(21), ms(25)], response_bytes(1, b"\x00" * 90))
    # a second exchange, its response's middle segment never captured (a hole)
    c.request([ms(30)], request_bytes(METADATA, 1, 2, b"\x00" * 10))
    c.response([ms(40), ms(41), ms(42)], response_bytes(2, b"\x00" * 90), drop=(1,))
    c.request([ms(50)], request_bytes(METADATA, 1, 3, b"\x00" * 10))
    c.response([ms(51)], response_bytes(3, b"\x00" * 4))
    # a connection whose handshake the capture missed
    d = cap.connection(client_port=40001, synack_after=None)
    d.request([ms(60)], request_bytes(METADATA, 1, 9, b"\x00" * 10))
    d.response([ms(61)], response_bytes(9, b"\x00" * 4))
    return cap.write(path)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    return _capture(tmp_path_factory.mktemp("anatomy") / "anatomy.pcap")


@pytest.mark.parametrize("level", ["headers", "bodies"])
def test_each_part_by_hand(capture, level):
    ex = analysis.load(capture, level=level).exchanges.sort_values("exchange")
    first = ex[ex["correlation_id"] == 1].iloc[0]
    assert first["rtt_ms"] == pytest.approx(3.0)
    assert first["broker_rtt_ms"] == pytest.approx(2.0)
    assert first["request_transfer_ms"] == pytest.approx(2.0)
    assert first["latency_ms"] == pytest.approx(8.0)
    assert first["broker_ms"] == pytest.approx(6.0)      # 8 ms less the 2 ms trip to the broker
    assert first["response_transfer_ms"] == pytest.approx(5.0)
    assert first["retransmits"] == 1 and first["tcp_gaps"] == 0 and first["zero_windows"] == 1
    second = ex[ex["correlation_id"] == 2].iloc[0]
    assert second["tcp_gaps"] == 1 and second["retransmits"] == 0 and second["zero_windows"] == 0
    third = ex[ex["correlation_id"] == 3].iloc[0]
    assert third["tcp_gaps"] == 0 and third["retransmits"] == 0
    assert first["rtt_source"] == "handshake"
    # no handshake: the response acknowledged the request 1 ms after it, the only sample, an
    # upper bound of the trip to the broker; the client never acknowledged: no full round trip
    blind = ex[ex["correlation_id"] == 9].iloc[0]
    assert blind["rtt_source"] == "data_ack" and pd.isna(blind["rtt_ms"])
    assert blind["broker_rtt_ms"] == pytest.approx(1.0) and blind["broker_ms"] == 0
    assert blind["request_transfer_ms"] == 0 and blind["latency_ms"] == pytest.approx(1.0)


def test_where_the_time_goes(capture):
    t = analysis.load(capture)
    by_api = where_time_goes(t.exchanges, "api")
    assert list(by_api["api_name"]) == ["Metadata"]
    row = by_api.iloc[0]
    assert row["exchanges"] == 4 and row["retransmits"] == 1 and row["tcp_gaps"] == 1
    assert row["zero_windows"] == 1
    by_broker = where_time_goes(t.exchanges, "broker")
    assert list(by_broker["broker"]) == ["10.0.0.2:9092"]
    with pytest.raises(ValueError):
        where_time_goes(t.exchanges, "topic")


def _tshark(capture):
    """Per connection (its two ports, sorted): tshark's initial RTT in ms, and how many packets
    it marks as retransmissions, as following a segment not captured and as zero windows."""
    out = subprocess.run(
        ["tshark", "-r", str(capture), "-T", "fields", "-e", "tcp.srcport", "-e", "tcp.dstport",
         "-e", "tcp.analysis.initial_rtt", "-e", "tcp.analysis.retransmission",
         "-e", "tcp.analysis.lost_segment", "-e", "tcp.analysis.zero_window",
         "-E", "occurrence=f"],
        capture_output=True, text=True, timeout=120, check=True).stdout
    rtt, retrans, lost, zero = {}, {}, {}, {}
    for line in out.splitlines():
        sport, dport, initial, re_, gap, zw = (line.split("\t") + [""] * 6)[:6]
        key = tuple(sorted((int(sport), int(dport))))
        if initial:
            rtt[key] = float(initial) * 1e3
        retrans[key] = retrans.get(key, 0) + bool(re_)
        lost[key] = lost.get(key, 0) + bool(gap)
        zero[key] = zero.get(key, 0) + bool(zw)
    return rtt, retrans, lost, zero


def _compare_with_tshark(path, port=9092):
    rtt, retrans, lost, zero = _tshark(path)
    t = analysis.load(path, port=port)
    ex = t.exchanges
    for cid, cport, bport in zip(t.connections["connection_id"], t.connections["client_port"],
                                 t.connections["broker_port"]):
        key = tuple(sorted((int(cport), int(bport))))
        mine = ex[ex["connection_id"] == cid]
        got = mine.loc[mine["rtt_source"] == "handshake", "rtt_ms"].dropna().unique()
        if key in rtt:
            assert list(got) == [pytest.approx(rtt[key], abs=1e-3)], key
        else:
            assert len(got) == 0, key
        assert mine["retransmits"].sum() == retrans.get(key, 0), key
        assert mine["tcp_gaps"].sum() == lost.get(key, 0), key
        assert mine["zero_windows"].sum() == zero.get(key, 0), key
    return rtt, retrans, lost, zero


def test_against_tsharks_tcp_analysis(capture):
    """tshark's initial RTT (SYN to the handshake's ACK) and its retransmission, lost-segment
    and zero-window marks, per connection, against ours."""
    require_tool("tshark")
    rtt, retrans, lost, zero = _compare_with_tshark(capture)
    assert len(rtt) == 1 and sum(retrans.values()) == 1 and sum(lost.values()) == 1
    assert sum(zero.values()) == 1


def test_real_capture_round_trips_against_tshark():
    require_tool("tshark")
    path = require_path(CAPTURES / "librdkafka_produce_consume.pcap")
    rtt, _, _, _ = _compare_with_tshark(path)
    assert len(rtt) >= 10   # every connection's handshake was captured


def test_port_auto_gives_the_same_anatomy(capture):
    """With --port auto a flow is recognised at its first data, after the handshake: its times
    are kept all the same."""
    cols = ["rtt_ms", "broker_rtt_ms", "rtt_source", "broker_ms", "retransmits", "tcp_gaps",
            "zero_windows"]
    by_port = analysis.load(capture).exchanges.sort_values("exchange")[cols]
    auto = analysis.load(capture, port="auto").exchanges.sort_values("exchange")[cols]
    pd.testing.assert_frame_equal(by_port.reset_index(drop=True), auto.reset_index(drop=True))
    assert by_port["rtt_ms"].notna().sum() == 3
