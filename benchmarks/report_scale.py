"""What the HTML report costs on a million exchanges, beside what it is made of.

    python benchmarks/report_scale.py [--exchanges 1000000] [--rounds 3]

Builds the synthetic tables of tests/analysis/synthetic.py (six apis, 5,000 client ids, two
bursts an hour apart) once, then per round: the report rendered (`html_report.render`) beside
the tables it shows alone (`report_tables`: what `stats` computes too), and in headless Chromium
the report opened until every plot is drawn beside a page holding only plotly.js (the floor any
Plotly report pays). Prints medians, the ratios, and the file's size against the 10 MB budget.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.html_report import render  # noqa: E402
from analysis.report_tables import report_tables  # noqa: E402
from plotly.offline import get_plotlyjs  # noqa: E402
from tests.analysis import synthetic  # noqa: E402
from tests.analysis.browser import Browser  # noqa: E402


def _opened(browser, path, ready) -> float:
    start = time.perf_counter()
    browser.load(path.as_uri())
    browser.wait_for(ready, timeout=600)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    t = synthetic.tables(args.exchanges)
    times = {"tables": [], "report": [], "plotly.js alone": [], "report opened": []}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        floor = d / "floor.html"
        floor.write_text(f"<!DOCTYPE html><html><body><script>{get_plotlyjs()}</script>"
                         "<script>document.body.dataset.plotted = 1</script></body></html>")
        page = d / "report.html"
        browser = Browser(d)
        try:
            for _ in range(args.rounds):
                start = time.perf_counter()
                report_tables(t, 10)
                times["tables"].append(time.perf_counter() - start)
                start = time.perf_counter()
                page.write_text(render(t), encoding="utf-8")
                times["report"].append(time.perf_counter() - start)
                times["plotly.js alone"].append(_opened(browser, floor,
                                                        "document.body.dataset.plotted"))
                times["report opened"].append(_opened(browser, page,
                                                      "document.body.dataset.plotted"))
                assert browser.problems() == [], browser.problems()
        finally:
            browser.close()
        size = page.stat().st_size
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.exchanges:,} exchanges, {args.rounds} rounds, medians:")
    for k, v in med.items():
        print(f"  {k:16} {v:7.2f} s")
    print(f"  written: report / its tables alone = {med['report'] / med['tables']:.2f}x")
    ratio = med["report opened"] / med["plotly.js alone"]
    print(f"  opened: report / plotly.js alone = {ratio:.2f}x")
    print(f"  size {size / 1e6:.2f} MB of a 10 MB budget "
          f"(plotly.js {len(get_plotlyjs()) / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
