"""What the workers of a parallel run do, and how many there are (see dissector.parallel)."""
from __future__ import annotations

import os
import struct

from ..capture.files import STDIN
from ..pipeline import DEFAULT_PORTS, MAX_FRAME

PARALLEL_FROM = 64 << 20   # captures this large (in all) get every core by default
# a client's flows stay on its worker until that has this many more than another: then they
# are dealt one by one. Without it, a capture of one client host (or of loopback) is one
# worker's; with moves of the client from worker to worker, 20% more work for one of two
# (bulk traffic: connections of very different sizes, dealt in runs).
SPREAD = 16
_ONE_BY_ONE = -1
# dealt one by one, a flow goes to a worker within SLACK flows of the fewest, picked by a hash
# of the flow: strict turns line up with traffic that repeats (a client opening its
# connections in the same order each time): on the dense mix from one host, one worker of two
# got twice the other's bytes (the hash: 1.00-1.15x the mean over three captures)
SLACK = 4
_PORT = struct.Struct("!H").pack


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


def jobs_for(requested, paths, auto=False) -> int:
    """How many processes: `requested` (--jobs), else every core for captures over PARALLEL_FROM
    bytes in all, else 1; 1 with `--port auto` (where a flow is Kafka is learnt from all of
    them), where the system cannot fork (Windows: the workers are forked) and where a capture is
    not a regular file (standard input, a pipe). By default 1 for gzip-compressed captures too:
    every worker reads every packet, and would decompress the whole capture."""
    if auto or not hasattr(os, "fork"):
        return 1
    if any(str(p) == STDIN or not os.path.isfile(p) for p in paths):
        return 1   # standard input or a pipe: read once, so by one process
    if requested is not None:
        return max(1, requested)
    files = [p for p in paths if os.path.isfile(p)]
    if any(_gzip(p) for p in files):
        return 1
    return cores() if sum(os.path.getsize(p) for p in files) > PARALLEL_FROM else 1


def _gzip(path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except OSError:   # the reader says what is wrong with it
        return False


class Shared(list):
    """A render's pieces (one per exchange) with one value for all of them, `shared` (one step's
    rows in columns, say): the parent's write then gets (pieces, first, whose, shared), `whose`
    the worker of each piece and `shared` each worker's value, in worker order."""
    shared = None


class Plan:
    """What the workers do: dissect `paths` like dissect() and render each chunk's exchanges
    with `render()` (called once in each worker): a function of a list of numbered exchanges
    returning one piece per exchange, None for none (or a Shared list of them); or, to render
    them as they complete, an object with that function as `late` and either
    `draft(exchanges)`, returning per exchange its piece but for its connection id and number,
    as the three strings around them (the number after the id), or None where `late` renders
    it once numbered; or `early = True`, where a piece needs the global id of its exchange's
    connection but not its number: the worker renders an exchange with `late` as it completes
    if its connection's id is known by then (the connection opened in an earlier step), else
    once numbered. With `out` (the file descriptor of a regular file, at the place to write
    from), each piece is (what the parent's write gets, bytes the worker writes there itself:
    placing.py). `step`: the file chunks a worker reads between its reports (None:
    worker.STEP_CHUNKS)."""

    def __init__(self, paths, render, jobs, ports=DEFAULT_PORTS, *, level="headers",
                 max_frame=MAX_FRAME, keep_bodies=True, keylog=None, tables=False,
                 by="client", out=None, records_only=False, step=None):
        self.paths = [os.fspath(p) for p in paths]
        self.render = render
        self.jobs = jobs
        self.ports = frozenset(ports)
        self.auto = False
        self.level = level
        self.max_frame = max_frame
        self.keep_bodies = keep_bodies
        self.records_only = records_only   # as for pipeline.Dissector
        self.keylog = keylog   # a dissector.tls KeyLog (each worker has its copy)
        self.tables = tables   # the run's result also has `issues` and `connections`
        self.by = by
        self.out = out
        self.step = step

    def owns(self, me):
        """owns(src, dst, sport, dport, past=False) for worker `me`, asked at each new flow's
        first packet (the same packets, in the same order, in every worker, so that every
        worker decides alike): a client (its address; with by="connection", a flow) seen for
        the first time goes to the worker with the fewest flows so far (the lowest between
        equals), its later flows to the same worker (they share topic ids: apart, a lookup of
        one learnt on the other worker stops the run), until that worker has SPREAD flows more
        than the one with the fewest: from then on each of the client's flows is dealt on its
        own (_one_by_one). Dealing clients round the workers in turn would ignore how many
        connections each opens: clients alternating many and few line up with the turns.

        past=True (once the workers remember no more flows: part.MAX_FLOWS): the flow's worker
        from what was dealt until then and a hash, the same at each of its packets, in either
        direction, whenever asked; nothing is remembered."""
        ports, jobs = self.ports, self.jobs
        by_client = self.by == "client"
        dealt = {}
        flows = [0] * jobs

        def owns(src, dst, sport, dport, past=False):
            if by_client and dport in ports:
                key = src
            elif by_client and sport in ports:
                key = dst
            else:
                key = _flow(src, dst, sport, dport)
            worker = dealt.get(key)
            if past:
                if worker is None:
                    worker = _hashed(key) % jobs
                elif worker == _ONE_BY_ONE:
                    worker = _hashed(_flow(src, dst, sport, dport)) % jobs
                return worker == me
            if worker is None:
                worker = dealt[key] = flows.index(min(flows))
            elif worker == _ONE_BY_ONE or flows[worker] - min(flows) >= SPREAD:
                dealt[key] = _ONE_BY_ONE
                worker = _one_by_one(flows, src + dst + _PORT(sport) + _PORT(dport))
            flows[worker] += 1
            return worker == me
        return owns


def _flow(src, dst, sport, dport) -> bytes:
    """A flow's addresses and ports as bytes, the same in either direction."""
    a, b = src + _PORT(sport), dst + _PORT(dport)
    return min(a, b) + max(a, b)


def _one_by_one(flows, flow) -> int:
    """The worker of a flow dealt on its own: one within SLACK flows of the fewest, by a hash of
    the flow (its addresses and ports as bytes)."""
    least = min(flows)
    near = [w for w, n in enumerate(flows) if n - least < SLACK]
    return near[_hashed(flow) % len(near)]


def _hashed(data) -> int:
    """A hash of `data` that is the same in every process and every run."""
    from hashlib import blake2b   # here: every command asks jobs_for, and OpenSSL's start is 4 ms
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "big")
