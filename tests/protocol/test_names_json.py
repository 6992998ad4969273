"""Names (api keys, error codes) against kafka-python's tables, and lossless JSON."""
import base64
import json
import random
import uuid

from tests.support import require_module
from dissector.protocol.decode import tables
from dissector.protocol.generated.errors import ERRORS
from dissector.protocol.jsonify import to_json
from dissector.protocol.names import api_name, error_name, is_retriable
from dissector.protocol.primitives import Body

from .encoder import random_body

# Where kafka-python's `retriable` flag disagrees with Kafka's own exception hierarchy: Kafka's
# CorruptRecordException is a RetriableException (protocol guide: CORRUPT_MESSAGE retriable).
KAFKA_PYTHON_DIFFERS = {2}


def test_names_and_fallbacks():
    assert api_name(0) == "Produce" and api_name(1) == "Fetch" and api_name(74) == "ListConfigResources"
    assert api_name(999) == "Unknown(999)"
    assert error_name(0) == "NONE" and error_name(-1) == "UNKNOWN_SERVER_ERROR"
    assert error_name(35) == "UNSUPPORTED_VERSION" and error_name(4242) == "Unknown(4242)"
    assert is_retriable(6) and not is_retriable(0) and not is_retriable(4242)
    assert min(ERRORS) == -1 and len(ERRORS) >= 137


def test_errors_agree_with_kafka_python():
    errors = require_module("kafka.errors")
    import inspect
    seen = 0
    for cls in vars(errors).values():
        if not (inspect.isclass(cls) and issubclass(cls, errors.BrokerResponseError)) or cls.errno is None:
            continue
        if cls.errno not in ERRORS:
            continue
        seen += 1
        if cls.errno not in KAFKA_PYTHON_DIFFERS:
            assert is_retriable(cls.errno) == bool(cls.retriable), (cls.errno, cls.__name__)
        # kafka-python's messages are its own, but the names match Kafka's for most codes
    assert seen >= 100



def test_json_is_lossless():
    rnd = random.Random(3)
    for k in (0, 1, 3, 18, 68):
        for d in (0, 1):
            for v, (_, schema) in sorted(tables(k)[d].items())[-2:]:
                body = random_body(schema, rnd)
                data = json.loads(json.dumps(to_json(body)))
                _check(body, data)


def _check(obj, data):
    if isinstance(obj, Body):
        for name in type(obj).__slots__:
            value = getattr(obj, name)
            if name == "unknown_tags":
                assert (value or None) == ({int(t): base64.b64decode(b) for t, b in data[name].items()}
                                           if name in data else None)
            else:
                _check(value, data[name])
    elif isinstance(obj, list):
        assert len(obj) == len(data)
        for a, b in zip(obj, data):
            _check(a, b)
    elif isinstance(obj, (bytes, memoryview)):
        assert base64.b64decode(data) == bytes(obj)
    elif isinstance(obj, uuid.UUID):
        assert uuid.UUID(data) == obj
    else:
        assert obj == data and type(obj) is type(data) or (isinstance(obj, float) and obj == data)
