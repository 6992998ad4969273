"""What the commands say of the key log: the fix for undecrypted TLS connections is a key log
when none was given, and another one when the given one opens none of them; a key log with
malformed lines or no secrets is named on stderr before the run, its text escaped."""
import pytest

from dissector.cli import main
from dissector.tls.layer import undecrypted_note
from tests.support import CAPTURES, require_module

TLS = CAPTURES / "tls" / "kafka_tls.pcap"
KEYS = CAPTURES / "tls" / "kafka_tls.keys.log"
CONNECTIONS = 7   # on port 9093


@pytest.fixture(autouse=True)
def _no_environment_key_log(monkeypatch):
    require_module("cryptography")
    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)


def stderr(capsys, *argv):
    assert main(["read", str(TLS), "--port", "9093", *map(str, argv)]) == 0
    return capsys.readouterr().err


def test_no_key_log_asks_for_one(capsys):
    assert stderr(capsys) == f"kafka-dissect: {CONNECTIONS} TLS connections not decrypted: " \
                             "pass --keylog FILE\n"


def test_a_key_log_of_other_sessions_is_the_one_to_change(capsys, tmp_path, monkeypatch):
    """The lines of another capture's sessions: well formed, opening nothing here; the same
    from $SSLKEYLOGFILE."""
    other = tmp_path / "other.keys"
    other.write_text("".join(f"CLIENT_RANDOM {i:064x} {'ab' * 48}\n" for i in range(3)))
    assert stderr(capsys, "--keylog", other) == (
        f"kafka-dissect: {CONNECTIONS} TLS connections not decrypted: the key log holds no "
        "secrets that open them\n")
    monkeypatch.setenv("SSLKEYLOGFILE", str(other))
    assert "the key log holds no secrets that open them" in stderr(capsys)


def test_the_right_key_log_says_nothing(capsys):
    assert stderr(capsys, "--keylog", KEYS) == ""


def test_an_empty_key_log(capsys, tmp_path):
    empty = tmp_path / "empty.keys"
    empty.write_text("# written by nothing yet\n")
    assert stderr(capsys, "--keylog", empty).startswith(
        "kafka-dissect: warning: the key log holds no TLS secrets\n")


def test_malformed_lines_are_counted_and_escaped(capsys, tmp_path):
    bad = tmp_path / "bad.keys"
    bad.write_bytes(KEYS.read_bytes() + b"\x1b[31mred aa bb\nCLIENT_RANDOM zz 00\n")
    err = stderr(capsys, "--keylog", bad)
    lines = KEYS.read_bytes().count(b"\n")
    assert err.startswith(f"kafka-dissect: warning: 2 malformed key log lines ignored (first: "
                          f"{bad}:{lines + 1}: unknown label ")
    assert err.count("\n") == 1 and "\x1b" not in err and "red" in err   # all decrypted


def test_one_connection():
    assert undecrypted_note(1, True) == \
        "1 TLS connection not decrypted: the key log holds no secrets that open it"
    assert undecrypted_note(1, False) == "1 TLS connection not decrypted: pass --keylog FILE"


def test_sslkeylogfile_of_no_file_is_a_warning(capsys, tmp_path, monkeypatch):
    """$SSLKEYLOGFILE is set for other programs too, and its file written once a client runs:
    a file not there yet does not stop a run (--keylog's does). In a folder not there either:
    Python's ssl creates the file when a default context is made (a library's import may)."""
    missing = tmp_path / "no-folder" / "not-yet.keys"
    monkeypatch.setenv("SSLKEYLOGFILE", str(missing))
    warning = (f"kafka-dissect: warning: SSLKEYLOGFILE {missing}: No such file or directory: "
               "TLS is read without its keys\n")
    assert main(["read", str(CAPTURES / "kafka_python.pcap")]) == 0
    out, err = capsys.readouterr()
    assert err == warning and out.count("\n") == 28
    assert stderr(capsys) == warning + (f"kafka-dissect: {CONNECTIONS} TLS connections not "
                                        "decrypted: pass --keylog FILE\n")
    assert main(["stats", str(TLS), "--port", "9093"]) == 0   # told once, not again by the load
    assert capsys.readouterr().err.count("SSLKEYLOGFILE") == 1
    assert main(["read", str(TLS), "--keylog", str(missing)]) == 2


def test_sslkeylogfile_without_cryptography_is_a_warning(capsys, monkeypatch):
    from dissector.tls import crypto
    monkeypatch.setattr(crypto, "available", lambda: False)
    monkeypatch.setenv("SSLKEYLOGFILE", str(KEYS))
    assert main(["read", str(CAPTURES / "kafka_python.pcap")]) == 0
    assert "SSLKEYLOGFILE is set, but decrypting TLS needs the 'cryptography' package" in \
        capsys.readouterr().err
    assert main(["read", str(TLS), "--keylog", str(KEYS)]) == 2   # asked for: an error


def test_a_notebook_load_warns_at_its_own_line(tmp_path, monkeypatch):
    import analysis
    monkeypatch.setenv("SSLKEYLOGFILE", str(tmp_path / "no-folder" / "not-yet.keys"))
    with pytest.warns(UserWarning, match="TLS is read without its keys") as caught:
        assert len(analysis.load(CAPTURES / "kafka_python.pcap").exchanges) == 28
    assert [w.filename for w in caught] == [__file__]
