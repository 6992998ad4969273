"""A worker that fails or dies stops the run with one clear line (exit status 3), never a hang
or a traceback, and the other workers are gone when the command returns."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from dissector.cli import main
from dissector.parallel import worker

CAPTURE = Path(__file__).resolve().parents[2] / "captures" / "codecs.mss1448.pcap"


def _children():
    """The processes whose parent is this one (Linux)."""
    me = str(os.getpid())
    kids = []
    for task in Path("/proc").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        if task.name.isdigit() and stat.rsplit(")", 1)[1].split()[1] == me:
            kids.append(int(task.name))
    return kids


def _fail(self):
    if self.me == 0:
        raise ValueError("a bug in worker")
    return run(self)


def _die(self):
    if self.me == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return run(self)


run = worker._Worker.run


@pytest.mark.parametrize("how, said", [(_fail, "worker 0 failed"),
                                       (_die, "a worker process ended with status -9")])
def test_a_failed_worker_stops_the_run(tmp_path, capsys, monkeypatch, how, said):
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc")
    monkeypatch.setattr(worker._Worker, "run", how)
    before = set(_children())   # a broker another test started may be running
    code = main(["read", str(CAPTURE), "--format", "csv", "--out", str(tmp_path / "out"),
                 "--jobs", "2"])
    err = capsys.readouterr().err
    assert code == 3 and said in err and "Traceback" not in err
    assert set(_children()) <= before
