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


# a process without a free descriptor: the kernel drops the one passed to it (in a process of
# its own, so that this one never runs out)
_DROPPED = """
import _socket, errno, os, resource
from dissector.parallel import pipes
a, b = _socket.socketpair()
fd = os.memfd_create("t")
os.write(fd, bytes(8))
pipes._send_fd(a, fd)
os.close(fd)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(b.fileno(), a.fileno()) + 8,
                                            resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = []
try:
    while True:
        held.append(os.dup(a.fileno()))
except OSError as exc:
    assert exc.errno == errno.EMFILE, exc
try:
    pipes._mapped(b, [8])
except RuntimeError as exc:
    print("error:", exc)
"""


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memory files are Linux's")
def test_a_memory_file_the_kernel_dropped_is_a_clear_error():
    """A descriptor passed to a process that has none left is dropped by the kernel: the parent
    says so instead of failing on a missing one."""
    import subprocess
    out = subprocess.run([sys.executable, "-c", _DROPPED], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2], timeout=60)
    assert out.returncode == 0, out.stderr
    assert "out of file descriptors" in out.stdout


def test_a_passed_descriptor_arrives():
    """What _send_fd passes, _recv_fd gives back as another descriptor of the same file."""
    import _socket
    from dissector.parallel import pipes
    a, b = _socket.socketpair()
    fd = os.open(__file__, os.O_RDONLY)
    try:
        pipes._send_fd(a, fd)
        got = pipes._recv_fd(b)
        assert got is not None and got != fd
        try:
            assert os.fstat(got).st_ino == os.fstat(fd).st_ino
        finally:
            os.close(got)
    finally:
        os.close(fd)
        a.close()
        b.close()
