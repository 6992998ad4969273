"""`kafka-dissect report`: one self-contained interactive HTML file. It is rendered in headless
Chromium (Debian's chromium over the DevTools protocol): no console error, every plot drawn,
hovering a point shows its exchange, time axes zoom together, tables sort and filter, and capture
strings never become markup."""
import html
import re
import time

import numpy as np
import pytest
from plotly.offline import get_plotlyjs

from analysis import cluster, load
from analysis.html_report import render
from analysis.report_data import bucket_width, with_gaps
from dissector.cli import main
from tests.support import CAPTURES, require_path

from . import fake, scenario, synthetic
from .browser import Browser

# the middle of the highest marker of the trace named `name` in a plot's first subplot (scrolled
# into view): where the mouse goes to hover over the slowest point
HIGHEST_POINT = """((plot, name) => {
  plot.scrollIntoView();
  const i = plot.data.filter(t => (t.xaxis || "x") === "x").findIndex(t => t.name === name);
  const trace = plot.querySelector(".subplot.xy .scatterlayer").children[i];
  const pts = [...trace.querySelectorAll("path.point")].map(p => p.getBoundingClientRect());
  const top = pts.reduce((a, b) => (a.y < b.y ? a : b));
  return [top.x + top.width / 2, top.y + top.height / 2];
})"""
PLOTS_DRAWN = """[...document.querySelectorAll("div.plot")].map(d =>
  [d.id, d.querySelectorAll(".main-svg").length,
   d.querySelectorAll(".scatterlayer .trace, .barlayer .trace, .sankey").length])"""


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    return scenario.write(tmp_path_factory.mktemp("report") / "scenario.pcap")


