"""Where key material comes from: NSS key log files (read, re-read as they grow), the
SSLKEYLOGFILE default, pcapng Decryption Secrets Blocks (our own and editcap's); and the
command line around it."""
import os
import subprocess
import sys

from dissector.cli import main
from dissector.pipeline import dissect
from dissector.tls.keylog import KeyLog

from tests.support import require_tool
from tests.tls.conftest import TLS_PORT

R = "ab" * 32


def test_key_log_lines():
    kl = KeyLog()
    kl.add_text("# comment\n\n"
                f"CLIENT_RANDOM {R} {'11' * 48}\n"
                f"CLIENT_TRAFFIC_SECRET_0 {R} {'22' * 32}\n"
                f"  SERVER_TRAFFIC_SECRET_0 {R.upper()} {'33' * 48}  \r\n"
                f"EXPORTER_SECRET {R} {'44' * 32}\n"          # valid, not used
                f"CLIENT_RANDOM {R} {'11' * 47}\n"             # secret too short
                f"CLIENT_RANDOM {R[:-2]} {'11' * 48}\n"        # random too short
                f"CLIENT_RANDOM {R} zz{'11' * 47}\n"           # not hex
                "garbage\n"
                f"CLIENT_RANDOM {R} {'11' * 48} extra\n"
                f"CLIENT_HANDSHAKE_TRAFFIC_SECRET {R} 5555")   # cut short, no newline
    s = kl.secrets(bytes.fromhex(R))
    assert s == {"CLIENT_RANDOM": b"\x11" * 48, "CLIENT_TRAFFIC_SECRET_0": b"\x22" * 32,
                 "SERVER_TRAFFIC_SECRET_0": b"\x33" * 48}
    assert kl.malformed == 6
    assert "secret of 47 bytes" in kl.first_malformed and ":7" in kl.first_malformed


def test_follow_reads_what_is_appended(tmp_path):
    path = tmp_path / "keys.txt"
    kl = KeyLog()
    f = kl.follow(path)
    assert f.poll() == 0                       # not there yet
    path.write_text(f"CLIENT_RANDOM {R} {'11' * 48}\nCLIENT_TRAFFIC_SECRET_0 {R} ")
    assert f.poll() == 1 and len(kl) == 1      # the unfinished line waits
    v = kl.version
    with open(path, "a") as out:
        out.write(f"{'22' * 32}\n")
    assert f.poll() == 1 and kl.version > v
    assert kl.secrets(bytes.fromhex(R))["CLIENT_TRAFFIC_SECRET_0"] == b"\x22" * 32
    other = "cd" * 32
    path.write_text(f"CLIENT_RANDOM {other} {'33' * 48}\n")   # replaced by a shorter file
    assert f.poll() == 1 and kl.secrets(bytes.fromhex(other)) is not None
    assert kl.malformed == 0


def _exchanges(path, **kw):
    return sorted((repr((e.api_key, e.api_version, e.correlation_id, e.status,
                         e.response.length if e.response else None))
                   for e in dissect(path, (TLS_PORT,), level="bodies", **kw)))


def _pcap_to_pcapng(cap, out, secrets=None):
    import dpkt
    from tests.tls import tlsgen
    with open(cap, "rb") as f:
        pkts = [(int(ts * 10**9), bytes(buf)) for ts, buf in dpkt.pcap.Reader(f)]
    tlsgen.write_pcapng(out, pkts, secrets)


def test_pcapng_decryption_secrets_block(make_tls, tmp_path):
    cap, keys = make_tls("1.3")
    want = _exchanges(cap, keylog=keys)
    assert want
    out = tmp_path / "with-keys.pcapng"
    _pcap_to_pcapng(cap, out, keys.read_bytes())
    assert _exchanges(out) == want
    bare = tmp_path / "bare.pcapng"
    _pcap_to_pcapng(cap, bare)
    assert _exchanges(bare) == []


def test_editcap_inject_secrets(make_tls, tmp_path):
    editcap = require_tool("editcap")
    cap, keys = make_tls("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
    want = _exchanges(cap, keylog=keys)
    ng = tmp_path / "in.pcapng"
    _pcap_to_pcapng(cap, ng)
    out = tmp_path / "out.pcapng"
    subprocess.run([editcap, "--inject-secrets", f"tls,{keys}", str(ng), str(out)], check=True,
                   capture_output=True)
    assert want and _exchanges(out) == want


def test_read_command(make_tls, tmp_path, capsys, monkeypatch):
    cap, keys = make_tls("1.3")
    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)
    assert main(["read", str(cap), "--port", str(TLS_PORT)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    n = err.count("\n")
    assert "TLS connections not decrypted: pass --keylog FILE" in err and n == 1
    assert main(["read", str(cap), "--port", str(TLS_PORT), "--keylog", str(keys),
                 "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.count("\n") > 10 and ",TLS 1.3,TLS_AES_256_GCM_SHA384" in out
    monkeypatch.setenv("SSLKEYLOGFILE", str(keys))
    assert main(["read", str(cap), "--port", str(TLS_PORT), "--format", "csv"]) == 0
    assert capsys.readouterr()[0] == out
    assert main(["read", str(cap), "--port", str(TLS_PORT), "--keylog",
                 str(tmp_path / "missing.txt")]) == 2
    assert "--keylog" in capsys.readouterr()[1]


def test_tree_shows_the_tls_layer(make_tls, capsys):
    cap, keys = make_tls("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
    assert main(["tree", str(cap), "--port", str(TLS_PORT), "--keylog", str(keys),
                 "--exchange", "2"]) == 0
    out = capsys.readouterr()[0]
    assert "TLS: TLS 1.2, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, SNI kafka.test" in out
    assert out.count("  TLS records: #") == 2   # request and response


def test_tls13_chacha20(tmp_path):
    """Python's ssl cannot choose TLS 1.3 suites: OpenSSL's configuration does."""
    conf = tmp_path / "openssl.cnf"
    conf.write_text("openssl_conf = conf\n[conf]\nssl_conf = ssl\n[ssl]\nsystem_default = sys\n"
                    "[sys]\nCiphersuites = TLS_CHACHA20_POLY1305_SHA256\n")
    cap, keys = tmp_path / "chacha.pcap", tmp_path / "keys.txt"
    from tests.support import CAPTURES, ROOT
    env = dict(os.environ, OPENSSL_CONF=str(conf))
    env.pop("SSLKEYLOGFILE", None)
    subprocess.run([sys.executable, str(ROOT / "tests" / "tls" / "tlsgen.py"),
                    str(CAPTURES / "kafka_python.pcap"), str(cap), str(keys)], env=env,
                   check=True, cwd=ROOT)
    run = dissect(cap, (TLS_PORT,), level="bodies", keylog=keys)
    got = list(run)
    truth = list(dissect(CAPTURES / "kafka_python.pcap", (9092,), level="bodies"))
    assert len(got) == len(truth) and not run.issues
    assert {c.tls.cipher_name for c in run.connections} == {"TLS_CHACHA20_POLY1305_SHA256"}
