"""A worker process: its share of the capture dissected (part.Part), chunk by chunk of the files.

After each STEP_CHUNKS chunks of a file (or the plan's `step`) and at its end (the same chunks
in every worker: each reads the whole capture; "chunk" below means such a step) it
sends the parent what the chunk made, keyed by packet (`keys`), and goes on without waiting;
when the parent has numbered a chunk (global exchange numbers and connection ids: `numbers`),
the worker renders that chunk's exchanges with the command's `render` (numbers in place) and
sends the pieces (it looks for numbers after every file chunk). Exchanges wait in `held` until
then: a step's worth and a little, and never more than MAX_HELD steps (past those the worker
waits for numbers: a parent slower than its workers holds them back).

A render that can (plan.Plan says how) drafts each file chunk's exchanges as they complete, all
of their text but the two numbers, and only the drafts wait: held a step, the exchanges took a
worker a tenth more CPU than rendered at once (dense traffic, bodies level: out of the caches by
the time they were rendered and freed). A render whose pieces need no exchange numbers (the
records table's) renders each file chunk's exchanges whose connections have their global ids
then, the others once numbered.

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
from .placing import write_at

STEP_CHUNKS = 16   # file chunks (capture.chunks.CHUNK) a worker reads between its reports
# Steps a worker holds for their numbers before it waits for them. The parent numbers a step once
# it has read what came before it, the pieces it writes included: without this bound a parent
# slower than its workers (Parquet of bulk traffic, which it encodes alone) let them run ahead
# with every step held, 430 MB each and 400 MB of the parent's shared memory on a 1 GiB capture.
# The same bound holds the steps whose pieces wait for their turn to be written (placing.py):
# the workers write one at a time, so slow writes would otherwise let the others read on.
MAX_HELD = 4
# The cyclic collector's first threshold in a worker. The exchanges held for their numbers are
# young objects one process would have written and freed, and a young collection traverses all
# they hold: at analysis.load's records level (bodies and record sets kept) a step's worth is
# more than 200,000, and at that threshold each worker spent a quarter of its CPU in a dozen
# collections on the dense 400 MB capture, which found no garbage; at 1,000,000 it made none.
# Cyclic garbage stays bounded by it (the workers' peak memory did not move).
GC_THRESHOLD = 1_000_000
KEYS, NUMBERS, PIECES, DONE, FAILED = "keys", "numbers", "pieces", "done", "failed"
OFFSETS, WROTE = "offsets", "wrote"   # with Plan.out (placing.py)


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
                      max_frame=plan.max_frame, keep_bodies=plan.keep_bodies, keylog=plan.keylog,
                      records_only=plan.records_only)
        render = plan.render()
        self.early = getattr(render, "early", False)
        self.draft = self._early if self.early else getattr(render, "draft", None)
        self.render = render.late if self.draft is not None else render
        self.drafts = []    # the step's drafts (early: pieces) so far, or exchanges rendered
                            # once numbered
        self.cids = []      # their connections' (local) ids
        self.late = []      # where the exchanges are in `drafts`
        self.unplaced = {}  # with plan.out: chunk -> its pieces' bytes, until their offsets come
        self.chunk = 0
        self.held = {}      # chunk -> (its exchanges, the connections opened in it)
        self.gid = {}       # local connection id -> global id
        self.reported = {}  # topic id -> name, as last sent
        self.errors = []

    def run(self):
        d = self.d
        step = self.plan.step or STEP_CHUNKS
        for path in self.plan.paths:
            try:
                for i, _ in enumerate(scan(path, d.packets, d._flows, d._packet, d), 1):
                    if self.draft is not None:
                        self.take()
                    if i % step == 0:
                        self.end_chunk(path)
                    elif self.held or self.unplaced:   # numbers in: rendered now, not later
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
        while self.held or self.unplaced:
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

    def take(self):
        """Draft the exchanges completed since the last file chunk (those the render cannot
        draft wait whole)."""
        out = self.d.output
        if not out:
            return
        drafts = self.draft(out)
        if None in drafts:
            at = len(self.drafts)
            late = [k for k, dr in enumerate(drafts) if dr is None]
            for k in late:
                drafts[k] = out[k]
            self.late += [at + k for k in late]
            if not self.plan.keep_bodies:
                _drop_bytes(drafts[k] for k in late)
        self.drafts += drafts
        self.cids += [ex.connection.connection_id for ex in out]
        out.clear()

    def end_chunk(self, path):
        d = self.d
        if self.draft is not None:
            self.take()
            exchanges, cids, late = self.drafts, self.cids, self.late
            self.drafts, self.cids, self.late = [], [], []
        else:
            exchanges, cids, late = list(d.output), None, None
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
        if d.ending:
            ends = cids if cids is not None else [ex.connection.connection_id for ex in exchanges]
        else:
            ends = None
        self.link.put((KEYS, self.me, self.chunk, d.packets, emitted, ends,
                         [(c.connection_id, at) for c, at in opened], learned, misses,
                         d.budget.peak, path, d.bytes, d.tls._crypto_noted, d._flows.peaks))
        d.budget.peak = d.budget.used
        d._flows.peaks = d._flows.held()
        self.held[self.chunk] = (exchanges, cids, late, [c.connection_id for c, _ in opened])
        self.chunk += 1
        self.serve(block=False)
        while len(self.held) > MAX_HELD or len(self.unplaced) > MAX_HELD:
            self.serve(block=True)

    def serve(self, block):
        """Render the chunks the parent has numbered and write those it has placed (block: wait
        for one message)."""
        while True:
            msg = self.link.get(block)
            if msg is None:
                if block:   # the parent stopped
                    raise _Stopped
                return
            if msg[0] == OFFSETS:
                _, chunk, places = msg
                write_at(self.plan.out, self.unplaced.pop(chunk), places)
                self.link.put((WROTE, self.me, chunk))
                if block:
                    return
                continue
            _, chunk, indices, gids = msg
            exchanges, cids, late, opened = self.held.pop(chunk)
            self.gid.update(zip(opened, gids))
            if cids is None:
                pieces = self.numbered(exchanges, indices)
            else:
                pieces = self.filled(exchanges, cids, late, indices)
            if self.plan.out is not None:   # the parent gets the rest and the sizes
                self.unplaced[chunk] = [None if p is None else p[1] for p in pieces]
                pieces = [None if p is None else (p[0], len(p[1])) for p in pieces]
            self.link.put((PIECES, self.me, chunk, pieces))
            if block:
                return

    def _early(self, exchanges):
        """A render whose pieces need no exchange numbers (Plan: `early`), now: the pieces of
        the exchanges whose connections have their global ids, None for the others."""
        gid = self.gid
        known = [k for k, ex in enumerate(exchanges) if ex.connection.connection_id in gid]
        pieces = [None] * len(exchanges)
        if known:
            now = [exchanges[k] for k in known]
            for k, piece in zip(known, self.globally(now)):
                pieces[k] = piece
        return pieces

    def filled(self, drafts, cids, late, indices):
        """The step's drafts with their numbers and global connection ids in (the exchanges
        among them rendered whole)."""
        if self.early:   # rendered already
            pieces = drafts
        else:
            gid = self.gid
            pieces = [f"{dr[0]}{gid[c]}{dr[1]}{i}{dr[2]}" if dr.__class__ is tuple else None
                      for dr, c, i in zip(drafts, cids, indices)]
        if late:
            rendered = self.numbered([drafts[k] for k in late], [indices[k] for k in late])
            for k, piece in zip(late, rendered):
                pieces[k] = piece
        return pieces

    def numbered(self, exchanges, indices):
        """The chunk's exchanges rendered with their global numbers and connection ids."""
        for ex, i in zip(exchanges, indices):
            ex.index = i
        return self.globally(exchanges)

    def globally(self, exchanges):
        """The exchanges rendered with their connections' and issues' global ids in (the
        connections' only while rendering: the flow table keys them by their local ids)."""
        gid = self.gid
        local = {}
        for ex in exchanges:
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
