"""The record sets the byte walk hands over at the records level (Summary.record_sets: the records
commands build no Produce or Fetch body) are those records.columns.partitions finds in the
decoded bodies, with the same topics (named, or by the topic id's text) and partitions, on every
exchange of every shipped capture; and a walk that could not name a set's topic says None."""
import json

import pytest

from dissector.pipeline import dissect
from dissector.records.columns import partitions
from tests.records.test_headers_walk import _records_view
from tests.support import CAPTURES


def _port(pcap):
    return json.loads((CAPTURES / f"{pcap.name.split('.')[0]}.truth.json").read_text())[
        "broker_port"]


def _sets(ex):
    d, sets = partitions(ex) or (None, ())
    return [(d, t, p, _records_view(rs)) for t, p, rs in sets]


@pytest.mark.parametrize("pcap", sorted(CAPTURES.glob("*.pcap")), ids=lambda p: p.stem)
def test_walked_sets_are_the_decoded_bodies_sets(pcap):
    walked = list(dissect(pcap, (_port(pcap),), level="records", keep_bodies=False))
    decoded = list(dissect(pcap, (_port(pcap),), level="records", keep_bodies=True))
    assert len(walked) == len(decoded)
    for w, d in zip(walked, decoded):
        assert _sets(w) == _sets(d)


def test_the_walk_hands_sets_over_where_it_built_no_body():
    """The shipped captures' Produce requests and Fetch responses are walked on their bytes (no
    body built) and their sets come from the walk, topics named."""
    seen = 0
    for pcap in sorted(CAPTURES.glob("*.pcap")):
        for ex in dissect(pcap, (_port(pcap),), level="records", keep_bodies=False):
            msg = ex.request_msg if ex.api_key == 0 else ex.response_msg
            if ex.api_key in (0, 1) and msg is not None and msg.body is None:
                sets = msg.summary.record_sets
                assert sets is not None
                seen += len(sets)
                assert all(type(t) is str and t and type(p) is int for t, p, _ in sets)
    assert seen > 100


def test_bodies_level_walks_keep_no_sets():
    pcap = sorted(CAPTURES.glob("*.pcap"))[0]
    for ex in dissect(pcap, (_port(pcap),), level="bodies", keep_bodies=False):
        for msg in (ex.request_msg, ex.response_msg):
            if msg is not None and msg.summary is not None:
                assert msg.summary.record_sets is None


@pytest.mark.parametrize("pcap", sorted(CAPTURES.glob("*.pcap")), ids=lambda p: p.stem)
def test_records_only_gives_the_same_records(pcap):
    """records_only (the records commands: Produce's response, the fetch requests and the group
    joins and syncs not read) leaves every exchange's record sets and the records table as they
    are with every side read (the topic names a Metadata response teaches included)."""
    from analysis.records_table import record_batch
    from dissector.decoding import RECORDS_UNREAD
    from dissector.records.columns import record_chunks
    port = (_port(pcap),)
    both = [list(dissect(pcap, port, level="records", keep_bodies=False, records_only=only))
            for only in (False, True)]
    assert len(both[0]) == len(both[1])
    for every, only in zip(*both):
        assert _sets(every) == _sets(only)
        for msg, response in ((only.request_msg, False), (only.response_msg, True)):
            if msg is not None and (response, only.api_key) in RECORDS_UNREAD:
                assert msg.body is None and msg.summary is None
    tables = [[record_batch(cols) for cols in record_chunks(exs)] for exs in both]
    assert len(tables[0]) == len(tables[1])
    assert all(a.equals(b) for a, b in zip(*tables))


@pytest.mark.parametrize("pcap", sorted(CAPTURES.glob("*.pcap")), ids=lambda p: p.stem)
def test_kept_bodies_walk_hands_over_their_bodies_sets(pcap):
    """At the records level the summary walk of a kept (decoded) body hands over the sets
    records.columns.partitions finds in that body itself (the records table then reads no
    body); topic_names, where given, still name the body's unnamed topics."""
    seen = 0
    for ex in dissect(pcap, (_port(pcap),), level="records", keep_bodies=True):
        msg = ex.request_msg if ex.api_key == 0 else ex.response_msg
        if ex.api_key not in (0, 1) or msg is None or msg.body is None:
            continue
        walked = msg.summary.record_sets
        assert type(walked) is list
        msg.summary.record_sets = None   # what partitions() finds in the body
        in_body = _sets(ex)
        msg.summary.record_sets = walked
        assert _sets(ex) == in_body
        if walked:
            assert partitions(ex)[1] is walked
            assert type(partitions(ex, {"unused": "names"})[1]) is not list   # the body's
        seen += len(walked)
    assert seen > 0
