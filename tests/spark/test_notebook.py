"""notebooks/04_spark_pipeline.ipynb runs top to bottom (its own cells check that the Spark
tables equal the pandas ones) and is committed without outputs."""
from __future__ import annotations

from tests.support import CAPTURES, ROOT, require_module, require_path, require_tool

NOTEBOOK = ROOT / "notebooks" / "04_spark_pipeline.ipynb"


def test_committed_without_outputs():
    nbformat = require_module("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def test_runs_top_to_bottom():
    nbformat = require_module("nbformat")
    nbclient = require_module("nbclient")
    require_module("ipykernel")
    require_module("pyspark")
    require_tool("java")
    require_path(CAPTURES / "codecs.pcap")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT / "notebooks")}})
    client.execute()   # raises CellExecutionError on the first failing cell
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert [o for o in outputs if "image/png" in o.get("data", {})]   # the plot was drawn
    tables = [o for o in outputs if "text/html" in o.get("data", {})]
    assert any("Produce" in o["data"]["text/html"] for o in tables)
