"""Capture content is never executed or unpickled; the --filter language stays a data language;
commands write only the files they are told to write."""
import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dissector.cli import UsageError
from dissector.filters import compile_filter, compile_filter_option
from tests.support import ROOT

from .support import SMALL_REAL

SOURCES = sorted(p for d in ("dissector", "analysis") for p in (ROOT / d).rglob("*.py"))
DANGEROUS_CALLS = {"eval", "exec", "compile", "__import__", "execfile", "input"}
DANGEROUS_MODULES = {"pickle", "_pickle", "cPickle", "marshal", "shelve", "dill", "yaml",
                     "jsonpickle"}
# Code that starts a subprocess, with why it is safe: an argument vector (no shell) built from
# the user's own options, never from capture bytes.
ALLOWED_SUBPROCESS = {"dissector/live/bpf.py": "tcpdump -ddd compiles the user's --bpf option"}
# Code that compiles Python source, with why it is safe: the source is built from the generated
# schema tables (field names from Kafka's specs), never from capture bytes.
ALLOWED_COMPILE = {"dissector/summary_walk.py": "summary walkers from the body schema tables",
                   "analysis/extras.py": "settings readers from the fixed settings' names and "
                                         "which of them a request class has"}
# Code that unpickles, with why it is safe: what it reads was pickled by this program.
ALLOWED_PICKLE = {"dissector/parallel/pipes.py": "messages between the parent and the workers it "
                                                 "forked, over pipes only they hold"}


def _calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
                else None
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                else None
            yield node, name, owner


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_no_code_execution_or_unpickling(path):
    rel = str(path.relative_to(ROOT))
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            imported = {n.split(".")[0] for n in names} & DANGEROUS_MODULES
            assert not imported - ({"pickle", "_pickle"} if rel in ALLOWED_PICKLE else set()), \
                (rel, node.lineno)
    for node, name, owner in _calls(tree):
        if name in ("exec", "compile") and rel in ALLOWED_COMPILE:
            continue
        assert not (owner is None and name in DANGEROUS_CALLS), (rel, node.lineno, name)
        assert not (owner == "os" and name and (name in ("system", "popen")
                                                 or name.startswith(("exec", "spawn")))), \
            (rel, node.lineno)
        for kw in node.keywords:
            assert not (kw.arg == "shell" and not (isinstance(kw.value, ast.Constant)
                                                   and kw.value.value is False)), (rel, node.lineno)
        if owner == "subprocess":
            assert rel in ALLOWED_SUBPROCESS, (rel, node.lineno)


REFUSED = [
    ("api_name.__class__", "attribute access"),
    ("api_name.upper() == 'X'", "function calls"),
    ("open('/etc/passwd')", "function calls"),
    ("__import__('os')", "function calls"),
    ("topics[0] == 'a'", "subscripts"),
    ("(lambda: 1)() == 1", "function calls"),
    ("lambda: 1", "lambda"),
    ("[x for x in topics]", "comprehensions"),
    ("{x for x in topics}", "comprehensions"),
    ("{x: 1 for x in topics}", "comprehensions"),
    ("any(x for x in topics)", "function calls"),
    ("(x for x in topics)", "comprehensions"),
    ("{'a': 1}", "dicts"),
    ("1 if api_key else 2", "if-else"),
    ("(x := 1)", "assignment"),
    ("f'{api_name}' == 'Fetch'", "f-strings"),
    ("latency_ms ** 99999", "'**'"),
    ("api_key << 40", "'<<'"),
    ("api_key is None", "'is'"),
    ("__builtins__ == 1", "unknown column"),
    ("b'x' == client_id", "constant"),
]


@pytest.mark.parametrize("expr,why", REFUSED, ids=[e for e, _ in REFUSED])
def test_filter_refuses_what_is_not_data(expr, why):
    with pytest.raises(ValueError) as e:
        compile_filter(expr)
    assert why in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UsageError):
        compile_filter_option(expr)


