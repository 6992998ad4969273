"""The pipes between the parent and its workers: messages of any size arrive whole and in order,
and on Linux each pipe holds PIPE_SIZE bytes (a step's rendered exchanges in one write)."""
from __future__ import annotations

import fcntl
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
