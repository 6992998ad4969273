"""The parent of a parallel run: numbers each chunk as one process would, checks that the workers
cannot have differed from one process, and writes the rendered pieces in order.

One process numbers connections 1, 2, 3... in the order they open and exchanges in the order
they complete; in the final flush, connection by connection in id order. A worker notes the
packet of each (part.Part), and one packet belongs to one connection, so sorting a chunk's
notes by packet (stably: a worker's notes of one packet are in their order) gives one process's
order; the flush's exchanges sort by their connection's id.
"""
from __future__ import annotations

import os
import time
from collections import deque
from itertools import chain
from operator import attrgetter
from types import SimpleNamespace

from ..budget import BUFFER_BUDGET
from ..pipeline import MAX_KEPT_ISSUES
from ..tcp.flows import MAX_CLOSED, MAX_LIVE, MAX_QUIET
from .part import AT_END
from .pipes import Workers
from .placing import offsets, reserver
from .plan import Shared
from .worker import DONE, FAILED, KEYS, NUMBERS, OFFSETS, PIECES, WROTE, work


class Diverged(Exception):
    """The workers may have made something one process would not have: `written` exchanges
    (numbers 1..written) are out; dissect again in one process and skip them."""

    def __init__(self, written, why):
        super().__init__(why)
        self.written = written


class Result:
    """After a run: `errors` (one line per damaged or unreadable capture), `packets`, `bytes`,
    `exchanges` (how many), `tls.undecrypted` (TLS connections none of whose data could be decrypted); with
    plan.tables, `issues` (not tied to an exchange) and `connections`, as a Dissection's."""

    def __init__(self):
        self.errors = []
        self.cpu = {}       # worker -> its CPU seconds
        self.tls = SimpleNamespace(undecrypted=0)
        self.dissector = SimpleNamespace(tls=self.tls)   # where a Dissection has it
        self.issues = []
        self.connections = []
        self.packets = 0
        self.bytes = 0
        self.exchanges = 0


def run(plan, write, progress=None) -> Result:
    """Dissect plan.paths with plan.jobs workers; `write(pieces, first)` gets each chunk's
    pieces in exchange order (None for an exchange rendered as nothing), `first` the number of
    the chunk's first exchange (for Shared pieces also `whose` and `shared`: plan.Shared);
    `progress(path, bytes)` as dissect()'s. Raises Diverged."""
    before = time.process_time()
    workers = Workers()
    try:
        workers.start(plan.jobs, lambda w, link: work(w, plan, link))
        started = time.process_time()
        parent = _Parent(plan, workers, write, progress)
        try:
            while len(parent.done) < plan.jobs:
                for msg in workers.messages():
                    parent.handle(msg)
                if parent.stopping is not None and parent.to_ack == parent.stopping[0]:
                    raise Diverged(parent.written, parent.stopping[1])
        finally:
            if plan.out is not None:   # after what is in the file
                os.lseek(plan.out, parent.at, os.SEEK_SET)
        _note_cpu(before, started, parent.result.cpu)
        parent.result.exchanges = parent.exchanges
        return parent.result
    finally:
        workers.stop()


def _note_cpu(before, started, workers):
    """For benchmarks/jobs_scaling.py: the CPU seconds of this process when the parallel run
    began, once the workers were started and in all, and of each worker, as JSON in the file
    $KAFKA_DISSECT_CPU_NOTE names, if set."""
    path = os.environ.get("KAFKA_DISSECT_CPU_NOTE")
    if path:
        import json
        with open(path, "w") as f:
            json.dump({"parent_before": before, "parent_started": started,
                       "parent": time.process_time(),
                       "workers": [workers[w] for w in sorted(workers)]}, f)


