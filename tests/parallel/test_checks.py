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
from dissector.parallel.part import MAX_FLOWS
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


def _msg(mark, learnt=(), misses=(), peak=0, flows=1, held=(1, 1, 1), done=0):
    return ("keys", 0, 0, mark, [], None, [], list(learnt), list(misses), peak, flows, None,
            done, False, list(held))


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
    # flows at once: the caps one process has; flows in all: what the workers remember
    many = [_msg(5, flows=3000, held=(2000, 2000, 2000))] * 2
    assert Checks().chunk(many) is None
    for kind, cap in enumerate(CAPS):
        held = [[1, 1, 1], [1, 1, 1]]
        held[0][kind], held[1][kind] = cap // 2 + 1, cap // 2
        assert "at once" in Checks().chunk([_msg(5, held=h) for h in held])
    # flows decided (every worker the same): past MAX_FLOWS, what they remember stopped growing
    assert Checks().chunk([_msg(5, flows=MAX_FLOWS)] * 2) is None
    assert "flows" in Checks().chunk([_msg(5, flows=MAX_FLOWS + 1)] * 2)


def test_more_flows_than_the_workers_remember_seen_coming():
    total = 16_000_000   # the capture's bytes; every worker has read `done` of them
    rate = MAX_FLOWS / total   # flows a byte that come to MAX_FLOWS at the end

    def check(done, flows, total=total):
        return Checks(total).chunk([_msg(5, flows=int(flows), done=done)] * 2)
    assert check(2_000_000, 1.2 * rate * 2_000_000) is None   # on the way to 1.2 x MAX_FLOWS
    said = check(2_000_000, 1.3 * rate * 2_000_000)
    assert said.startswith(f"more than {MAX_FLOWS} flows ahead") and "first 12%" in said
    assert check(999_999, 10 * rate * 999_999) is None   # too soon to tell: < 1/16 read
    assert check(1_000_000, 10 * rate * 1_000_000) is not None
    assert check(1_000_000, MAX_FLOWS, total=0) is None   # the capture's size unknown


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


def test_a_worker_remembers_at_most_max_flows(monkeypatch):
    """Flows past MAX_FLOWS are neither decided nor remembered: what a worker keeps of a flood
    of new flows stays bounded, and it says so."""
    from dissector.parallel import part
    monkeypatch.setattr(part, "MAX_FLOWS", 50)
    asked = []
    p = part.Part(lambda *flow: asked.append(flow) or False, 1, (9092,))
    client = bytes((10, 0, 0, 2))
    for port in range(1000, 1200):
        p._add(port, port, client, bytes((10, 0, 0, 1)), port, 9092, 1, 0, 2, b"")
    assert len(asked) == 50 and len(p._mine) == 100
    assert p.overflowed and p.flows_seen() == 51
