"""The compiled extensions under AddressSanitizer and UndefinedBehaviorSanitizer, in a tree of
their own (the working tree's own builds are left alone).

    python -m tests.fuzz.sanitized TREE      # build; prints the environment to run under

build(tree) copies the sources (dissector, analysis, tests, captures, kafka-specs) into `tree`,
compiles every dissector/**/_NAME.c with -fsanitize=address,undefined (any undefined behaviour
fatal), and returns the environment for running Python there: libasan preloaded (the
interpreter itself is not instrumented), Python's allocator off so that ASan sees every object,
leak detection off (the interpreter keeps memory until exit by design), a finding ends the
process with exit status 99 (ASan) or 98 (UBSan) and a report on stderr.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPIED = ("dissector", "analysis", "tests", "captures", "kafka-specs", "scripts", "pyproject.toml")
FLAGS = ["-shared", "-fPIC", "-O1", "-g", "-fno-omit-frame-pointer",
         "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
ASAN_EXIT, UBSAN_EXIT = 99, 98


def _ignore(_, names):
    return [n for n in names if n.endswith(".so") or n == "__pycache__"]


def build(tree: Path, cc: str = "gcc") -> dict:
    tree = Path(tree)
    for name in COPIED:
        src, dst = ROOT / name, tree / name
        if dst.exists():
            shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
        if src.is_dir():
            shutil.copytree(src, dst, ignore=_ignore)
        else:
            shutil.copy2(src, dst)
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    sources = sorted((tree / "dissector").rglob("_*.c"))

    def compile_one(src: Path):
        out = src.with_name(src.stem + suffix)
        proc = subprocess.run([cc, *FLAGS, f"-I{include}", str(src), "-o", str(out)],
                              capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"{src.name}: {proc.stderr.strip()}")
        return out

    with ThreadPoolExecutor(max_workers=2) as pool:
        built = list(pool.map(compile_one, sources))
    libasan = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True,
                             text=True, check=True).stdout.strip()
    env = dict(os.environ)
    env.update(
        LD_PRELOAD=libasan, PYTHONMALLOC="malloc", PYTHONPATH=str(tree),
        PYTHONDONTWRITEBYTECODE="1",
        ASAN_OPTIONS=f"detect_leaks=0:halt_on_error=1:exitcode={ASAN_EXIT}",
        UBSAN_OPTIONS=f"halt_on_error=1:print_stacktrace=1:exitcode={UBSAN_EXIT}")
    env["KAFKA_DISSECTOR_SANITIZED"] = ",".join(p.name for p in built)
    return env


def check_loaded() -> None:
    """In a sanitized process: every extension is the tree's build and libasan is mapped."""
    import importlib
    expected = os.environ["KAFKA_DISSECTOR_SANITIZED"].split(",")
    tree = Path(os.environ["PYTHONPATH"]).resolve()
    for so in expected:
        rel = next((tree / "dissector").rglob(so)).relative_to(tree)
        module = ".".join(rel.with_suffix("").with_suffix("").parts)
        mod = importlib.import_module(module.split(".cpython")[0])
        assert Path(mod.__file__).resolve().is_relative_to(tree), mod.__file__
    maps = Path("/proc/self/maps").read_text()
    assert "libasan" in maps, "libasan is not loaded"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check"]:
        check_loaded()
        print("sanitized extensions loaded:", os.environ["KAFKA_DISSECTOR_SANITIZED"])
    else:
        env = build(Path(sys.argv[1]))
        for k in ("LD_PRELOAD", "PYTHONMALLOC", "PYTHONPATH", "ASAN_OPTIONS", "UBSAN_OPTIONS",
                  "KAFKA_DISSECTOR_SANITIZED"):
            print(f"export {k}={env[k]!r}")
