"""Large captures: memory stays flat and every packet comes out, whatever the chunking."""
import tracemalloc

from dissector.capture import read_packets
from dissector.capture.chunks import CHUNK, SPARE
from dissector.capture.writer import PcapngWriter, PcapWriter
from tests.capture import build

PKT = build.tcp_packet(7, size=1448)
N = 30_000  # ~45 MB


def _check_flat(path):
    tracemalloc.start()
    try:
        count = 0
        total = 0
        for no, ts, _, data in read_packets(path):
            count += 1
            total += len(data)
            assert ts == no * 1000
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == N and total == N * len(PKT)
    # One reused buffer (CHUNK + SPARE) plus small change, not the file (~45 MB).
    assert peak < CHUNK + SPARE + (1 << 20), peak


def test_large_pcap_memory_is_flat(tmp_path):
    path = tmp_path / "big.pcap"
    with PcapWriter(path, 1) as w:
        for i in range(1, N + 1):
            w.write(i * 1000, PKT)
    assert path.stat().st_size > 40e6
    _check_flat(path)


def test_large_pcapng_memory_is_flat(tmp_path):
    path = tmp_path / "big.pcapng"
    with PcapngWriter(path, 1) as w:
        for i in range(1, N + 1):
            w.write(i * 1000, PKT)
    _check_flat(path)
