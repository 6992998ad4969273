"""The notebooks run top to bottom against captures/ and are committed without outputs."""
import pytest

from tests.support import CAPTURES, ROOT, require_module, require_path

NOTEBOOKS = ["01_quickstart.ipynb", "02_latency_and_errors.ipynb",
             "03_records_and_consumer_lag.ipynb", "05_where_the_time_goes.ipynb"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_without_outputs(name):
    nbformat = require_module("nbformat")
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_runs_top_to_bottom(name):
    nbformat = require_module("nbformat")
    nbclient = require_module("nbclient")
    require_module("ipykernel")
    require_path(CAPTURES / "codecs.pcap")
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()   # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert errors == []
    # every code cell ran and the plots were drawn
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {})]
    assert images


def test_workers_fork_from_a_kernel():
    """analysis.load's worker processes (large captures by default) fork from a Jupyter
    kernel, which runs threads of its own, and give the tables one process gives."""
    nbformat = require_module("nbformat")
    nbclient = require_module("nbclient")
    require_module("ipykernel")
    path = require_path(CAPTURES / "librdkafka_produce_consume.pcap")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import analysis, pandas\n"
        f"one = analysis.load({str(path)!r}, records=True, jobs=1)\n"
        f"two = analysis.load({str(path)!r}, records=True, jobs=2)\n"
        "for name in ('exchanges', 'records', 'partitions', 'connections'):\n"
        "    pandas.testing.assert_frame_equal(getattr(one, name), getattr(two, name))\n"
        "print('same', len(two.exchanges))\n")])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    out = nb.cells[0].outputs
    assert [o.get("text") for o in out if o.output_type == "stream"] == ["same 58\n"], out
