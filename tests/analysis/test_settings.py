"""The request settings of the exchanges table (acks, transactional id, max wait, min bytes,
isolation level, replica id): each request class's reader (analysis.extras._reader, fields read
without getattr's defaults) against the general lookup it replaces (_looked_up), on random
bodies of every version of every api key and on partial ones (a field not set), and on every
request of the shipped captures."""
import json
import random
from types import SimpleNamespace as NS

import pytest

from analysis import extras as E
from dissector.pipeline import dissect
from dissector.protocol.decode import tables
from dissector.protocol.decode import MODULES
from tests.protocol.encoder import random_body
from tests.support import CAPTURES


def _both(api_key, req, top_error=7):
    ex = NS(api_key=api_key, request_msg=None, response_msg=None)
    return E._settings(ex, req, None if top_error is None else NS(error_code=top_error)), \
        E._looked_up(ex, req, None, top_error)


@pytest.mark.parametrize("api_key", sorted(MODULES))
def test_readers_are_the_lookup_on_random_bodies(api_key):
    rnd = random.Random(f"settings {api_key}")
    for version, (_, schema) in sorted(tables(api_key)[0].items()):
        for _ in range(6):
            body = random_body(schema, rnd)
            read, looked_up = _both(api_key, body)
            assert read == looked_up, (api_key, version)
            fields = [f[0] for f in schema[2]]
            if fields:   # a partially decoded body: the general way
                partial = random_body(schema, rnd)
                delattr(partial, rnd.choice(fields))
                read, looked_up = _both(api_key, partial)
                assert read == looked_up, (api_key, version)


def test_readers_are_the_lookup_on_every_capture():
    seen = set()
    for pcap in sorted(CAPTURES.glob("*.pcap")):
        truth = CAPTURES / f"{pcap.name.split('.')[0]}.truth.json"
        for ex in dissect(pcap, (json.loads(truth.read_text())["broker_port"],),
                          level="bodies"):
            req = ex.request_msg.body if ex.request_msg is not None else None
            if req is not None:
                read, looked_up = _both(ex.api_key, req)
                assert read == looked_up
                seen.add(type(req))
    assert any(E._READERS.get(cls) is not None for cls in seen)


@pytest.mark.parametrize("version", [15, 16, 17])
def test_a_follower_fetch_v15_up_names_its_broker(version):
    """Fetch v15+ carries the follower's id in the tagged replica_state (KIP-903); replica_id is
    then the absent field's default, -1, which is a consumer's."""
    from dissector.protocol.tree import new_body
    schema = tables(1)[0][version][1]
    req = random_body(schema, random.Random(version))
    state_schema = next(f[7] for f in schema[3] if f[0] == "replica_state")
    req.replica_state = new_body(state_schema)
    req.replica_state.replica_id = 3
    for got in _both(1, req):
        assert got[-1] == 3
    req.replica_state = None   # a consumer's: no state sent
    for got in _both(1, req):
        assert got[-1] == req.replica_id == -1
