"""`kafka-dissect live` on the loopback interface as a process, for the tests that capture real
traffic with it: started, waited on by what it writes to stderr, stopped as a user stops it."""
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

from tests.support import ROOT


@contextmanager
def live_process(args, err_file):
    """`kafka-dissect live -i lo ARGS` running (stdout a text pipe, stderr to err_file); killed
    at the end if still running."""
    with open(err_file, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "dissector", "live", "-i", "lo", *args],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def wait_for(path, pattern, timeout=30):
    """The first match of `pattern` (a regular expression) in the file at `path` within
    `timeout` seconds, else None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, path.read_text())
        if m:
            return m
        time.sleep(0.05)
    return None


def stop(proc, sig=signal.SIGINT):
    """Stop a live run with `sig` (Ctrl-C) and return what it printed."""
    proc.send_signal(sig)
    return proc.communicate(timeout=60)[0]
