"""Which worker owns a flow (Plan.owns): asked at every flow's first packet in every worker, the
workers agree on one owner each, a client's flows stay together unless its worker gets too far
ahead (one client host is shared out), and the flows are shared out by how many each worker has,
not by turns."""
from __future__ import annotations

import random

import pytest

from dissector.parallel import Plan
from dissector.parallel.plan import SLACK, SPREAD

BROKER = bytes((10, 0, 0, 1))


def client(i):
    return bytes((10, 1, i >> 8, i & 0xFF))


def owners(flows, jobs, by="client"):
    """Per flow (src, dst, sport, dport), the workers that said it was theirs."""
    plan = Plan([], None, jobs, (9092,), by=by)
    asks = [plan.owns(w) for w in range(jobs)]
    return [[w for w, owns in enumerate(asks) if owns(*flow)] for flow in flows]


@pytest.mark.parametrize("by", ["client", "connection"])
@pytest.mark.parametrize("jobs", [2, 3])
def test_one_owner_each_and_a_clients_flows_together(jobs, by):
    rnd = random.Random(jobs)
    flows = []
    for port in range(40000, 40300):
        c = client(rnd.randrange(20))
        flows.append((c, BROKER, port, 9092) if rnd.random() < 0.8 else (BROKER, c, 9092, port))
    got = owners(flows, jobs, by)
    assert all(len(w) == 1 for w in got)
    counts = [sum(w == [j] for w in got) for j in range(jobs)]
    if by == "client":   # a client leaves its worker only when that is SPREAD flows ahead
        seen, held, spread = {}, [0] * jobs, set()
        for (src, dst, sport, _), (w,) in zip(flows, got):
            c = dst if sport == 9092 else src
            if c not in spread and seen.setdefault(c, w) != w:
                assert held[seen[c]] - min(held) >= SPREAD
                spread.add(c)
            if c in spread:   # then dealt one by one
                assert held[w] - min(held) < SLACK
            held[w] += 1
        assert len(spread) < 10
    else:   # every flow dealt on its own: as even as can be
        assert max(counts) - min(counts) <= 1


@pytest.mark.parametrize("jobs", [2, 3])
def test_one_client_host_is_shared_out(jobs):
    """Every flow from one address (one client host, or loopback): its first SPREAD flows on
    one worker, then each to a worker within SLACK flows of the fewest."""
    flows = [(client(1), BROKER, port, 9092) for port in range(40000, 40500)]
    got = owners(flows, jobs)
    assert all(len(w) == 1 for w in got)
    assert got[:SPREAD] == [[0]] * SPREAD
    held = [SPREAD] + [0] * (jobs - 1)
    for (w,) in got[SPREAD:]:
        assert held[w] - min(held) < SLACK
        held[w] += 1
    assert max(held) - min(held) <= SLACK


def test_one_host_repeating_its_connections_is_not_dealt_in_turns():
    """A client host opening a heavy and a light connection, again and again: dealt in strict
    turns every heavy one would go to one worker; by the hash, about half to each."""
    flows = [(client(1), BROKER, port, 9092) for port in range(40000, 40800)]
    got = owners(flows, 2)[SPREAD:]
    heavy = [w for (w,) in got[::2]]
    assert 0.4 < heavy.count(0) / len(heavy) < 0.6


def test_clients_alternating_many_and_few_connections_are_shared_out():
    """Clients opening 3 connections and 1 in turn: dealt by turns, every busy client would go to
    worker 0 (3 flows to 1 for every two clients); by the fewest flows, as many to each."""
    flows, port = [], 40000
    for i in range(40):
        for _ in range(3 if i % 2 == 0 else 1):
            flows.append((client(i), BROKER, port, 9092))
            port += 1
    got = owners(flows, 2)
    counts = [sum(w == [j] for w in got) for j in range(2)]
    assert max(counts) - min(counts) <= 2, counts
