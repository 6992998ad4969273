"""A capture point that delays one direction (a mirror port queueing the two apart, or captures of
each direction merged): real traffic with every client packet shifted later by 0.1 ms, so the
broker's acks come before the bytes they acknowledge. Those bytes were declared lost and cannot be
put back; each stream that lost some says so once (`tcp.late_data`), and the capture as taken
says nothing of the kind."""
import collections
import struct

from dissector.capture.files import read_packets
from dissector.pipeline import dissect

from tests.support import CAPTURES
from tests.tls.tlsgen import write_pcap

CAPTURE = CAPTURES / "codecs.pcap"
PORT = 9092


def _to_broker(frame):
    ihl = (frame[14] & 15) * 4
    return struct.unpack_from("!H", frame, 14 + ihl + 2)[0] == PORT


def _issues(path):
    run = dissect(path, (PORT,), level="bodies")
    exchanges = list(run)
    return collections.Counter(i.code for i in run.issues), exchanges, run.issues


def test_acks_seen_before_their_data_are_reported_once_a_stream(tmp_path):
    packets = [(ts, data) for _, ts, _, data in read_packets(CAPTURE)]
    write_pcap(tmp_path / "taken.pcap", packets)
    codes, taken, _ = _issues(tmp_path / "taken.pcap")
    assert "tcp.late_data" not in codes and "tcp.gap" not in codes

    delayed = sorted(((ts + 100_000 if _to_broker(f) else ts), f) for ts, f in packets)
    write_pcap(tmp_path / "delayed.pcap", delayed)
    codes, got, issues = _issues(tmp_path / "delayed.pcap")
    late = [i for i in issues if i.code == "tcp.late_data"]
    assert codes["tcp.gap"] and late
    # once a stream: the request streams of the connections that lost bytes
    assert len({i.connection_id for i in late}) == len(late)
    assert all("request stream" in i.detail and "declared lost" in i.detail for i in late)
    assert sum(e.status == "ok" for e in got) < sum(e.status == "ok" for e in taken)
