"""Workers writing their pieces into the output at the parent's offsets (parallel.placing): every
piece lands at its place, adjacent ones in one call, more than a call takes, short writes
finished; and `records --jobs 2` to stdout (a pipe: the parent writes) is one process's too."""
import os
import subprocess
import sys
from pathlib import Path

from dissector.parallel import placing

CAPTURE = Path(__file__).resolve().parents[2] / "captures" / "codecs.mss1448.pcap"


def test_offsets_follow_one_another():
    assert placing.offsets([3, 0, 5, 1], 10) == [10, 13, 13, 18]
    assert placing.offsets([], 7) == []


def test_pieces_land_at_their_places(tmp_path, monkeypatch):
    # two workers' interleaved pieces, some empty, one run longer than a pwritev call takes
    pieces = [bytes([65 + i % 26]) * (1 + i % 7) for i in range(3000)]
    pieces[5] = pieces[17] = None
    pieces[9] = b""
    places = placing.offsets([len(p or b"") for p in pieces], 4)
    calls = []
    pwritev = os.pwritev

    def short(fd, bufs, at):   # every third call writes less than asked
        calls.append(len(bufs))
        if len(calls) % 3 == 0 and sum(map(len, bufs)) > 1:
            return os.pwrite(fd, bufs[0][:1], at)
        return pwritev(fd, bufs, at)
    monkeypatch.setattr(placing.os, "pwritev", short)
    path = tmp_path / "out"
    path.write_bytes(b"head")
    with open(path, "r+b") as f:
        mine = range(0, 3000, 2)
        placing.write_at(f.fileno(), [pieces[i] for i in mine], [places[i] for i in mine])
        theirs = range(1, 3000, 2)
        placing.write_at(f.fileno(), [pieces[i] for i in theirs], [places[i] for i in theirs])
    assert path.read_bytes() == b"head" + b"".join(p or b"" for p in pieces)
    assert max(calls) <= placing.IOV_MAX


def test_one_run_in_one_call(tmp_path):
    path = tmp_path / "out"
    path.write_bytes(b"")
    with open(path, "r+b") as f:
        placing.write_at(f.fileno(), [b"ab", b"cd", b"ef"], [0, 2, 4])
    assert path.read_bytes() == b"abcdef"


def test_records_to_a_pipe(tmp_path):
    def run(jobs):
        return subprocess.run(
            [sys.executable, "-m", "dissector", "records", str(CAPTURE), "--format", "csv",
             "--jobs", str(jobs)], capture_output=True, check=True).stdout
    one = run(1)
    assert one.count(b"\n") > 100
    assert run(2) == one


def test_a_chunk_reserved_ahead_then_written(tmp_path):
    path = tmp_path / "out"
    path.write_bytes(b"head")
    pieces = [b"x" * 5000, b"y" * 70000, b"z" * 3]
    places = placing.offsets([len(p) for p in pieces], 4)
    reserve = placing.reserver()
    with open(path, "r+b") as f:
        reserved = reserve(f.fileno(), 4, sum(map(len, pieces)))
        if sys.platform == "linux":   # every local file system of Linux has fallocate
            assert reserved
        if reserved:
            st = os.stat(path)
            assert st.st_size == 4 + 75003 and st.st_blocks * 512 >= 75003
            assert path.read_bytes() == b"head" + bytes(75003)
        placing.write_at(f.fileno(), pieces, places)
    assert path.read_bytes() == b"head" + b"".join(pieces)


def test_a_failed_reservation_is_not_tried_again(tmp_path, monkeypatch):
    calls = []

    def refused(fd, mode, at, size):   # a file system without fallocate, or a full disk
        calls.append((at, size))
        return -1
    monkeypatch.setattr(placing, "_fallocate", lambda: refused)
    reserve = placing.reserver()
    path = tmp_path / "out"
    path.write_bytes(b"")
    with open(path, "r+b") as f:
        assert not reserve(f.fileno(), 0, 100)
        assert not reserve(f.fileno(), 100, 100)
        assert not reserve(f.fileno(), 200, 0)
    assert calls == [(0, 100)]
    assert path.read_bytes() == b""


def test_without_fallocate_nothing_is_reserved(monkeypatch):
    monkeypatch.setattr(placing, "_fallocate", lambda: None)
    assert not placing.reserver()(0, 0, 100)
