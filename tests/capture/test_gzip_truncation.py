"""A cut .pcap.gz loses nothing that decompresses: its exchanges are those of the decompressible
prefix written as a plain pcap (the prefix made by zlib itself, not by our reader), then the
one-line error."""
import gzip
import zlib
from pathlib import Path

import pytest

from dissector.capture.files import read_packets
from dissector.pipeline import dissect
from dissector.tables import exchange_row

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


def _rows(path):
    run = dissect([str(path)])
    return [exchange_row(e) for e in run], run.errors


@pytest.mark.parametrize("name", ["kafka_python.pcap", "codecs.pcap"])
def test_cut_gzip_equals_its_decompressible_prefix(tmp_path, name):
    raw = (CAPTURES / name).read_bytes()
    gz = gzip.compress(raw, compresslevel=6)
    cuts = sorted({len(gz) * k // 9 for k in range(1, 9)} | {30000 % len(gz), len(gz) - 9})
    for cut in cuts:
        d = zlib.decompressobj(31)
        prefix = d.decompress(gz[:cut]) + d.flush()
        (tmp_path / "cut.pcap.gz").write_bytes(gz[:cut])
        (tmp_path / "prefix.pcap").write_bytes(prefix)
        got, errors = _rows(tmp_path / "cut.pcap.gz")
        want, _ = _rows(tmp_path / "prefix.pcap")
        assert got == want, cut
        assert len(want) > 0 or len(prefix) < 5000
        assert errors == [f"{tmp_path / 'cut.pcap.gz'}: truncated gzip stream"]
    assert _rows(CAPTURES / name)[0] == _rows_gz(tmp_path, gz)


def _rows_gz(tmp_path, gz):
    (tmp_path / "whole.pcap.gz").write_bytes(gz)
    rows, errors = _rows(tmp_path / "whole.pcap.gz")
    assert errors == []
    return rows


def test_members_padding_and_bad_crc(tmp_path):
    raw = (CAPTURES / "kafka_python.pcap").read_bytes()
    half = len(raw) // 2
    path = tmp_path / "two.pcap.gz"
    path.write_bytes(gzip.compress(raw[:half]) + gzip.compress(raw[half:]) + b"\0" * 100)
    packets = list(read_packets(path))
    assert packets == list(read_packets(CAPTURES / "kafka_python.pcap"))
    bad = bytearray(gzip.compress(raw))
    bad[-6] ^= 0xFF   # the CRC-32 trailer
    path.write_bytes(bytes(bad))
    rows, errors = _rows(path)
    assert len(errors) == 1 and "read error" in errors[0]
    whole = _rows(CAPTURES / "kafka_python.pcap")[0]
    assert len(rows) > len(whole) // 2 and rows == whole[:len(rows)]
