"""benchmarks/tls_corpus.make_source keeps only a capture tshark decodes whole (its count is the
benchmark's oracle): another capture when tshark decodes fewer messages than the clients
logged, a clear error when none of CAPTURES does. Capture and tshark stand in here; the real
ones run in test_benchmarks_run.py."""
import sys
from types import SimpleNamespace

import pytest

from tests.support import ROOT

sys.path.insert(0, str(ROOT))
from benchmarks import corpus as C  # noqa: E402
from benchmarks import tls_corpus  # noqa: E402


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """make_source with captures that tshark decodes as `decoded` says, one count per try."""
    monkeypatch.setattr(C, "CORPUS_DIR", tmp_path)
    state = SimpleNamespace(decoded=[], tries=0)

    def capture(setting, part):
        state.tries += 1
        part.mkdir(exist_ok=True)
        for name in ("tls.pcap", "plain.pcap", "keys.log"):
            (part / name).write_text(f"{name} of try {state.tries}")
        info = {"setting": setting, "tls_port": 1, "requests": 10, "answered": 9}
        return info, SimpleNamespace(keylog=part / "keys.log")
    monkeypatch.setattr(tls_corpus, "_capture", capture)
    monkeypatch.setattr(tls_corpus, "_tshark_messages", lambda *a: state.decoded[state.tries - 1])
    return state


def test_a_capture_tshark_misreads_is_made_again(lab):
    lab.decoded = [15, 19]
    info = tls_corpus.make_source()
    assert lab.tries == 2 and info["requests"] + info["answered"] == 19
    paths = tls_corpus.source_paths()
    assert paths["tls"].read_text() == "tls.pcap of try 2"
    assert paths["keylog"].read_text() == "keys.log of try 2"
    assert paths["plain"].is_file() and paths["info"].is_file()


def test_no_capture_tshark_reads_whole_is_an_error(lab):
    lab.decoded = [15, 18, 3]
    with pytest.raises(RuntimeError, match=r"tshark decoded \[15, 18, 3\] of the 19 Kafka"):
        tls_corpus.make_source()
    assert lab.tries == tls_corpus.CAPTURES
    assert not tls_corpus.source_paths()["tls"].exists()
