"""Consumer-protocol structures in the real captures (several client libraries, old and new group
protocol versions): every subscription and assignment decodes, and each consumer's assignment
covers every (topic, partition) that consumer says it consumed (its truth file)."""
import json
from collections import defaultdict
from pathlib import Path

import pytest

from dissector.pipeline import dissect
from dissector.protocol.embedded import Embedded

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
NAMES = sorted(p.name[:-len(".truth.json")] for p in CAPTURES.glob("*.truth.json"))


@pytest.mark.parametrize("name", NAMES)
def test_consumer_protocol_in_real_captures(name):
    truth = json.loads((CAPTURES / f"{name}.truth.json").read_text())
    consumed = defaultdict(set)
    for client in truth["clients"]:
        for rec in client.get("consumed") or []:
            consumed[client["client_id"]].add((rec["topic"], rec["partition"]))
    assigned = defaultdict(set)
    seen = 0
    for ex in dissect(CAPTURES / f"{name}.pcap", auto=True, level="bodies"):
        if ex.api_key not in (11, 14) or ex.request_msg is None:
            continue
        req = ex.request_msg.body
        resp = ex.response_msg.body if ex.response_msg is not None else None
        if ex.api_key == 11:
            raw = [p.metadata for p in req.protocols] + (
                [m.metadata for m in (resp.members or [])] if resp else [])
        else:
            raw = [a.assignment for a in req.assignments] + ([resp.assignment] if resp else [])
        for value in raw:
            if value:   # followers send empty assignments; errors carry empty ones
                assert isinstance(value, Embedded) and value.decoded is not None, (ex.index, value)
                seen += 1
        if ex.api_key == 14 and resp is not None and resp.assignment:
            for tp in resp.assignment.decoded.assigned_partitions:
                assigned[ex.client_id].update((tp.topic, p) for p in tp.partitions)
    for client, pairs in consumed.items():
        assert seen and pairs <= assigned[client], client