@pytest.fixture(scope="module")
def report(capture):
    out = capture.parent / "report.html"
    assert main(["report", str(capture), "--html", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    b = Browser(tmp_path_factory.mktemp("chromium"))
    yield b
    b.close()


def _open(browser, path):
    browser.load(path.as_uri())
    n = browser.wait_for("document.body.dataset.plotted")
    return int(n)


def test_report_is_self_contained(report):
    text = report.read_text(encoding="utf-8")
    plotly_js = get_plotlyjs()
    assert f"<script>{plotly_js}</script>" in text   # inlined whole (links in it stay unused)
    page = text.replace(plotly_js, "")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert len(re.findall(r"<script", page)) == 3   # figures (JSON), plotly.js, the page's
    assert "Content-Security-Policy" in text
    for section in ("Latency and requests per api", "Errors by name", "Consumer lag",
                    "Records produced", "Slowest 10 exchanges", "Clients", "Connections"):
        assert section in text
    assert "NOT_LEADER_OR_FOLLOWER" in text and "REBALANCE_IN_PROGRESS" in text


def test_report_renders_and_hover_shows_the_exchange(report, capture, browser):
    n = _open(browser, report)
    drawn = browser.eval(PLOTS_DRAWN)
    # one row per answered api (Fetch long poll and unanswered Metadata left out), where the
    # time goes, errors, rebalances, lag, produce rate, the clients graphs (brokers; topics and
    # groups)
    apis = ["Fetch", "Produce", "JoinGroup", "SyncGroup", "OffsetCommit", "Heartbeat",
            "LeaveGroup"]
    assert n == len(drawn) == len(apis) + 7
    assert all(svgs >= 1 and traces >= (6 if i < len(apis) else 1)
               for i, (_, svgs, traces) in enumerate(drawn)), drawn
    headings = browser.eval('[...document.querySelectorAll("div.plot[data-time]")]'
                            '.map(d => d.previousElementSibling.textContent)')
    assert sorted(headings[:len(apis)]) == sorted(apis)

    ex = load([capture]).exchanges
    slow = ex[ex["api_name"] == "Produce"].sort_values("latency_ms").iloc[-1]
    assert slow["latency_ms"] == pytest.approx(9.0, abs=0.01)
    # the Produce row's exchange points: hover over the 9 ms one with the mouse
    where = browser.eval(HIGHEST_POINT + """([...document.querySelectorAll("h3")]
      .find(h => h.textContent === "Produce").nextElementSibling, "exchanges")""")
    browser.mouse(*where)
    text = browser.wait_for('document.querySelector(".hoverlayer .hovertext")'
                            '?.textContent', timeout=10)
    assert "Produce v9" in text
    assert "client id producer (10.0.0.1:40001)" in text
    assert "latency 9.000 ms" in text
    assert f"packets {slow['request_packet']} → {slow['response_packet']}" in text
    assert browser.problems() == []


def test_time_axes_zoom_together(report, browser):
    _open(browser, report)
    ranges = browser.eval("""(async () => {
      const plots = [...document.querySelectorAll("div.plot[data-time]")];
      await Plotly.relayout(plots[0], {"xaxis.range": ["2023-11-14 22:13:20.2",
                                                       "2023-11-14 22:13:20.4"]});
      await new Promise(r => setTimeout(r, 200));
      return plots.map(p => p.layout.xaxis.range.map(String));
    })()""")
    assert len(ranges) >= 9
    assert all(r == ranges[0] for r in ranges) and ranges[0][0].startswith("2023-11-14 22:13:20.2")
    assert browser.problems() == []


def test_tables_sort_and_filter(report, browser):
    _open(browser, report)
    result = browser.eval("""(() => {
      const h = [...document.querySelectorAll("h3")].find(h => h.textContent.startsWith("Slowest"));
      const box = h.nextElementSibling.querySelector("input.filter");
      const table = h.nextElementSibling.querySelector("table");
      const col = [...table.tHead.rows[0].cells].findIndex(c => c.textContent === "latency_ms");
      const latencies = () => [...table.tBodies[0].rows].filter(r => !r.hidden)
        .map(r => parseFloat(r.cells[col].textContent));
      table.tHead.rows[0].cells[col].click();           // descending first
      const down = latencies();
      table.tHead.rows[0].cells[col].click();
      const up = latencies();
      box.value = "Produce"; box.dispatchEvent(new Event("input"));
      return {down, up, filtered: latencies().length,
              count: box.nextElementSibling.textContent};
    })()""")
    assert result["down"] == sorted(result["down"], reverse=True) and len(result["down"]) == 10
    assert result["up"] == sorted(result["up"])
    assert result["filtered"] == 3 and result["count"] == "3 of 10 rows"


def test_real_capture_with_deliveries(tmp_path, browser):
    """librdkafka producing and consuming (a real client, tests/captures): the end-to-end plot's
    slowest record shows the packets of its Produce request and Fetch response."""
    cap = require_path(CAPTURES / "librdkafka_produce_consume.pcap")
    out = tmp_path / "real.html"
    assert main(["report", str(cap), "--html", str(out)]) == 0
    d = load([cap]).deliveries
    slow = d.sort_values("end_to_end_ms").iloc[-1]
    _open(browser, out)
    where = browser.eval(HIGHEST_POINT + """([...document.querySelectorAll("h2")]
      .find(h => h.textContent.startsWith("End-to")).nextElementSibling, "slowest records")""")
    browser.mouse(*where)
    text = browser.wait_for('document.querySelector(".hoverlayer .hovertext")?.textContent',
                            timeout=10)
    assert f"{slow['topic']}-{slow['partition']} @ {slow['offset']}" in text
    assert f"end to end {slow['end_to_end_ms']:.3f} ms" in text
    assert "Produce request packet" in text and "Fetch response packet" in text
    assert browser.problems() == []


def test_cluster_sections(tmp_path, browser):
    """Two brokers' worth of Metadata (test_cluster's capture): the clients graph draws a flow
    per client id and broker, red to the misconfigured addresses, and the leader plot the move
    of orders-0 from node 1 to node 2."""
    from .test_cluster import _capture
    cap = tmp_path / "cluster.pcap"
    _capture(cap)
    out = tmp_path / "cluster.html"
    assert main(["report", str(cap), "--html", str(out)]) == 0
    _open(browser, out)
    graph = browser.eval("""(() => {
      const h = [...document.querySelectorAll("h2")].find(h => h.textContent === "Clients");
      const plot = h.nextElementSibling;
      return {nodes: [...plot.querySelectorAll(".sankey-node .node-label")].map(n => n.textContent),
              links: plot.data[0].link.color.map(c => c.startsWith("rgba(214") ? "red" : "ok")};
    })()""")
    assert sorted(graph["nodes"]) == ["10.0.0.4:9092 (no node id)", "10.0.0.9:9092 (no node id)",
                                      "app", "node 1 (10.0.0.2:9092)", "producer"]
    assert sorted(graph["links"]) == ["ok", "ok", "red", "red"]
    leaders = browser.eval("""(() => {
      const h = [...document.querySelectorAll("h2")].find(h => h.textContent === "Cluster");
      const plot = h.nextElementSibling;
      const points = [...plot.querySelectorAll(".scatterlayer .trace")]
        .map(t => t.querySelectorAll("path.point").length);
      return plot.data.map((t, i) => [t.name, points[i]]);
    })()""")
    lead = cluster.leaders(load([cap]))
    assert list(lead["leader_id"])[0] == 1 and list(lead["leader_id"])[-1] == 2
    assert leaders == [["orders-0", len(lead)]]
    assert browser.problems() == []


# the producers -> topics -> groups -> consumers graph as (source, target, records) links
TOPICS_GRAPH = """(() => {
  const h = [...document.querySelectorAll("h3")].find(h => h.textContent.startsWith("Producers"));
  const plot = h.nextElementSibling, sankey = plot.data[0];
  const shown = [...plot.querySelectorAll(".sankey-node .node-label")].map(n => n.textContent);
  return {labels: sankey.node.label, shown, kinds: sankey.node.customdata,
          links: sankey.link.source.map((s, i) => [s, sankey.link.target[i],
                                                   sankey.link.customdata[i]])};
})()"""


def _topics_graph(browser):
    g = browser.eval(TOPICS_GRAPH)
    names = [f"{kind}:{html.unescape(label)}" for kind, label in zip(g["kinds"], g["labels"])]
    links = {(names[s], names[t]): int(v.replace(",", "")) for s, t, v in g["links"]}
    return g, links


def test_producers_topics_groups_consumers_graph(tmp_path, browser):
    """Real clients (librdkafka producing, consuming in groups, transactions): each producer's
    link to its topics carries the records it produced, each consumed topic flows to the
    consumer's group and the group to the consumer, as the clients' own logs say."""
    import json
    names = ["librdkafka_produce_consume", "transactions"]
    caps = [str(require_path(CAPTURES / f"{n}.pcap")) for n in names]
    out = tmp_path / "clients.html"
    assert main(["report", *caps, "--html", str(out)]) == 0
    _open(browser, out)
    graph, links = _topics_graph(browser)
    assert sorted(graph["shown"]) == sorted(html.unescape(label) for label in graph["labels"])
    checked = 0
    for n in names:
        for run in json.loads((CAPTURES / f"{n}.truth.json").read_text())["clients"]:
            cid = run["client_id"]
            for topic in {r["topic"] for r in run["produced"]}:
                sent = sum(r["topic"] == topic for r in run["produced"])
                assert links[(f"producer:{cid}", f"topic:{topic}")] == sent
                checked += 1
            group = run["config"].get("group.id")
            for topic in {r["topic"] for r in run["consumed"]}:
                got = sum(r["topic"] == topic for r in run["consumed"])
                assert links[(f"topic:{topic}", f"group:group {group}")] >= got
                assert links[(f"group:group {group}", f"consumer:{cid}")] >= got
                checked += 1
    assert checked >= 10
    assert browser.problems() == []


HOSTILE = ('</script><script>alert(1)</script><img src=x onerror="document.title=\'pwned\'">'
           ' &amp; %{y} <br>')


def test_capture_strings_never_become_markup(tmp_path, browser):
    run = fake.Run()
    conn = fake.connection(run)
    exchanges = [fake.exchange(conn, i, 3, 12, 10 * i, 10 * i + 1 + i, resp=fake.NS(),
                               client_id=HOSTILE) for i in range(1, 4)]
    out = tmp_path / "hostile.html"
    out.write_text(render(fake.tables(run, exchanges)), encoding="utf-8")
    text = out.read_text(encoding="utf-8")
    assert HOSTILE not in text and html.escape(HOSTILE) in text   # tables: escaped
    _open(browser, out)
    assert browser.eval("document.title") == "Kafka traffic report"
    assert browser.eval("document.querySelectorAll('img').length") == 0
    cells = browser.eval("[...document.querySelectorAll('td')].map(td => td.textContent)")
    assert HOSTILE in cells
    where = browser.eval(HIGHEST_POINT + '(document.querySelector("div.plot"), "exchanges")')
    browser.mouse(*where)
    text = browser.wait_for('document.querySelector(".hoverlayer .hovertext")?.textContent',
                            timeout=10)
    assert HOSTILE in text   # shown as the text it is
    assert browser.problems() == []


def test_client_names_in_the_graphs_and_tables_stay_text(tmp_path, browser):
    """Client ids, a topic, a group and a software name that are markup: the graph's nodes
    and the clients table show them as the text they are."""
    from dissector.text_safety import escape

    from .hostile_clients import (CONSUMER, GROUP, PRODUCER, SOFTWARE, TOPIC,
                                  tables_of_hostile_clients)
    out = tmp_path / "hostile-clients.html"
    out.write_text(render(tables_of_hostile_clients()), encoding="utf-8")
    _open(browser, out)
    assert browser.eval("document.title") == "Kafka traffic report"
    assert browser.eval("document.querySelectorAll('img, b, i').length") == 0
    graph, links = _topics_graph(browser)
    assert set(links) == {(f"producer:{PRODUCER}", f"topic:{TOPIC}"),
                          (f"topic:{TOPIC}", f"group:group {GROUP}"),
                          (f"group:group {GROUP}", f"consumer:{CONSUMER}")}
    assert set(graph["shown"]) == {PRODUCER, TOPIC, f"group {GROUP}", CONSUMER}
    # the tables show control characters escaped, as stats does
    cells = browser.eval("[...document.querySelectorAll('td')].map(td => td.textContent)")
    assert {escape(s) for s in (PRODUCER, CONSUMER, SOFTWARE, GROUP, TOPIC)} <= set(cells)
    assert browser.problems() == []


def test_gaps_where_there_was_no_traffic():
    x, y = with_gaps(np.array([3, 4, 9, 10]), 1000, [1, 2, 3, 4])
    assert list(x) == [3000, 4000, 5000, 9000, 10000]
    assert np.isnan(y[2]) and list(y[[0, 1, 3, 4]]) == [1, 2, 3, 4]
    assert bucket_width(np.array([0.0, 3_600_000.0])) == 1   # two instants: narrow buckets


def test_a_million_exchanges(tmp_path, browser):
    t = synthetic.tables(1_000_000)
    start = time.perf_counter()
    out = tmp_path / "million.html"
    out.write_text(render(t), encoding="utf-8")
    took = time.perf_counter() - start
    size = out.stat().st_size
    print(f"1,000,000 exchanges: report written in {took:.1f} s, {size / 1e6:.2f} MB")
    assert size < 10_000_000
    assert took < 120   # a few seconds on a quiet machine; generous for a busy CI
    start = time.perf_counter()
    n = _open(browser, out)
    opened = time.perf_counter() - start
    print(f"opened and drawn in Chromium in {opened:.1f} s")
    assert n == len(synthetic.APIS) + 1 and opened < 60   # api rows and errors
    # the hour between the bursts is a gap: every p50 line is two pieces
    paths = browser.eval("""[...document.querySelectorAll("div.plot[data-time]")].map(d =>
      [...d.querySelector(".scatterlayer .trace").querySelectorAll(".js-line")]
        .map(p => p.getAttribute("d").split("M").length - 1).reduce((a, b) => a + b))""")
    assert paths == [2] * len(synthetic.APIS)
    assert browser.problems() == []


def test_rebalance_timeline(tmp_path, browser):
    """The scripted KIP-848 group (tests/analysis/kip848.py): a bar per member epoch from its
    start to its members' first Fetch, coloured by trigger; hovering the long one (epoch 2,
    B joining) names it."""
    from . import kip848
    out = tmp_path / "kip848.html"
    assert main(["report", str(kip848.SHIPPED), "--html", str(out)]) == 0
    _open(browser, out)
    plot = """[...document.querySelectorAll("h2")]
      .find(h => h.textContent === "Consumer groups and rebalances").nextElementSibling"""
    bars = browser.eval(f"""(() => {{
      const plot = {plot};
      plot.scrollIntoView();
      // _fullData: the traces as drawn, their arrays decoded
      return plot._fullData.filter(t => t.type === "bar").map(t => [t.name, Array.from(t.x)]);
    }})()""")
    got = sorted((name, round(x, 3)) for name, xs in bars for x in xs)
    want = sorted((trigger.split(":")[0], float(resumed - start))
                  for _, start, _, resumed, _, _, trigger, _ in kip848.EXPECTED)
    assert got == want
    where = browser.eval(f"""(() => {{
      const rects = [...{plot}.querySelectorAll(".barlayer .point")]
        .map(p => p.getBoundingClientRect());
      const wide = rects.reduce((a, b) => (a.width > b.width ? a : b));
      return [wide.x + wide.width / 2, wide.y + wide.height / 2];
    }})()""")
    browser.mouse(*where)
    text = browser.wait_for('document.querySelector(".hoverlayer .hovertext")?.textContent',
                            timeout=10)
    assert "payments-eu generation 2" in text and "member joined (by consumer-b)" in text
    assert "consuming again after 5010.0 ms" in text
    assert browser.problems() == []
