"""Wall and CPU seconds of each stage of a run, for benchmarks (`Result.stages`).

CPU is what the Spark JVM and every process under it (the Python workers) used, read from Linux's
/proc: in local mode that is all the work of a stage except the driver's own Python, which is
added from this process. Elsewhere (a cluster, no /proc) only wall times are known (CPU None).
"""
from __future__ import annotations

import os
import time

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _tree_cpu(root: int):
    """CPU seconds of process `root` and its descendants (with their reaped children), or None."""
    try:
        parents = {}
        cpu = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            pid = int(name)
            parents[pid] = int(fields[1])
            cpu[pid] = sum(int(x) for x in fields[11:15]) / _TICK
    except OSError:
        return None
    if root not in cpu:
        return None
    total, todo = 0.0, [root]
    children = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        pid = todo.pop()
        total += cpu[pid]
        todo.extend(children.get(pid, ()))
    return total


class Stages:
    """Marks stage ends: `stage(name)` after each; `rows` is [(name, wall s, cpu s or None)]."""

    def __init__(self, spark, started=None):
        """started: time.monotonic() before the session was made by this process, which then
        counts as a first stage, "start", with all the CPU used so far."""
        self.rows = []
        try:
            self._jvm = int(spark._jvm.java.lang.ProcessHandle.current().pid())
        except Exception:   # not a local JVM we can see
            self._jvm = None
        self._last = self._now()
        if started is not None:
            self._last = started, (0.0 if self._last[1] is not None else None)
            self.stage("start")

    def _now(self):
        jvm = _tree_cpu(self._jvm) if self._jvm is not None else None
        cpu = None if jvm is None else jvm + time.process_time()
        return time.monotonic(), cpu

    def stage(self, name: str) -> None:
        now = self._now()
        (w0, c0), (w1, c1) = self._last, now
        self.rows.append((name, w1 - w0, None if c0 is None or c1 is None else c1 - c0))
        self._last = now
