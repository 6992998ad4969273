"""Differential test against kio (Aiven's Kafka types generated from the Kafka 4.3 specs, an
implementation nobody here wrote): hypothesis generates kio entities, kio serializes them with
their headers, our decoders must return the same header and body values, for every pair kio has
(302 pairs, requests and responses). And the reverse: kio reads bodies laid out by our schema."""
import pytest

from tests.analysis.build import kio_request, kio_response
from tests.protocol.kio_compare import differences
from tests.support import require_module
from dissector.protocol.decode import decode_request, decode_response, tables
from dissector.protocol.generated.apis import APIS

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings, strategies as st  # noqa: E402

# Fields renamed in the specs after Kafka 4.3 (kio's source): kio name -> ours, per api key.
RENAMED = {28: {"generation_id": "generation_id_or_member_epoch"},
           88: {"acceptable_recovery_lag": "acceptable_recovery_lag_legacy"}}


def _kio_pairs():
    try:
        from kio.index import load_request_schema, load_response_schema
    except ImportError:
        return []
    out = []
    for k, (_, lo, hi, _, _) in sorted(APIS.items()):
        for v in range(lo, hi + 1):
            for d, load in ((0, load_request_schema), (1, load_response_schema)):
                try:
                    load(k, v)
                except Exception:
                    continue
                out.append((k, v, d))
    return out


PAIRS = _kio_pairs()
EXAMPLES = 25   # examples per pair each way: kio-serialized messages, and random bodies kio reads


def test_kio_covers_302_pairs():
    require_module("kio")
    assert len(PAIRS) == 2 * 302


@pytest.mark.parametrize("k,v,d", PAIRS, ids=[f"{k}v{v}{'req' if d == 0 else 'resp'}" for k, v, d in PAIRS])
def test_kio_serialized_messages_decode_identically(k, v, d):
    from kio.index import load_request_schema, load_response_schema
    from kio.static.primitive import Records
    st.register_type_strategy(Records, st.binary(max_size=40).map(Records))
    cls = (load_request_schema, load_response_schema)[d](k, v)
    renamed = RENAMED.get(k, {})

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(st.from_type(cls), st.integers(0, 2**31 - 1))
    def check(entity, corr):
        if d == 0:
            msg = decode_request(kio_request(entity, corr, client_id="kio-client")[4:])
            assert (msg.api_key, msg.api_version, msg.client_id) == (k, v, "kio-client")
        else:
            msg = decode_response(kio_response(entity, corr)[4:], k, v)
        assert msg.correlation_id == corr
        # random bytes in fields that embed a structure (Envelope's principal) are reported
        assert [i for i in msg.issues if i.code != "kafka.bad_embedded"] == []
        assert differences(entity, msg.body, renamed=renamed) == []

    check()


@pytest.mark.parametrize("k,v,d", PAIRS, ids=[f"{k}v{v}{'req' if d == 0 else 'resp'}" for k, v, d in PAIRS])
def test_kio_reads_what_our_schema_describes(k, v, d):
    """The other direction: bodies laid out by our schema tables (the test encoder) are read by
    kio to the same values, so our layouts match kio's independent reading of the specs."""
    import random
    from kio.index import load_request_schema, load_response_schema
    from kio.serial import entity_reader
    from tests.protocol.encoder import encode, random_body
    read = entity_reader((load_request_schema, load_response_schema)[d](k, v))
    _, schema = tables(k)[d][v]
    rnd = random.Random(f"kio/{k}/{v}/{d}")
    for _ in range(EXAMPLES):
        body = random_body(schema, rnd, tame=True)  # kio's typed fields reject odd values
        raw = encode(schema, body)
        entity, size = read(raw, 0)
        assert size == len(raw)
        assert differences(entity, body, renamed=RENAMED.get(k, {})) == []


CAPTURES = sorted((__import__("pathlib").Path(__file__).resolve().parents[2] / "captures")
                  .glob("*.pcap"))


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_kio_reads_every_captured_message_alike(path):
    """Real bytes: every request and response body of every shipped capture (written by real
    clients and a real broker) that kio has a schema for is read by kio from the message's own
    bytes, and compared with our decoding field by field."""
    require_module("kio")
    from kio.index import load_request_schema, load_response_schema
    from kio.serial import entity_reader
    from dissector.pipeline import dissect
    readers = {}
    compared = 0
    for ex in dissect(str(path), auto=True, level="bodies"):
        if ex.raw_sasl or ex.api_key is None:
            continue
        for d, frame in ((0, ex.request), (1, ex.response)):
            if frame is None or len(frame.data) < frame.length - 4:
                continue
            data = bytes(frame.data)   # decoded again: the pipeline's bodies hold record sets
            msg = decode_request(data) if d == 0 else \
                decode_response(data, ex.api_key, ex.api_version)
            if msg.body is None or msg.issues:
                continue
            key = (ex.api_key, ex.api_version, d)
            if key not in readers:
                try:
                    cls = (load_request_schema, load_response_schema)[d](*key[:2])
                    readers[key] = entity_reader(cls)
                except Exception:   # kio has no such version
                    readers[key] = None
            if readers[key] is None:
                continue
            entity, size = readers[key](data, msg.header_size)
            where = f"exchange {ex.index} {'response' if d else 'request'} {key}"
            assert msg.header_size + size == len(data), where
            assert differences(entity, msg.body, renamed=RENAMED.get(ex.api_key, {})) == [], where
            compared += 1
    assert compared >= 20
