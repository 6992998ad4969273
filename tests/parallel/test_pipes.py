"""The pipes between the parent and its workers: messages of any size arrive whole and in order,
and on Linux each pipe holds PIPE_SIZE bytes (a step's rendered exchanges in one write)."""
from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

import pytest

from dissector.parallel.pipes import PIPE_SIZE, Workers
from tests.support import require


def _echo(w, link):
    """Says its pipes' sizes, then sends back what it is sent until told to stop."""
    getsz = getattr(fcntl, "F_GETPIPE_SZ", None)
    sizes = [fcntl.fcntl(fd, getsz) for fd in (link.up, link.down)] if getsz else None
    link.put(("sizes", w, sizes))
    while (msg := link.get()) != "stop":
        link.put(("echo", w, msg))


def _run(messages):
    workers = Workers()
    got = {0: [], 1: []}
    try:
        workers.start(2, _echo)
        for w in (0, 1):
            for msg in messages:
                workers.put(w, msg)
            workers.put(w, "stop")
        while len(workers.done) < 2:
            for kind, w, msg in workers.messages(timeout=10):
                got[w].append((kind, msg))
                if len(got[w]) == len(messages) + 1:   # all it will say
                    workers.finished(w)
    finally:
        workers.stop()
    return got


def test_big_messages_arrive_whole_and_in_order():
    messages = [b"x" * 3_000_000, "small", list(range(200_000)), b"y" * 70_000]
    got = _run(messages)
    for w in (0, 1):
        assert [m for kind, m in got[w] if kind == "echo"] == messages


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pipe sizes are Linux's")
def test_pipes_hold_a_step():
    require(int(Path("/proc/sys/fs/pipe-max-size").read_text()) >= PIPE_SIZE,
            "pipes of PIPE_SIZE bytes (/proc/sys/fs/pipe-max-size)")
    got = _run([])
    for w in (0, 1):
        assert got[w] == [("sizes", [PIPE_SIZE, PIPE_SIZE])]


def _columns(w, link):
    """Sends Arrow and numpy columns large and small, and what it was asked to send back."""
    import numpy as np
    import pyarrow as pa
    big = pa.array([bytes([i % 251]) * 700 for i in range(3000)], pa.binary())   # 2 MB
    link.put(("columns", w, (big, np.arange(300_000), pa.array([1, None, 3]), "text")))
    while (msg := link.get()) != "stop":
        link.put(("echo", w, msg))


def test_columns_arrive_equal_through_shared_memory_or_the_pipe(monkeypatch):
    """Large buffers go through a memory file (Linux), small ones and everything else through
    the pipe; the parent may write into what it received (mapped copy-on-write); with no memory
    files (another system, or none left) everything goes through the pipe."""
    import numpy as np
    import pyarrow as pa

    from dissector.parallel import pipes

    def receive():
        workers = Workers()
        got = {}
        try:
            workers.start(2, _columns)
            for w in (0, 1):
                workers.put(w, "stop")
            while len(got) < 2:
                for kind, w, msg in workers.messages(timeout=10):
                    got[w] = msg
                    workers.finished(w)
        finally:
            workers.stop()
        return got

    shared = []
    real = pipes._mapped
    monkeypatch.setattr(pipes, "_mapped", lambda *a: shared.append(1) or real(*a))
    for expect_shared in ((True, False) if pipes._MEMFD else (False,)):
        if not expect_shared:
            monkeypatch.setattr(os, "memfd_create", _refuse, raising=False)
        shared.clear()
        for big, numbers, small, text in receive().values():
            assert big.to_pylist() == [bytes([i % 251]) * 700 for i in range(3000)]
            assert small.to_pylist() == [1, None, 3] and text == "text"
            numbers[:3] = -1   # written in place, as the parent's merging may
            assert numbers.tolist() == [-1, -1, -1, *range(3, 300_000)]
            assert isinstance(big, pa.Array) and isinstance(numbers, np.ndarray)
        assert len(shared) == (2 if expect_shared else 0)


def _refuse(*_):
    raise OSError("no memory files here")


def test_a_memory_file_the_kernel_dropped_is_a_clear_error(monkeypatch):
    """recv_fds gives no descriptor when this process has none left (the kernel drops it)."""
    from dissector.parallel import pipes
    monkeypatch.setattr(pipes.socket, "recv_fds", lambda *a: (b"f", [], 0, None))
    with pytest.raises(RuntimeError, match="out of file descriptors"):
        pipes._mapped(None, [8])
