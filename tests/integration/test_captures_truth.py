"""Golden: the committed real captures against the clients' own record of what they did.

captures/*.truth.json come from the clients (their debug logs, delivery reports and consumed
messages; see captures/README.md), not from this project's decoders. For each capture, and for its
copy re-segmented to a 1448-byte MSS, the dissector must report exactly the requests the clients
logged, pair them, and carry exactly the records they produced and consumed.
"""
import pytest

from tests.integration import truth_checks as C
from tests.support import CAPTURES

NAMES = sorted(p.name[:-len(".truth.json")] for p in CAPTURES.glob("*.truth.json"))


def test_captures_are_there_and_small():
    assert len(NAMES) >= 6
    total = 0
    for name in NAMES:
        for suffix in (".pcap", ".mss1448.pcap"):
            size = (CAPTURES / f"{name}{suffix}").stat().st_size
            assert size <= 1 << 20, f"{name}{suffix} is over 1 MiB"
            total += size
    assert total <= 10 << 20


@pytest.mark.parametrize("suffix", [".pcap", ".mss1448.pcap"])
@pytest.mark.parametrize("name", NAMES)
def test_requests_match_the_clients(name, suffix):
    C.check_requests(CAPTURES, name, suffix)


@pytest.mark.parametrize("name", NAMES)
def test_mss_copy_gives_the_same_exchanges(name):
    C.check_mss_copy(CAPTURES, name)


@pytest.mark.parametrize("name", NAMES)
def test_bodies_decode_cleanly(name):
    C.check_bodies(CAPTURES, name)


@pytest.mark.parametrize("name", NAMES)
def test_records_are_what_the_clients_sent_and_received(name):
    C.check_records(CAPTURES, name)
