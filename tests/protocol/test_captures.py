"""Every request and response body in the project's real captures (tansu broker, librdkafka,
kafka-python, aiokafka) decodes without an Issue, except the one malformed response the
captures' README documents (tansu's ListOffsets v0 response)."""
import pytest

from tests.support import CAPTURES, require_path
from dissector.protocol.decode import decode_request, decode_response
from dissector.protocol.jsonify import to_json

KNOWN = {("legacy_messageset", "response", 2, 0): "kafka.truncated"}


def _captures():
    return sorted(p for p in CAPTURES.glob("*.pcap") if "mss" not in p.name) if CAPTURES.is_dir() else []


@pytest.mark.parametrize("path", _captures(), ids=lambda p: p.stem)
def test_real_capture_bodies_decode_cleanly(path):
    require_path(path)
    from dissector.pipeline import dissect
    decoded = 0
    for ex in dissect(path, auto=True, level="bodies"):   # whole messages kept
        if ex.api_key is None:
            continue
        msgs = []
        if ex.request is not None:
            msgs.append(("request", decode_request(bytes(ex.request.data))))
        if ex.response is not None:
            msgs.append(("response", decode_response(bytes(ex.response.data), ex.api_key, ex.api_version)))
        for kind, m in msgs:
            expected = KNOWN.get((path.stem, kind, ex.api_key, ex.api_version))
            assert [i.code for i in m.issues] == ([expected] if expected else []), (kind, ex, m.issues)
            if not expected:
                assert m.body is not None
                to_json(m.body)
            decoded += 1
    assert decoded > 10