def test_filter_is_evaluated_without_eval(monkeypatch):
    """The compiled predicate works with eval and exec gone from builtins."""
    import builtins
    monkeypatch.delattr(builtins, "eval")
    monkeypatch.delattr(builtins, "exec")
    keep = compile_filter('api_name == "Fetch" and latency_ms > 100 or "t" in topics')
    assert keep({"api_name": "Fetch", "latency_ms": 150.0, "topics": []})
    assert not keep({"api_name": "Fetch", "latency_ms": 50.0, "topics": ["u"]})
    assert keep({"api_name": "Produce", "latency_ms": None, "topics": ["t"]})


def test_filter_sequence_arithmetic_does_not_allocate():
    """Found by this suite: `(1,) * N` was evaluated per row (774 MB for N = 10^8)."""
    keep = compile_filter("(1,) * 100000000000 == () or api_key * 2 == 6")
    assert keep({"api_key": 3}) and not keep({"api_key": 4})


@pytest.mark.parametrize("op", ["not ", "-", "+"])
def test_filter_nesting_is_refused_or_evaluates(op):
    for n in (10, 200, 400, 600, 2000):
        expr = op * n + ("api_key" if op == "not " else "1 == 1")
        try:
            keep = compile_filter(expr)
        except ValueError as e:
            assert "nested too deeply" in str(e) or "longer than" in str(e)
            continue
        keep({"api_key": 1})


# -- files written only where told -------------------------------------------------------------

def _cli(args, cwd, home):
    env = {**os.environ, "HOME": str(home), "MPLCONFIGDIR": str(home / "mpl")}
    return subprocess.run([sys.executable, "-m", "dissector", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _tree(d: Path):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def _commands():
    help_text = _cli(["--help"], ROOT, ROOT).stdout
    cmds = [
        (["read", "CAP"], []),
        (["read", "CAP", "--format", "jsonl", "--bodies", "--out", "ex.jsonl"], ["ex.jsonl"]),
        (["read", "CAP", "--format", "csv", "--out", "sub/ex.csv"], None),  # missing dir: refused
        (["apis", "--json"], []),
    ]
    optional = [
        ("tree", (["tree", "CAP", "--exchange", "1"], [])),
        ("stats", (["stats", "CAP"], [])),
        ("report", (["report", "CAP", "--html", "r.html"], ["r.html"])),
        ("export", (["export", "CAP", "--out", "tables"], ["tables"])),
        ("records", (["records", "CAP", "--format", "parquet", "--out", "rec.parquet"],
                     ["rec.parquet"])),
    ]
    for name, cmd in optional:
        if re.search(rf"^\s+{name}\s", help_text, re.M):
            cmds.append(cmd)
    if os.geteuid() == 0:  # live capture needs CAP_NET_RAW (tests/live covers refusals)
        cmds.append((["live", "-i", "lo", "--duration", "0.5", "-w", "live.pcapng"],
                     ["live.pcapng"]))
    return cmds


def test_commands_write_only_their_targets(tmp_path):
    caps = tmp_path / "caps"
    caps.mkdir()
    cap = caps / SMALL_REAL.name
    shutil.copy(SMALL_REAL, cap)
    before_caps = _tree(caps)
    home = tmp_path / "home"
    home.mkdir()
    ran = []
    for i, (args, targets) in enumerate(_commands()):
        cwd = tmp_path / f"cwd{i}"
        cwd.mkdir()
        argv = [str(cap) if a == "CAP" else a for a in args] + (
            ["--port", "auto"] if args[0] not in ("apis", "live") else [])
        proc = _cli(argv, cwd, home)
        assert "Traceback" not in proc.stderr, (args, proc.stderr[-2000:])
        if targets is None:
            assert proc.returncode == 2 and _tree(cwd) == [], (args, proc.stderr)
            continue
        assert proc.returncode == 0, (args, proc.stderr[-2000:])
        top = sorted({p.split("/")[0] for p in _tree(cwd)})
        assert top == sorted(targets), (args, top)
        assert _tree(caps) == before_caps, args
        ran.append(args[0])
    assert "read" in ran and "apis" in ran
