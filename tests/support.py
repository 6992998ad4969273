"""Shared test helpers (import as `from tests.support import ...`).

`require(...)`: a test that needs an external tool or package skips locally with a clear reason,
and fails in CI (where CI is set) so that a missing install step can never pass silently.
"""
import os
import shutil
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "kafka-specs"
CAPTURES = ROOT / "captures"


def _missing(what):
    msg = f"missing dependency: {what}"
    if os.environ.get("CI"):
        pytest.fail(msg + " (CI must install it: see .ci/run)")
    pytest.skip(msg)


def require(ok, what):
    """A condition of the system a test needs (`what` says which), or skip (locally) / fail (CI)."""
    if not ok:
        _missing(what)


def require_tool(name):
    """Path of an executable on PATH, or skip (locally) / fail (CI)."""
    path = shutil.which(name)
    if not path:
        _missing(f"executable {name!r}")
    return path


def require_module(name):
    """Import and return a module, or skip (locally) / fail (CI)."""
    if importlib.util.find_spec(name) is None:
        _missing(f"Python package {name!r}")
    return importlib.import_module(name)


def require_compiled(entry, source):
    """A compiled entry point (None where it was not built), or skip (locally) / fail (CI)."""
    if entry is None:
        _missing(f"the compiled {source} (pip install -e . builds it: it needs a C compiler)")
    return entry


def require_root():
    if os.geteuid() != 0:
        _missing("root (capturing on loopback needs CAP_NET_RAW)")


def require_path(path):
    if not Path(path).exists():
        _missing(f"path {path}")
    return Path(path)


def lose_dup_swap(items, rng):
    """`items` (segments, packet records) with about 3% lost, 2% duplicated and 3% swapped with
    the one before: holes, retransmissions and out-of-order data."""
    out = []
    for item in items:
        x = rng.random()
        if x < 0.03:
            continue
        if x < 0.05:
            out.append(item)
        if x < 0.08 and out:
            out.insert(len(out) - 1, item)
            continue
        out.append(item)
    return out


def feed_packets(path, level="headers"):
    """The general path: the capture's packets fed one by one through Dissector.feed, then
    finish(). Returns the Dissector and the exchanges in the order they came out."""
    from dissector.capture import read_packets
    from dissector.pipeline import Dissector
    d = Dissector(level=level)
    exchanges = []
    for n, ts, lt, data in read_packets(path):
        d.feed(n, ts, lt, data)
        exchanges += d.output
        d.output.clear()
    d.finish()
    return d, exchanges + list(d.output)


def walkers():
    """The packet walkers the file reader may use: the compiled one (skipped locally when not
    built, a failure in CI) and its pure-Python reference."""
    from dissector.capture import walk
    try:
        from dissector.capture import _walk
    except ImportError:
        _walk = None
    return {"compiled": _walk and _walk.Walker, "python": walk.Walker}


def walker_class(name):
    """The named packet walker; skips locally (fails in CI) when the compiled one is not built."""
    walker = walkers()[name]
    if walker is None:
        _missing("the compiled packet walker (dissector/capture/_walk.c; pip install -e . builds "
                 "it, which needs a C compiler)")
    return walker


def use_walker(monkeypatch, name):
    """Make the file reader (capture.fast) use the named walker."""
    from dissector.capture import fast
    monkeypatch.setattr(fast, "Walker", walker_class(name))
