"""A worker process: its share of the capture dissected (part.Part), chunk by chunk of the files.

After each STEP_CHUNKS chunks of a file and at its end (the same chunks in every worker: each
reads the whole capture; "chunk" below means such a step) it
sends the parent what the chunk made, keyed by packet (`keys`), and goes on without waiting;
when the parent has numbered a chunk (global exchange numbers and connection ids: `numbers`),
the worker renders that chunk's exchanges with the command's `render` (numbers in place) and
sends the pieces (it looks for numbers after every file chunk). Exchanges wait in `held` until
then: a step's worth and a little.

Connection ids are swapped in for the rendering only: the flow table keys its live
connections by their local ids.
"""
from __future__ import annotations

import gc
import time

from ..capture.errors import CaptureError
from ..capture.fast import scan
from ..model import ERROR, Issue
from .part import AT_END, Part

STEP_CHUNKS = 16   # file chunks (capture.chunks.CHUNK) a worker reads between its reports
# The cyclic collector's first threshold in a worker. The exchanges held for their numbers (up
# to two steps' worth, ~90,000 objects on the dense mix at the bodies level) are young objects
# one process would have written and freed: at its threshold (the CLI's 50,000) a collection
# every step scanned them, a tenth of a worker's CPU. Cyclic garbage stays bounded by it.
GC_THRESHOLD = 200_000
KEYS, NUMBERS, PIECES, DONE, FAILED = "keys", "numbers", "pieces", "done", "failed"


def work(me, plan, link):
    """The process body (forked: plan and its render function are inherited, not pickled);
    `link` is its pipes.Link to the parent."""
    try:
        gc.set_threshold(max(GC_THRESHOLD, gc.get_threshold()[0]), *gc.get_threshold()[1:])
        _Worker(me, plan, link).run()
    except _Stopped:
        pass
    except BaseException as exc:   # the parent reports it and stops the others
        import traceback
        link.put((FAILED, me, f"{type(exc).__name__}: {exc}", traceback.format_exc()))


class _Stopped(Exception):
    pass


def _drop_bytes(exchanges):
    """Where no one sees the bodies, no one sees the messages' bytes: let them go while the
    exchanges wait for their numbers (a step's worth of message buffers held took each worker
    twice the page faults of one process and a fifth more memory)."""
    for ex in exchanges:
        if ex.request is not None:
            ex.request.data = None
        if ex.response is not None:
            ex.response.data = None


class _Worker:
    def __init__(self, me, plan, link):
        self.me = me
        self.plan = plan
        self.link = link
        self.d = Part(plan.owns(me), me, plan.ports, auto=plan.auto, level=plan.level,
                      max_frame=plan.max_frame, keep_bodies=plan.keep_bodies, keylog=plan.keylog)
        self.render = plan.render()
        self.chunk = 0
        self.held = {}      # chunk -> (its exchanges, the connections opened in it)
        self.gid = {}       # local connection id -> global id
        self.reported = {}  # topic id -> name, as last sent
        self.errors = []

    def run(self):
        d = self.d
        for path in self.plan.paths:
            try:
                for i, _ in enumerate(scan(path, d.packets, d._flows, d._packet, d), 1):
                    if i % STEP_CHUNKS == 0:
                        self.end_chunk(path)
                    elif self.held:   # numbers in: rendered now, not a step later
                        self.serve(block=False)
                self.end_chunk(path)
            except CaptureError as exc:   # what Dissection does: the next file goes on
                self.errors.append(str(exc))
                if self.me == 0:
                    d.add_issue(Issue("capture.error", ERROR, str(exc), frame=d.packets))
                    d.issued[-1] = d.packets + 0.5   # after the issues of its last packet
                self.end_chunk(path)
        d.finish()
        self.end_chunk(None)
        while self.held:
            self.serve(block=True)
        issues = connections = None
        if self.plan.tables:
            issues, connections = self.capture_level()
        self.link.put((DONE, self.me, self.errors, d.packets, d.bytes, time.process_time(),
                         d.tls.undecrypted, issues, connections))

    def capture_level(self):
        """The issues not tied to an exchange, each with its place in one process's order
        ((packet, 0, 0); in the final flush (AT_END, its connection, 0) or, not tied to one,
        (AT_END, AT_END, 0)), and the connections, with their global ids."""
        d, gid = self.d, self.gid
        issues = []
        for issue, at in zip(d.issues, d.issued):
            if issue.connection_id is not None:
                issue.connection_id = gid.get(issue.connection_id, issue.connection_id)
            whose = 0 if at != AT_END else (AT_END if issue.connection_id is None
                                            else issue.connection_id)
            issues.append(((at, whose), issue))
        for c in d.connections:
            c.connection_id = gid[c.connection_id]
        return issues, d.connections

    def end_chunk(self, path):
        d = self.d
        exchanges = list(d.output)
        d.output.clear()
        if not self.plan.keep_bodies:
            _drop_bytes(exchanges)
        emitted, d.emitted = d.emitted, []
        opened, d.opened = d.opened, []
        names = d.names
        learned = [(k, v) for k, v in names.items() if self.reported.get(k) != v]
        self.reported.update(learned)
        misses = names.misses if isinstance(names, dict) and hasattr(names, "misses") else []
        if misses:
            names.misses = []
        ends = [ex.connection.connection_id for ex in exchanges] if d.ending else None
        self.link.put((KEYS, self.me, self.chunk, d.packets, emitted, ends,
                         [(c.connection_id, at) for c, at in opened], learned, misses,
                         d.budget.peak, d.flows_made, path, d.bytes, d.tls._crypto_noted))
        d.budget.peak = d.budget.used
        self.held[self.chunk] = (exchanges, [c.connection_id for c, _ in opened])
        self.chunk += 1
        self.serve(block=False)

    def serve(self, block):
        """Render the chunks the parent has numbered (block: wait for one)."""
        while True:
            msg = self.link.get(block)
            if msg is None:
                if block:   # the parent stopped
                    raise _Stopped
                return
            _, chunk, indices, gids = msg
            exchanges, opened = self.held.pop(chunk)
            self.gid.update(zip(opened, gids))
            self.link.put((PIECES, self.me, chunk, self.numbered(exchanges, indices)))
            if block:
                return

    def numbered(self, exchanges, indices):
        """The chunk's exchanges rendered with their global numbers and connection ids."""
        gid = self.gid
        local = {}
        for ex, i in zip(exchanges, indices):
            ex.index = i
            c = ex.connection
            if c not in local:
                local[c] = c.connection_id
            for issue in ex.issues:
                if issue.connection_id is not None:
                    issue.connection_id = gid.get(issue.connection_id, issue.connection_id)
        for c, lid in local.items():
            c.connection_id = gid[lid]
        try:
            return self.render(exchanges)
        finally:
            for c, lid in local.items():
                c.connection_id = lid
