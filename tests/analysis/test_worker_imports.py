"""The tables' workers build Arrow columns without importing pandas (pyarrow would at its first
pa.array: 0.4 s a worker), and the columns they build are the same."""
import subprocess
import sys

from tests.support import ROOT

PROBE = """
import sys
from analysis.load import _without_pandas
_without_pandas()
import pyarrow as pa
strings = pa.array(["a", None, "b"], pa.string()).to_pylist()
numbers = pa.array([1, 2, None], pa.int64()).to_pylist()
print("pandas" in sys.modules, strings, numbers)
"""


def test_a_worker_builds_columns_without_pandas():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.split(None, 1)[0] == "False", out
    assert out.strip().endswith("['a', None, 'b'] [1, 2, None]"), out


def test_pandas_is_imported_meanwhile():
    probe = ("import sys\nfrom analysis.load import _import_meanwhile\n"
             "_import_meanwhile('pandas').join()\n"
             "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.strip() == "True"
