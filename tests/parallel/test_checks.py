"""What the parallel run checks to be sure it makes what one process makes: topic ids looked up
in vain are noted by both body walkers (the compiled reader's and the Python one), a foreign
flow's packets are skipped by both packet walkers, the parent's checks (driver.Checks). The
budget's peak they check: tests/fuzz/test_buffer_budget.py."""
from __future__ import annotations

import random
from heapq import merge
from itertools import repeat
from operator import itemgetter

import pytest

from dissector.budget import BUFFER_BUDGET
from dissector.decoding import BodyDecoder
from dissector.parallel.driver import CAPS, Checks, _places
from dissector.parallel.part import Names
from dissector.protocol import readers
from dissector.protocol.decode import tables
from tests.protocol.encoder import body_uuids, encode, random_body

FETCH = 1


class _Clock:
    def now(self):
        return 7


@pytest.mark.parametrize("keep_bodies", [False, True], ids=["on the bytes", "on the body"])
def test_topic_ids_looked_up_in_vain(keep_bodies):
    if not keep_bodies and not readers.COMPILED:
        pytest.skip("the compiled reader is not built")
    schema = tables(FETCH)[0][13][1]
    body = random_body(schema, random.Random(3), tame=True)
    ids = [u for u in body_uuids(body) if u.int]
    assert len(ids) >= 2
    data = encode(schema, body)
    for known in ({}, {ids[0]: "orders"}):
        d = BodyDecoder(keep_bodies=keep_bodies)
        d.topic_names = names = Names(_Clock())
        names.update(known)
        msg = d.request(data, FETCH, 13, 1, "c", [], 0)
        assert (msg.body is None) is not keep_bodies   # the path meant
        assert [k for k, _ in names.misses] == [u for u in ids if u not in known]
        assert all(at == 7 for _, at in names.misses)
        assert ("orders" in msg.summary.topics) is bool(known)


def _msg(mark, learnt=(), misses=(), peak=0, held=(1, 1, 1)):
    return ("keys", 0, 0, mark, [], None, [], list(learnt), list(misses), peak, None, 0, False,
            list(held))