class _Parent:
    def __init__(self, plan, workers, write, progress):
        self.jobs = plan.jobs
        self.workers = workers
        self.write = write
        self.progress = progress
        self.result = Result()
        self.done = set()
        self.keys = {}       # chunk -> {worker: its KEYS message}
        self.pieces = {}     # chunk -> {worker: its pieces}
        self.places = {}     # chunk -> (first number, per worker: positions of its exchanges)
        self.to_number = self.to_write = 0
        self.exchanges = 0   # numbered
        self.written = 0     # written (the last number out)
        self.connections = 0
        self.gid = [{} for _ in range(plan.jobs)]   # per worker: local connection id -> global
        self.checks = Checks()
        self.capture_level = {}   # worker -> (its keyed issues, its connections): plan.tables
        # with plan.out (placing.py): where the next piece goes, and the chunks placed but not
        # yet written by every worker (chunk -> [its last number, workers done with it])
        self.out = plan.out
        self.at = os.lseek(plan.out, 0, os.SEEK_CUR) if plan.out is not None else 0
        self.reserve = reserver() if plan.out is not None else None
        self.placed = {}
        self.to_ack = 0
        # the OFFSETS messages not yet sent, and whether a worker is writing: one at a time
        # (next_turn)
        self.turns = deque()
        self.writing = False
        self.stopping = None   # (chunk, why) once the workers may have differed: plan.out

    def handle(self, msg):
        kind, w = msg[0], msg[1]
        if kind == FAILED:   # its traceback shown with --debug
            exc = RuntimeError(f"worker {w} failed: {msg[2]}")
            exc.add_note(msg[3])
            raise exc
        if kind == KEYS:
            self.keys.setdefault(msg[2], {})[w] = msg
            while (self.stopping is None
                   and len(self.keys.get(self.to_number, ())) == self.jobs):
                self.number(self.keys.pop(self.to_number))
                self.to_number += 1
        elif kind == PIECES:
            self.pieces.setdefault(msg[2], {})[w] = msg[3]
            while len(self.pieces.get(self.to_write, ())) == self.jobs:
                self.flush(self.pieces.pop(self.to_write))
                self.to_write += 1
        elif kind == WROTE:
            self.writing = False
            self.next_turn()
            self.placed[msg[2]][1] += 1
            while self.placed.get(self.to_ack, (0, 0))[1] == self.jobs:
                self.written = self.placed.pop(self.to_ack)[0]
                self.to_ack += 1
        elif kind == DONE:
            self.done.add(w)
            self.workers.finished(w)
            self.result.cpu[w] = msg[5]
            self.result.tls.undecrypted += msg[6]
            if msg[7] is not None:
                self.capture_level[w] = msg[7], msg[8]
                if len(self.capture_level) == self.jobs:
                    self.merge_capture_level()
            if w == 0:
                _, _, errors, packets, nbytes = msg[:5]
                self.result.errors, self.result.packets, self.result.bytes = (errors, packets,
                                                                              nbytes)

    def merge_capture_level(self):
        """The workers' issues not tied to an exchange in one process's order (the first
        MAX_KEPT_ISSUES kept), and their connections by id."""
        keyed = [(key, w, i, issue) for w, (issues, _) in self.capture_level.items()
                 for i, (key, issue) in enumerate(issues)]
        keyed.sort(key=lambda k: k[:3])
        self.result.issues = [k[3] for k in keyed[:MAX_KEPT_ISSUES]]
        self.result.connections = sorted(
            (c for _, conns in self.capture_level.values() for c in conns),
            key=attrgetter("connection_id"))

    def number(self, msgs):
        chunk = msgs[0][2]
        marks = {m[3] for m in msgs.values()}
        if len(marks) != 1:
            raise RuntimeError(f"workers disagree on where chunk {chunk} ends: {sorted(marks)}")
        why = self.checks.chunk([msgs[w] for w in range(self.jobs)])
        if why is not None:
            if self.out is None:
                raise Diverged(self.written, why)
            self.stopping = chunk, why   # raised once what is placed is written (run)
            return
        # connections: in the order they opened
        opened = sorted((at, w, i) for w in range(self.jobs)
                        for i, (_lid, at) in enumerate(msgs[w][6]))
        gids = [[0] * len(msgs[w][6]) for w in range(self.jobs)]
        for at, w, i in opened:
            self.connections += 1
            gids[w][i] = self.connections
            self.gid[w][msgs[w][6][i][0]] = self.connections
        # exchanges: by the packet they completed in, or (final flush) their connection's id;
        # a worker's own are in order already
        keys = []
        for w in range(self.jobs):
            emitted, ends = msgs[w][4], msgs[w][5]
            if ends is not None:
                g = self.gid[w]
                emitted = [g[c] for c in ends]
            keys.append(emitted)
        positions = _places(keys)
        n = sum(len(k) for k in keys)
        first = self.exchanges + 1
        self.places[chunk] = (first, n, positions)
        self.exchanges += n
        for w in range(self.jobs):
            self.workers.put(w, (NUMBERS, chunk, [at + first for at in positions[w]], gids[w]))
        path, nbytes = msgs[0][10], msgs[0][11]
        if self.progress is not None and path is not None:
            self.progress(path, nbytes)

    def flush(self, pieces):
        first, n, positions = self.places.pop(self.to_write)
        out = [None] * n
        for w in range(self.jobs):
            for at, piece in zip(positions[w], pieces[w]):
                out[at] = piece
        if isinstance(pieces[0], Shared):   # every worker renders alike
            whose = [0] * n
            for w in range(1, self.jobs):
                for at in positions[w]:
                    whose[at] = w
            self.write(out, first, whose, [pieces[w].shared for w in range(self.jobs)])
            self.written = first + n - 1
            return
        if self.out is None:
            self.write(out, first)
            self.written = first + n - 1
            return
        # each piece (what `write` gets, its size): the sizes placed one after another
        sizes = [0 if p is None else p[1] for p in out]
        places = offsets(sizes, self.at)
        total = sum(sizes)
        self.reserve(self.out, self.at, total)
        self.at += total
        for w in range(self.jobs):
            self.turns.append((w, (OFFSETS, self.to_write, [places[at] for at in positions[w]])))
        self.next_turn()
        self.placed[self.to_write] = [first + n - 1, 0]
        self.write([None if p is None else p[0] for p in out], first)

    def next_turn(self):
        """Hand the next worker its offsets once the last has written its pieces: two processes
        writing into one file wait on its lock (the kernel spins for it: 5% of the CPU of
        `records --format csv --jobs 2` on the dense corpus), one after the other they do not."""
        if not self.writing and self.turns:
            self.writing = True
            self.workers.put(*self.turns.popleft())


