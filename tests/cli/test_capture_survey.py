"""What a look at a capture's first packets tells a run (capture_survey). A run whose broker
ports found nothing names the capture's TCP server ports: checked against tshark's count of
connection openings per port on the shipped TLS capture, whose brokers listen on 9093 and 19092,
not on the default 9092. A run whose packets the snapshot length cut says so: checked against
tshark's count of packets captured shorter than they were."""
import collections
import subprocess

import pytest

from dissector import capture_survey
from dissector.capture.writer import PcapWriter
from dissector.cli import main
from tests.support import CAPTURES, require_tool

TLS = CAPTURES / "tls" / "kafka_tls.pcap"
HINT = "no Kafka exchange: no TCP on port 9092"


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    return (code, *capsys.readouterr())


def test_server_ports_as_tshark_counts_connection_openings():
    require_tool("tshark")
    syns = subprocess.run(["tshark", "-r", str(TLS), "-Y", "tcp.flags.syn==1 && tcp.flags.ack==0",
                           "-T", "fields", "-e", "tcp.dstport"],
                          capture_output=True, text=True, check=True).stdout.split()
    s = capture_survey.survey([TLS], {9092})
    assert s.servers == collections.Counter(map(int, syns)) and set(s.servers) == {9093, 19092}
    assert s.packets == s.tcp > 0 and s.on_ports == s.cut == 0
    assert capture_survey.survey([TLS], {9093}).on_ports > 0


@pytest.mark.parametrize("extra", [[], ["--jobs", "2"]])
def test_read_names_the_server_ports(capsys, extra):
    code, out, err = run_cli(capsys, "read", TLS, *extra)
    assert code == 0 and out == ""
    assert f"{HINT}; TCP servers in the capture: 9093 (7 connections), 19092 (7 connections); " \
           "pass --port PORT (e.g. --port 9093), or --port auto" in err


@pytest.mark.parametrize("argv", [["records", TLS], ["stats", TLS],
                                  ["tree", TLS, "--exchange", "1"]])
def test_the_other_commands_name_them(capsys, argv):
    _, _, err = run_cli(capsys, *argv)
    assert HINT in err


@pytest.mark.parametrize("port", [["--port", "9093"], ["--port", "auto"], []])
def test_no_hint_where_the_ports_carry_tcp(capsys, port):
    """On the right port (TLS not decrypted is told otherwise), with --port auto, and where
    the default port has Kafka: no hint."""
    capture = TLS if port else CAPTURES / "kafka_python.pcap"
    _, _, err = run_cli(capsys, "read", capture, *port)
    assert "no Kafka exchange" not in err


def _udp(path, count):
    eth = b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00"
    ip = bytes.fromhex("450000200000400040110000") + bytes([10, 0, 0, 1, 10, 0, 0, 2])
    udp = bytes.fromhex("303903e8000c0000") + b"kafk"
    with open(path, "wb") as f:
        w = PcapWriter(f, 1)
        for i in range(count):
            w.write(i * 1000, eth + ip + udp)


def test_a_capture_without_tcp(capsys, tmp_path, monkeypatch):
    path = tmp_path / "udp.pcap"
    _udp(path, 12)
    _, _, err = run_cli(capsys, "read", path)
    assert "no Kafka exchange: no TCP packets in the capture" in err
    monkeypatch.setattr(capture_survey, "SCANNED", 5)   # a large capture: only its start is read
    assert capture_survey.hint([path], (9092,)) == \
        "no Kafka exchange: no TCP packets in its first 5 packets"


def test_a_notebook_load_warns_with_the_ports():
    import warnings
    import analysis
    with pytest.warns(UserWarning, match=r'TCP servers in the capture: 9093 \(7 connections\), '
                                         r'19092 \(7 connections\); pass port=PORT \(e.g. '
                                         r'port=9093\), or port="auto"'):
        assert analysis.load(TLS).exchanges.empty
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        analysis.load(TLS, port=["auto"])
        analysis.load(CAPTURES / "kafka_python.pcap")


@pytest.fixture(scope="module")
def cut(tmp_path_factory):
    """kafka_python.pcap cut at 120 bytes a packet (editcap -s 120: its header declares 120, as
    `tcpdump -s 120` writes it), and the same declaring 262144, as a file cut by a tool that
    keeps the header says: then the holes the run found are what leads to the packets."""
    require_tool("editcap")
    d = tmp_path_factory.mktemp("snaplen")
    declared = d / "declared.pcap"
    subprocess.run(["editcap", "-F", "pcap", "-s", "120", str(CAPTURES / "kafka_python.pcap"),
                    str(declared)], check=True)
    data = bytearray(declared.read_bytes())
    assert data[:4] == b"\xd4\xc3\xb2\xa1" and data[16:20] == (120).to_bytes(4, "little")
    data[16:20] = (262144).to_bytes(4, "little")
    after = d / "undeclared.pcap"
    after.write_bytes(bytes(data))
    return after, declared


def test_cut_packets_as_tshark_counts_them(cut):
    require_tool("tshark")
    after, declared = cut
    shorter = subprocess.run(["tshark", "-r", str(after), "-Y", "frame.len > frame.cap_len"],
                             capture_output=True, text=True, check=True).stdout.splitlines()
    assert capture_survey.survey([after], {9092}).cut == len(shorter) > 0
    assert capture_survey.declared_snaplen(after) == 262144
    assert capture_survey.declared_snaplen(declared) == 120


def test_the_commands_say_what_the_snapshot_length_cut(cut, capsys):
    after, declared = cut
    n = capture_survey.survey([after], {9092}).cut
    for path, length in ((after, ""), (declared, " (120 bytes)")):
        for argv in (["read", path], ["stats", path], ["records", path]):
            _, _, err = run_cli(capsys, *argv)
            assert (f"kafka-dissect: {n} packets on port 9092 in the capture were cut by the "
                    f"snapshot length the capture was taken with{length}: their Kafka bytes are "
                    f"missing") in err
    _, _, err = run_cli(capsys, "read", CAPTURES / "kafka_python.pcap")
    assert err == ""
    import analysis
    with pytest.warns(UserWarning, match="were cut by the snapshot length"):
        analysis.load(declared)
