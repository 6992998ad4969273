"""Plain capture files of a chunk or more are mapped (capture/mapped.py), not read into a buffer:
the same packets come out, gzip files are still read, and the pages behind the window are given
back as the reading moves on (the resident set stays bounded on multi-GB files)."""
import gzip

from dissector.capture import chunks, files, mapped
from dissector.capture.pcap import pcap_packets
from tests.capture import build

PACKETS = [build.tcp_packet(i, size=1400) for i in range(1000)]   # ~1.4 MB


def _write(tmp_path, name="big.pcap", zipped=False):
    raw = build.pcap([(1_700_000_000 + i, i, p) for i, p in enumerate(PACKETS)])
    path = tmp_path / name
    path.write_bytes(gzip.compress(raw) if zipped else raw)
    return path


def _packets(path):
    f, ch, kind = files.open_capture(path)
    try:
        assert kind == "pcap"
        return type(ch), list(pcap_packets(ch)), ch   # (packet_no, ts_ns, linktype, data)
    finally:
        f.close()


def test_large_plain_files_are_mapped_and_gzip_files_read(tmp_path, monkeypatch):
    kind, got, _ = _packets(_write(tmp_path))
    assert kind is mapped.MappedChunks
    assert [d for _, _, _, d in got] == PACKETS
    zkind, zgot, _ = _packets(_write(tmp_path, "big.pcap.gz", zipped=True))
    assert zkind is chunks.Chunks and zgot == got
    monkeypatch.setattr(files, "MAP_FROM", 1 << 40)   # nothing mapped: the read path
    rkind, rgot, _ = _packets(_write(tmp_path))
    assert rkind is chunks.Chunks and rgot == got


def test_pages_behind_the_window_are_released(tmp_path, monkeypatch):
    monkeypatch.setattr(chunks, "CHUNK", 16 << 10)
    monkeypatch.setattr(mapped, "RELEASE", 64 << 10)
    kind, got, ch = _packets(_write(tmp_path))
    assert kind is mapped.MappedChunks and [d for _, _, _, d in got] == PACKETS
    size = (tmp_path / "big.pcap").stat().st_size
    # released in whole pages, up to within RELEASE + a chunk of the end
    assert ch._released % mapped.mmap.PAGESIZE == 0
    assert size - (64 << 10) - (16 << 10) - mapped.mmap.PAGESIZE <= ch._released <= size


def test_a_file_that_cannot_be_mapped_is_read(tmp_path, monkeypatch):
    """A file system without mmap (or no address space left): the chunked reader, same packets."""
    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")
    monkeypatch.setattr(mapped.mmap, "mmap", refuse)
    kind, got, _ = _packets(_write(tmp_path))
    assert kind is chunks.Chunks and [d for _, _, _, d in got] == PACKETS


def test_mapping_ahead_is_given_up_where_the_kernel_refuses_it(tmp_path, monkeypatch):
    """Pages are mapped a chunk ahead (MADV_POPULATE_READ); a kernel without it (EINVAL) leaves
    them to be mapped as they are touched, with the same packets read."""
    monkeypatch.setattr(chunks, "CHUNK", 16 << 10)
    monkeypatch.setattr(mapped, "_POPULATE", 0x7FFF)   # no such advice: EINVAL
    kind, got, ch = _packets(_write(tmp_path))
    assert [d for _, _, _, d in got] == PACKETS and ch._populate is False