def test_checks():
    c = Checks()
    assert c.chunk([_msg(100, learnt=[("id", "t")]), _msg(100)]) is None
    # worker 1 looks up what worker 0 learnt in an earlier step: one process would have known
    c2 = Checks()
    c2.chunk([_msg(100, learnt=[("id", "t")]), _msg(100)])
    assert "another worker" in c2.chunk([_msg(200), _msg(200, misses=[("id", 150)])])
    # looked up in vain where it learnt it itself later: as one process
    assert c.chunk([_msg(200, misses=[("x", 120)]), _msg(200, learnt=[("y", "u")])]) is None
    assert "two names" in Checks().chunk([_msg(5, learnt=[("id", "a")]),
                                           _msg(5, learnt=[("id", "b")])])
    assert "budget" in Checks().chunk([_msg(5, peak=BUFFER_BUDGET // 2 + 1),
                                        _msg(5, peak=BUFFER_BUDGET // 2)])
    # flows at once: the caps one process has
    many = [_msg(5, held=(2000, 2000, 2000))] * 2
    assert Checks().chunk(many) is None
    for kind, cap in enumerate(CAPS):
        held = [[1, 1, 1], [1, 1, 1]]
        held[0][kind], held[1][kind] = cap // 2 + 1, cap // 2
        assert "at once" in Checks().chunk([_msg(5, held=h) for h in held])


def test_how_many_jobs(tmp_path, monkeypatch):
    from dissector.parallel import plan
    small, big, packed = tmp_path / "small.pcap", tmp_path / "big.pcap", tmp_path / "c.pcap.gz"
    small.write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(100))
    with open(big, "wb") as f:
        f.truncate(plan.PARALLEL_FROM + 1)
    packed.write_bytes(b"\x1f\x8b" + bytes(100))
    monkeypatch.setattr(plan, "cores", lambda: 4)
    assert plan.jobs_for(None, [small]) == 1
    assert plan.jobs_for(None, [big]) == 4
    assert plan.jobs_for(None, [big, packed]) == 1   # every worker would decompress it all
    assert plan.jobs_for(None, [big], auto=True) == 1
    assert plan.jobs_for(3, [small]) == 3 and plan.jobs_for(0, [big]) == 1
    with monkeypatch.context() as m:   # no fork (Windows): one process, asked for or not
        m.delattr(plan.os, "fork")
        assert plan.jobs_for(None, [big]) == 1 and plan.jobs_for(3, [big]) == 1
    # the tables at every level, records included
    from types import SimpleNamespace

    from analysis.commands.options import jobs_of
    for level, default in (("bodies", 4), ("records", 4)):
        assert jobs_of(SimpleNamespace(jobs=None, captures=[big], level=level), False) == default
        assert jobs_of(SimpleNamespace(jobs=2, captures=[big], level=level), False) == 2


def test_places_are_a_stable_merge():
    """Each worker's exchanges go where a stable merge of the workers' sorted keys puts them
    (heapq.merge: between equal keys, the lower worker's first), any number of workers."""
    rnd = random.Random(20)
    for _ in range(300):
        jobs = rnd.randint(1, 4)
        keys = [sorted(rnd.randrange(12) for _ in range(rnd.randrange(8))) for _ in range(jobs)]
        expected = [[] for _ in range(jobs)]
        merged = merge(*(zip(k, repeat(w)) for w, k in enumerate(keys)), key=itemgetter(0))
        for at, (_, w) in enumerate(merged):
            expected[w].append(at)
        assert _places(keys) == expected, keys


@pytest.mark.parametrize("by", ["client", "connection"])
def test_a_worker_remembers_at_most_max_flows(monkeypatch, by):
    """Past MAX_FLOWS a worker remembers no more flows, and marks at most MAX_SKIPPED of the
    others' at a time; each flow is still one worker's, in both directions, every time its
    worker is asked, and from what was dealt before (a client's worker kept)."""
    from dissector.parallel import part
    from dissector.parallel.plan import Plan
    monkeypatch.setattr(part, "MAX_FLOWS", 50)
    monkeypatch.setattr(part, "MAX_SKIPPED", 20)
    plan = Plan([], None, 2, (9092,), by=by)
    parts = []
    for me in (0, 1):
        owns = plan.owns(me)
        asked = []

        def noted(*flow, owns=owns, asked=asked):
            asked.append(flow[4] if len(flow) > 4 else False)
            return owns(*flow)
        p = part.Part(noted, me, (9092,))
        p.asked = asked
        p._table_add = lambda *segment: None   # only who owns what is looked at here
        parts.append(p)
    broker = bytes((10, 0, 0, 1))
    flows = [(bytes((10, 0, 1, n % 7)), 1000 + n) for n in range(300)]
    for p in parts:
        for client, port in flows:
            p._add(port, port, client, broker, port, 9092, 1, 0, 2, b"")
        assert len(p._mine) == 100 and p.asked.count(True) == 250
        assert sum(v is False for v in p._flows.direct.values()) <= 2 * (50 + 20)
    whose = {}
    for client, port in flows:
        for src, dst, sport, dport in ((client, broker, port, 9092), (broker, client, 9092, port)):
            said = [p._mine.get((src, dst, sport, dport)) for p in parts]
            if said[0] is None:
                said = [p._owns(src, dst, sport, dport, True) for p in parts]
            assert sorted(said) == [False, True]
            assert whose.setdefault((client, port), said) == said
    past = {(c, port): said.index(True) for (c, port), said in list(whose.items())[50:]}
    if by == "client":   # a client's flows past the limit stay on its worker
        for client in {c for c, _ in flows}:
            assert len({w for (c, _), w in past.items() if c == client}) == 1
    assert 0.3 < sum(past.values()) / len(past) < 0.7 or by == "client"
