"""What the byte walk hands over of a Produce or Fetch body analysis.load does not keep
(summary_plan.RowSpec: Summary.groups and Summary.settings) against the decoded body it stands
for: the same partitions-table columns (walked by the compiled walk and by its Python twin, as
groups and as the decoded topic entries), the same request settings (analysis.extras), on random
bodies of every version in both directions, damaged ones among them; and the tables of every
shipped capture the same whether the bodies are kept or walked."""
from __future__ import annotations

import json
import random
import sys
from types import SimpleNamespace as NS

import pytest

from analysis import extras as E
from analysis import partition_columns as PC
from analysis.load import kept_bodies, load
from analysis.partitions import row_by_row_table
from analysis.schema import PARTITION_COLUMNS
from dissector.decoding import AllBut, BodyDecoder
from dissector.partition_walk import Irregular, py_walk_side, walk_side
from dissector.pipeline import dissect
from dissector.protocol.decode import decode_struct, tables
from dissector.summary_plan import plan
from tests.protocol.encoder import encode, random_body
from tests.session.test_summary_bytes import _damaged, _random_bodies
from tests.support import CAPTURES

SPECS = kept_bodies().rows
PAIRS = [(k, v, d) for k in sorted(SPECS) for d in (0, 1) for v in sorted(tables(k)[d])]


def _outcome(walk, topics, side, tupled):
    cols = [[] for _ in PARTITION_COLUMNS]
    try:
        shape = walk(cols, 2, topics, side, PC.LAYOUT, None, tupled)
    except (Irregular, AttributeError, TypeError) as exc:
        shape = type(exc)
    return shape, cols


def _summary(s, names):
    return (s.error_codes, s.topics, s.partitions, s.records, s.records_bytes,
            s.uncompressed_bytes, s.error_code, s.throttle_time_ms, names)


def _walked(data, entry, key, version, direction, known, full):
    """(the body decoded and walked, the Summary of the walk on its bytes or None); the two
    summaries (and the topic ids they learned) must be alike."""
    issues = []
    kept = BodyDecoder(records=full)
    kept.topic_names = dict(known)
    body = decode_struct(data, 0, entry, issues)
    summary = (kept._summary(data, body, issues, bool(direction), key, version)
               if body is not None else None)
    walker = BodyDecoder(records=full, keep_bodies=AllBut(rows=SPECS))
    walker.topic_names = dict(known)
    walked = walker._walk_bytes(data, 0, entry, [], bool(direction), key)
    if walked is not None:
        assert _summary(walked, walker.topic_names) == _summary(summary, kept.topic_names)
    return body, walked


def _compare(data, key, version, direction, known, full=False):
    entry = tables(key)[direction][version]
    body, walked = _walked(data, entry, key, version, direction, known, full)
    if walked is None:   # the walk fails where decoding fails (test_summary_bytes)
        return False
    assert body is not None
    topics, side = PC.SIDES[key][direction]
    expected = _outcome(py_walk_side, topics(body), side, False)
    for walk in (walk_side, py_walk_side):
        assert _outcome(walk, walked.groups, side, True) == expected, (key, direction)
        assert _outcome(walk, topics(body), side, False) == expected, (key, direction)
    if direction == 0:
        ex = NS(api_key=key, response_msg=None,
                request_msg=NS(body=None, summary=walked))
        assert E._settings(ex, None, None) == E._settings(ex, body, None)
    return True


@pytest.mark.parametrize("key,version,direction", PAIRS,
                         ids=[f"{k}-v{v}-{'resp' if d else 'req'}" for k, v, d in PAIRS])
def test_random_bodies(key, version, direction):
    entry = tables(key)[direction][version]
    assert plan(entry[1], SPECS[key][direction]) is not None   # every layout is walked
    rnd = random.Random(f"walked/{key}/{version}/{direction}")
    walked = 0
    for data, known in _random_bodies(entry, rnd, 6):
        assert _compare(data, key, version, direction, known, full=rnd.random() < 0.5)
        walked += 1
        for bad in _damaged(data, rnd):
            _compare(bad, key, version, direction, known)
    assert walked == 6


def test_walked_groups_stand_for_the_entries():
    """A group whose rows do not fit the side, or a side whose entries are not numbered rows,
    is refused by both walks alike; no groups make no rows."""
    _, side = PC.SIDES[1][1]
    for groups in ([("t", None, [(0, 1)])], [("t", None, [()])], [("t", None)]):
        assert _outcome(walk_side, groups, side, True) == _outcome(py_walk_side, groups, side,
                                                                   True)
        assert _outcome(walk_side, groups, side, True)[0] is TypeError
    for key, direction in ((9, 0), (2, 1)):   # entries that are numbers; a listed offset
        other = PC.SIDES[key][direction][1]
        groups = [("t", None, [(0, None)])]
        assert _outcome(walk_side, groups, other, True)[0] is TypeError
        assert _outcome(py_walk_side, groups, other, True)[0] is TypeError
    for groups in (None, []):
        compiled = _outcome(walk_side, groups, side, True)
        assert compiled == _outcome(py_walk_side, groups, side, True)
        assert compiled[0] == []


@pytest.mark.parametrize("capture", sorted(CAPTURES.glob("*.pcap"))[::2],
                         ids=lambda p: p.name)
def test_tables_alike_kept_or_walked(capture, monkeypatch):
    """load()'s tables with Produce's and Fetch's bodies kept, and walked (the default)."""
    walked = load(capture, "auto", records=True, jobs=1).arrow
    monkeypatch.setattr(sys.modules["analysis.load"], "kept_bodies", lambda: AllBut({18}))
    kept = load(capture, "auto", records=True, jobs=1).arrow
    assert walked.keys() == kept.keys()
    for name in kept:
        assert walked[name].equals(kept[name]), name


def test_a_message_walked_without_rows_has_no_groups():
    entry = tables(1)[1][11]
    data = encode(entry[1], random_body(entry[1], random.Random(3)))
    walked = BodyDecoder(keep_bodies=False)._walk_bytes(data, 0, entry, [], True, 1)
    assert walked is not None   # walked on its bytes, handing over no rows
    assert walked.groups is None and walked.settings is None


def _exchanges(capture, **kwargs):
    port = json.loads((CAPTURES / f"{capture.name.split('.')[0]}.truth.json").read_text())
    return [ex for ex in dissect(capture, (port["broker_port"],), level="records", **kwargs)
            if ex.api_key in SPECS]


@pytest.mark.parametrize("capture", [p for p in sorted(CAPTURES.glob("*.pcap"))
                                     if "mss" not in p.name], ids=lambda p: p.name)
def test_one_side_kept_the_other_walked(capture):
    """An exchange whose request kept its body while its response was walked (a damaged
    message is decoded, the other side not), and the other way round: the partitions table as
    with both bodies kept; and WALKED names the lists SIDES reads."""
    kept = _exchanges(capture)
    assert len(kept) == len(_exchanges(capture, keep_bodies=kept_bodies())) > 0
    for ex in kept:
        for d, msg in enumerate((ex.request_msg, ex.response_msg)):
            if msg is not None and msg.body is not None:
                attr = PC.WALKED[ex.api_key][d]
                assert PC.SIDES[ex.api_key][d][0](msg.body) is getattr(msg.body, attr)
    expected = row_by_row_table(kept)
    for side in ("request_msg", "response_msg"):
        mixed = _exchanges(capture, keep_bodies=kept_bodies())
        for k, w in zip(kept, mixed):
            setattr(w, side, getattr(k, side))
        table = PC.PartitionTable()
        for ex in mixed:
            table.add_exchange(ex)
        assert table.table().equals(expected), side
