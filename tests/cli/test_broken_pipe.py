"""Output piped into a reader that stops early (`| head`) is not an error: every command that
prints exits 0 and says nothing, whatever its writer (rich's tables included, whose own answer
is exit status 1)."""
import subprocess
import sys

import pytest

from tests.support import CAPTURES

CAPTURE = str(CAPTURES / "kafka_python.pcap")


@pytest.mark.parametrize("argv", [
    ["read", CAPTURE], ["read", CAPTURE, "--format", "jsonl", "--bodies"],
    ["records", CAPTURE], ["records", CAPTURE, "--format", "csv"],
    ["stats", CAPTURE], ["stats", CAPTURE, "--format", "json"],
    ["tree", CAPTURE, "--exchange", "3"], ["apis"]])
def test_a_closed_pipe_is_not_an_error(argv):
    proc = subprocess.Popen([sys.executable, "-m", "dissector", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()   # the reader is gone before the first byte
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0 and err == b""
