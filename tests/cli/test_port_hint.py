"""A run whose broker ports found nothing names the capture's TCP server ports (port_hint):
checked against tshark's count of connection openings per port on the shipped TLS capture,
whose brokers listen on 9093 and 19092, not on the default 9092."""
import collections
import subprocess

import pytest

from dissector import port_hint
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
    packets, tcp, on_ports, found = port_hint.servers([TLS], {9092})
    assert found == collections.Counter(map(int, syns)) and set(found) == {9093, 19092}
    assert packets == tcp > 0 and on_ports == 0
    assert port_hint.servers([TLS], {9093})[2] > 0


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
    monkeypatch.setattr(port_hint, "SCANNED", 5)   # a large capture: only its start is read
    assert port_hint.hint([path], (9092,)) == \
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
