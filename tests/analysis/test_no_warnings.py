"""The commands print no Python warning raised in our code (pandas' FutureWarnings point at the
line of ours that calls them), on captures whose tables are empty or thin: TLS without keys
(connections, no exchange), a port with nothing on it, a filter that keeps nothing, headers
only, and an ordinary capture."""
import warnings
from pathlib import Path

import pytest

from dissector.cli import main
from tests.support import CAPTURES, ROOT

TLS = CAPTURES / "tls" / "kafka_tls.pcap"
PLAIN = CAPTURES / "kafka_python.pcap"
CASES = {"tls without keys": [TLS, "--port", "9093"], "nothing on the port": [TLS],
         "filtered to nothing": [PLAIN, "--filter", "api_key == 999"],
         "headers only": [PLAIN, "--level", "headers"], "ordinary": [PLAIN, "--level", "records"]}
OURS = (str(ROOT / "analysis"), str(ROOT / "dissector"))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", ["stats", "report", "export"])
def test_no_warning_of_ours(case, command, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)
    out = {"report": ["--html", tmp_path / "r.html"], "export": ["--out", tmp_path / "x"],
           "stats": []}[command]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main([command, *map(str, CASES[case] + out)]) == 0
    capsys.readouterr()
    ours = [f"{Path(w.filename).name}:{w.lineno}: {w.message}" for w in caught
            if str(w.filename).startswith(OURS)]
    assert ours == []
