"""`kafka-dissect report`: one self-contained HTML file, rendered in headless Chromium (Debian's
chromium) to check that the plots load and nothing errors."""
import re
import subprocess

import pytest

from dissector.cli import main
from tests.support import require_tool

from . import scenario

PROBE = """<script>
window.addEventListener("load", () => {
  const imgs = [...document.images];
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0);
  document.body.setAttribute("data-images", imgs.length);
  document.body.setAttribute("data-images-ok", ok.length);
  document.body.setAttribute("data-sizes", ok.map(i => i.naturalWidth + "x" + i.naturalHeight).join(","));
});
</script>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    cap = scenario.write(d / "scenario.pcap")
    out = d / "report.html"
    assert main(["report", str(cap), "--html", str(out)]) == 0
    return out


def test_report_is_self_contained(report):
    text = report.read_text(encoding="utf-8")
    assert "<script" not in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert not re.search(r"url\(", text)
    imgs = re.findall(r'<img class=plot alt="([^"]+)" src="data:image/png;base64,', text)
    # the scenario has latencies, errors, Fetch lag and produced records: all five plots
    assert imgs == ["Latency distribution", "Latency over time", "Errors", "Consumer lag",
                    "Produce rate"]
    assert "NOT_LEADER_OR_FOLLOWER" in text and "REBALANCE_IN_PROGRESS" in text


def _chromium(tmp_path, *args):
    exe = require_tool("chromium")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
           *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_report_renders_in_chromium(report, tmp_path):
    probe = tmp_path / "probe.html"
    probe.write_text(report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
                     encoding="utf-8")
    run = _chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", run.stdout).group(1)
    attrs = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', body))
    assert attrs["data-images"] == "5"
    assert attrs["data-images-ok"] == "5"
    for size in attrs["data-sizes"].split(","):
        w, h = map(int, size.split("x"))
        assert w >= 300 and h >= 150
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []


def test_report_screenshot(report, tmp_path):
    shot = tmp_path / "shot.png"
    run = _chromium(tmp_path, "--window-size=1200,3000", f"--screenshot={shot}", report.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.stat().st_size > 20_000   # a page of plots, not a blank one
