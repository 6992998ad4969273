"""A bounded `make fuzz-asan` in the suite: the compiled extensions built with AddressSanitizer
and UndefinedBehaviorSanitizer (tests/fuzz/sanitized.py), a canary proving the sanitizer is
live, the C regressions and a short mutation campaign over captures/ under them."""
import subprocess
import sys

import pytest

from tests.support import require_tool

from . import sanitized


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    require_tool("gcc")
    root = tmp_path_factory.mktemp("asan")
    return root, sanitized.build(root)


def _run(tree, *args, timeout=300):
    root, env = tree
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_the_sanitizer_catches_an_overlapping_memcpy(tree):
    proc = _run(tree, "-c", "import ctypes; b = ctypes.create_string_buffer(64); "
                            "ctypes.CDLL(None).memcpy(b, ctypes.byref(b, 8), 32)")
    assert proc.returncode == sanitized.ASAN_EXIT and "memcpy-param-overlap" in proc.stderr


def test_sanitized_extensions_load(tree):
    proc = _run(tree, "-m", "tests.fuzz.sanitized", "--check")
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_c_regressions_and_mutants_under_the_sanitizers(tree):
    proc = _run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                "-p", "no:xdist", "tests/fuzz/test_regressions.py", "-k",
                "framebuf or budget_near or plan_naming or link_shapes")
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    proc = _run(tree, "-m", "tests.fuzz.mutate", "--count", "40", "--calls", "4000",
                "--seed", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "0 findings" in proc.stdout
