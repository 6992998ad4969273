"""TLS captures made once per test session from the shipped plaintext captures (tests/tls/tlsgen)."""
import pytest

from tests.support import CAPTURES, require_module

PLAIN = CAPTURES / "kafka_python.pcap"
PLAIN_PORT = 9092
TLS_PORT = 9093


@pytest.fixture(scope="session")
def make_tls(tmp_path_factory):
    """make_tls(version, ciphers=None, plain=PLAIN, mss=1448, etm=True) -> (capture path, key
    log path), made once per argument set."""
    require_module("cryptography")
    from tests.tls import tlsgen
    made = {}

    def make(version="1.3", ciphers=None, plain=PLAIN, port=PLAIN_PORT, mss=tlsgen.MSS,
             etm=True):
        key = (version, ciphers, str(plain), mss, etm)
        if key not in made:
            d = tmp_path_factory.mktemp("tls")
            cap, keys = d / "tls.pcap", d / "keys.txt"
            tlsgen.make(plain, cap, keys, port, version, ciphers, mss, TLS_PORT, etm)
            made[key] = (cap, keys)
        return made[key]
    return make
