"""Run a command as a child process and measure it: wall time, CPU time and peak RSS of that child.

os.wait4 gives the CPU time of exactly the child waited for (getrusage(RUSAGE_CHILDREN) would mix
all children). Peak RSS is the child's VmHWM, polled while it runs: its ru_maxrss would not do,
because Linux carries the spawning process's peak across exec into it.
"""
from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Run:
    """One measured run: wall and CPU (user + system) seconds, peak RSS in MB, exit status."""
    __slots__ = ("wall", "cpu", "rss_mb", "status", "stderr")

    def __init__(self, wall, cpu, rss_mb, status, stderr):
        self.wall, self.cpu, self.rss_mb = wall, cpu, rss_mb
        self.status, self.stderr = status, stderr


def medians(runs):
    """(median CPU seconds, median wall seconds, peak RSS MB) of one tool's runs."""
    return (statistics.median(r.cpu for r in runs), statistics.median(r.wall for r in runs),
            max(r.rss_mb for r in runs))


def installed_env():
    """The environment of a child that runs as an installed tool does: with its bytecode cache.
    (PYTHONDONTWRITEBYTECODE, set in some development shells, would make every run compile the
    project's modules from source, 1.8 MB of generated decoders among them.) The caches are
    written beside the sources by warm_bytecode(); __pycache__ is git-ignored."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def warm_bytecode():
    """Compile the project's packages once, as installing them would."""
    for package in ("dissector", "analysis"):
        compileall.compile_dir(ROOT / package, quiet=1, workers=1)


def run(cmd, stdout=os.devnull, stderr_path=os.devnull, timeout=3600):
    """Run `cmd` (a list) with stdout written to the file `stdout`; returns Run. A child that
    outlives `timeout` seconds is killed (its run then has a non-zero status)."""
    with open(stdout, "wb") as out, open(stderr_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                env=installed_env())
        deadline = start + timeout
        peak_kb = None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak_kb = _high_water_kb(proc.pid) or peak_kb
            if time.perf_counter() > deadline:
                proc.kill()
            time.sleep(0.005)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: keep Popen from waiting
    text = Path(stderr_path).read_text(errors="replace") if stderr_path != os.devnull else ""
    rss_mb = (peak_kb if peak_kb is not None else usage.ru_maxrss) / 1024
    return Run(wall, usage.ru_utime + usage.ru_stime, rss_mb, proc.returncode, text)


def side_by_side(cmds, timeout=3600) -> float:
    """Start every command of `cmds` at once (outputs discarded); the wall seconds until the
    last has ended. Raises if one fails."""
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=installed_env()) for cmd in cmds]
    try:
        for proc in procs:
            if proc.wait(timeout=max(0.0, start + timeout - time.perf_counter())) != 0:
                raise RuntimeError(f"{' '.join(proc.args)} failed ({proc.returncode})")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return time.perf_counter() - start


def settle(path):
    """Drop the capture from the page cache and read it back once: then it is cached as a
    capture on disk is when read (the kernel's read-ahead fills large folios), whatever its
    writer left (a capture written in small writes, as tcpdump's, is cached in 4 KiB pages).
    tshark reads both alike; our map of the file costs the kernel more page faults on small
    pages (header level about 1.12x: README, Performance). Returns whether the cache could be
    dropped (Linux)."""
    if not hasattr(os, "posix_fadvise"):
        return False
    with open(path, "rb") as f:
        os.fsync(f.fileno())   # written pages must reach the disk before they can be dropped
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        while f.read(1 << 20):
            pass
    return True


def _high_water_kb(pid):
    """The process's peak resident set (VmHWM) in kB, or None once it has gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def machine():
    """'N CPUs, MODEL' from /proc/cpuinfo, and the 1-minute load average when measured."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs, {model}, load average {os.getloadavg()[0]:.1f}"
