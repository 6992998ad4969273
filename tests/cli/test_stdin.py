"""`-` reads the capture from standard input (`tcpdump -w - | kafka-dissect read -`, or over
ssh): through a real pipe, plain or gzip, every command prints what it prints for the file, in
one process whatever --jobs asks (a pipe is read once)."""
import gzip
import subprocess
import sys

import pytest

from tests.support import CAPTURES

CAPTURE = CAPTURES / "kafka_python.pcap"


def run(argv, stdin=b""):
    proc = subprocess.run([sys.executable, "-m", "dissector", *map(str, argv)], input=stdin,
                          capture_output=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("argv", [["read"], ["read", "--format", "csv", "--jobs", "2"],
                                  ["records", "--format", "csv"], ["stats", "--format", "csv"],
                                  ["tree", "--exchange", "5"]])
@pytest.mark.parametrize("packed", [False, True])
def test_a_pipe_gives_what_the_file_gives(argv, packed):
    data = CAPTURE.read_bytes()
    want = run(argv[:1] + [CAPTURE] + argv[1:])
    got = run(argv[:1] + ["-"] + argv[1:], gzip.compress(data) if packed else data)
    assert want[0] == got[0] == 0 and got == want and want[1]


def test_export_from_a_pipe(tmp_path):
    status, _, err = run(["export", "-", "--out", tmp_path / "x"], CAPTURE.read_bytes())
    assert status == 0 and err.startswith(b"28 exchanges, 76 partition rows")


@pytest.mark.parametrize("stdin, argv, message", [
    (b"", ["read", "-"], b"standard input: empty file, not a pcap or pcapng file"),
    (b"junk", ["read", "-"], b"standard input: not a pcap or pcapng file"),
    (b"", ["read", "-", "-"], b"standard input (-) can be read only once")])
def test_what_cannot_be_read(stdin, argv, message):
    status, _, err = run(argv, stdin)
    assert status == 2 and err == b"kafka-dissect: error: " + message + b"\n"


def test_a_pipe_is_read_by_one_process(tmp_path):
    import os
    from dissector.parallel import jobs_for
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert jobs_for(2, ["-"]) == jobs_for(2, [fifo]) == 1 and jobs_for(2, [CAPTURE]) == 2


TRICKLE = """
import os, random, sys, time
data = open(sys.argv[1], "rb").read()
rnd, i = random.Random(1), 0
while i < len(data):
    n = rnd.choice((1, 7, 100, 3000, 70000))
    os.write(1, data[i:i + n])
    i += n
    if rnd.random() < 0.05:
        time.sleep(0.001)
"""


@pytest.mark.parametrize("level", ["headers", "records"])
def test_a_trickling_pipe(tmp_path, level):
    """The bytes come as a slow writer's pieces (one byte, a few, more than a pipe holds), so
    that reads return short and the readers wait for the rest of a record."""
    capture = CAPTURES / "codecs.pcap"
    writer = subprocess.Popen([sys.executable, "-c", TRICKLE, str(capture)],
                              stdout=subprocess.PIPE)
    got = subprocess.run([sys.executable, "-m", "dissector", "read", "-", "--level", level,
                          "--format", "csv"], stdin=writer.stdout, capture_output=True,
                         timeout=120)
    writer.stdout.close()
    assert writer.wait(timeout=60) == 0
    assert got.returncode == 0 and got.stdout == run(["read", capture, "--level", level,
                                                      "--format", "csv"])[1]


def test_a_terminal_is_not_waited_on():
    """`-` with the terminal as standard input (no pipe): a usage error, not a wait for bytes
    that no one will type."""
    import os
    import pty
    _, terminal = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "dissector", "read", "-"], stdin=terminal,
                              capture_output=True, timeout=60)
    finally:
        os.close(terminal)
    assert proc.returncode == 2 and proc.stderr == (
        b"kafka-dissect: error: standard input (-) is the terminal: pipe a capture into it "
        b"(tcpdump -w - | kafka-dissect read -)\n")