def _places(keys):
    """Per worker, where its exchanges go among all of a chunk's, each list of `keys` sorted: the
    order of a stable merge (between equal keys, the lower worker's first), by one stable sort
    of all the keys, in which each worker's are a run already (a binary search per exchange
    took twice as long)."""
    flat = list(chain.from_iterable(keys))
    at = [0] * len(flat)
    for i, j in enumerate(sorted(range(len(flat)), key=flat.__getitem__)):
        at[j] = i
    places, lo = [], 0
    for k in keys:
        places.append(at[lo:lo + len(k)])
        lo += len(k)
    return places


CAPS = (MAX_QUIET, MAX_LIVE, MAX_CLOSED)   # in the order of FlowTable.peaks


class Checks:
    """Whether the workers, each with only its connections, can have differed from one process
    (a reason, else None), chunk by chunk:
    - the buffer budget (256 MiB shared by all connections): the workers' peaks in a chunk
      together within it;
    - the flow table's caps: the workers' most quiet, live and closed flows at once in a chunk,
      together, within their caps, so none is hit;
    - topic ids (Fetch v13+ names topics by id, learnt from responses on any connection): no
      id looked up in vain by one worker that another had learnt by then (by the start of the
      chunk it learnt it in), and no id learnt with two names."""

    def __init__(self):
        self.start = 1      # the first packet of the chunk being checked
        self.learnt = {}    # topic id -> {worker: (first packet of the chunk, name)}

    def chunk(self, msgs):
        start, self.start = self.start, msgs[0][3] + 1
        if any(m[12] for m in msgs):
            return "TLS without the cryptography package (noted once for all connections)"
        if sum(m[9] for m in msgs) > BUFFER_BUDGET:
            return "buffered bytes may have passed the shared budget"
        for kind, cap in enumerate(CAPS):
            if sum(m[13][kind] for m in msgs) > cap:
                return "more flows at once than the flow table's cap"
        for w, m in enumerate(msgs):
            for key, name in m[7]:
                by = self.learnt.setdefault(key, {})
                if any(n != name for ww, (_, n) in by.items() if ww != w):
                    return f"topic id {key} learnt with two names"
                by.setdefault(w, (start, name))
                by[w] = (by[w][0], name)
        for w, m in enumerate(msgs):
            for key, at in m[8]:
                by = self.learnt.get(key, {})
                if any(ww != w and first <= (at if at != AT_END else AT_END)
                       for ww, (first, _) in by.items()):
                    return f"topic id {key} learnt on another worker's connection"
        return None
