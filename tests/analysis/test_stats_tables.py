"""`stats` tables that fit: 80 columns without cutting a name, piped output as wide as its
content, hostile client ids escaped (never markup), and the json / csv / markdown formats."""
import csv
import io
import json

import pytest

from analysis.summary import sections
from dissector.cli import main
from dissector.figures import sig3
from tests.support import ROOT

from . import scenario
from .build import Capture, ms, request_bytes, response_bytes

SHIPPED = [str(ROOT / "captures" / n) for n in ("librdkafka_produce_consume.pcap",
                                                "transactions.pcap")]
HOSTILE = ["[/]evil\x1b[2J", "[bold red]x[/]\x1b]0;title\x07", "back\\slash"]


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    return scenario.write(tmp_path_factory.mktemp("stats") / "scenario.pcap")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """ApiVersions v0 exchanges from three client ids a hostile sender chose."""
    cap = Capture()
    for i, client_id in enumerate(HOSTILE):
        c = cap.connection(client_port=41000 + i, ts=ms(10 * i))
        c.request(ms(10 * i + 1), request_bytes(18, 0, i + 1, client_id=client_id))
        c.response(ms(10 * i + 3), response_bytes(i + 1, b"\x00\x00\x00\x00\x00\x00"))
    return cap.write(tmp_path_factory.mktemp("hostile") / "hostile.pcap")


def _api_names():
    import analysis
    return set(analysis.load(SHIPPED).exchanges["api_name"].dropna().astype(str))


def test_80_columns_fit_and_no_name_is_cut(capsys):
    assert main(["stats", *SHIPPED, "--width", "80"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "\u2026" not in out   # nothing abbreviated with an ellipsis
    # every api name is whole at the start of a row of the latency table (the detail columns
    # made room: "GetTelemetrySubscriptions" is 25 characters)
    table = out[out.index("Latency by api (ms)"):out.index("Latency by api version")]
    firsts = {line.split()[0] for line in table.splitlines()[3:] if line.strip()}
    assert firsts == _api_names()
    header = table.splitlines()[1].split()
    assert header[:3] == ["api", "count", "p50"] and "mean" not in header   # mean left out
    # the slowest exchanges keep the request's packet and leave the response's out, so that
    # client ids fit whole
    slow = out[out.index("Slowest 10"):out.index("Fetch long polls")].splitlines()
    assert slow[1].split()[:4] == ["exchange", "req", "pkt", "api"]
    assert any(" txn-transformer-in " in line for line in slow)
    # the clients: one row each (billing-consumer wrapped after its "-"), the software's
    # stale apis
    clients = out[out.index("Clients (the 40 busiest"):out.index("Client software")]
    assert clients.splitlines()[1].split()[:5] == ["client", "id", "role", "groups", "produces"]
    assert "billing-   consumer  billing" in clients
    software = out[out.index("Client software"):out.index("Producer throughput")]
    assert "confluent-kafka-python" in software and "Fetch v16<v17" in software


def test_wide_terminal_shows_every_column(capsys):
    assert main(["stats", *SHIPPED, "--width", "160"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Latency by api (ms)"):]
    assert table.splitlines()[1].split() == ["api", "count", "mean", "ms", "p50", "ms", "p90",
                                             "ms", "p99", "ms", "p99.9", "ms", "max", "ms"]


def test_piped_output_is_as_wide_as_its_content(capsys):
    # capsys is not a terminal: no width given means nothing wraps and nothing is cut
    assert main(["stats", *SHIPPED]) == 0
    out = capsys.readouterr().out
    slow = out[out.index("Slowest 10"):out.index("Fetch long polls")].splitlines()
    assert slow[1].split()[:4] == ["exchange", "req", "pkt", "resp"]
    assert any("txn-transformer-in" in line for line in slow)   # a client id, whole
    assert "time" in slow[1]   # no column left out


def test_hostile_client_ids_are_escaped_never_markup(hostile, capsys):
    assert main(["stats", str(hostile), "--width", "100"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    for shown in ("[/]evil\\x1b[2J", "[bold red]x[/]\\x1b]0;title\\x07", "back\\\\slash"):
        assert shown in out
    assert main(["stats", str(hostile), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "\\[/\\]evil\\x1b\\[2J" in md and "\x1b" not in md
    assert main(["stats", str(hostile), "--format", "csv"]) == 0
    assert "\x1b" not in capsys.readouterr().out
    assert main(["stats", str(hostile), "--format", "json"]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and text.isascii()
    doc = json.loads(text)
    by_client = next(s for s in doc["sections"] if s["title"] == "Latency by client id (ms)")
    assert {r["client_id"] for r in by_client["rows"]} == set(HOSTILE)   # exact in JSON


def test_json_is_full_precision(capture, capsys):
    assert main(["stats", str(capture), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    import analysis
    expected = sections(analysis.load(capture))
    assert [s["title"] for s in doc["sections"]] == [t for t, _ in expected]
    by_api = next(s for s in doc["sections"] if s["title"] == "Latency by api (ms)")
    produce = next(r for r in by_api["rows"] if r["api_name"] == "Produce")
    assert produce == {"api_name": "Produce", "count": 3, "mean": 5.0, "p50": 4.0, "p90": 8.0,
                       "p99": pytest.approx(8.9), "p99.9": pytest.approx(8.99), "max": 9.0}
    slow = next(s for s in doc["sections"] if s["title"].startswith("Slowest"))
    assert slow["rows"][0]["request_ts"].startswith("2023-11-14T22:13:2")


def test_csv_blocks_read_back(capture, capsys):
    assert main(["stats", str(capture), "--format", "csv"]) == 0
    blocks, block = [], []
    for row in csv.reader(io.StringIO(capsys.readouterr().out)):
        if row:
            block.append(row)
        else:
            blocks.append(block)
            block = []
    titled = {b[0][0]: b[1:] for b in blocks}
    header, *rows = titled["Latency by api (ms)"]
    assert header == ["api_name", "count", "mean", "p50", "p90", "p99", "p99.9", "max"]
    produce = next(r for r in rows if r[0] == "Produce")
    assert float(produce[3]) == 4.0 and produce[1] == "3"


def test_markdown_tables(capture, capsys):
    assert main(["stats", str(capture), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "### Latency by api (ms)" in md
    lines = md.splitlines()
    at = lines.index("### Latency by api (ms)")
    assert lines[at + 2] == "| api | count | mean ms | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms |"
    assert lines[at + 3] == "|---|---:|---:|---:|---:|---:|---:|---:|"
    assert "| Produce | 3 | 5.00 | 4.00 | 8.00 | 8.90 | 8.99 | 9.00 |" in lines


def test_names_wrap_after_separators():
    from analysis.terminal import wrap_name
    assert wrap_name("txn-transformer-in", 15) == "txn-\ntransformer-in"
    assert wrap_name("billing-consumer", 10) == "billing-\nconsumer"
    assert wrap_name("GetTelemetrySubscriptions v0", 20) == "GetTelemetrySubscrip\ntions v0"
    assert wrap_name("short", 10) == "short"


def test_three_significant_figures():
    assert [sig3(v) for v in (0, 0.000123, 0.0123, 0.207, 2.5, 12.34, 99.4, 3003.3, 12_345_678,
                              1.5e9)] == ["0", "0.000", "0.012", "0.207", "2.50", "12.3", "99.4",
                                          "3003", "12.3M", "1.5G"]


def test_every_command_has_a_one_line_help(capsys):
    from importlib import import_module

    from dissector.cli import PLUGIN_HELP
    with pytest.raises(SystemExit):
        main(["--help"])
    listing = capsys.readouterr().out
    assert "(see kafka-dissect" not in listing
    for name, summary in PLUGIN_HELP.items():
        assert summary.split()[0] in listing
        # each plug-in gives its own parser the same text as the listing
        import argparse
        sub = argparse.ArgumentParser().add_subparsers()
        import_module(f"analysis.commands.{name}").add_parser(sub)
        assert sub._choices_actions[0].help == summary


def test_clients_in_every_format_keep_capture_strings_data(capsys):
    """Client ids, topics, groups and software names that are markup and terminal escapes:
    escaped in the text, Markdown and CSV tables, exact (and ASCII) in JSON."""
    from types import SimpleNamespace

    from analysis.commands import stats

    from .hostile_clients import (CONSUMER, GROUP, PRODUCER, SOFTWARE, TOPIC,
                                  tables_of_hostile_clients)
    parts = sections(tables_of_hostile_clients())
    titled = {title.split(" (")[0]: df for title, df in parts}
    assert len(titled["Clients"]) == 2 and len(titled["Client software"]) == 2
    outs = {}
    for fmt in ("text", "markdown", "csv", "json"):
        getattr(stats, f"_{fmt}")(SimpleNamespace(width=80), parts)
        outs[fmt] = capsys.readouterr().out
        assert "\x1b" not in outs[fmt] and "\x07" not in outs[fmt], fmt
    assert max(len(line) for line in outs["text"].splitlines()) <= 80
    flat = outs["text"].replace("\n", "")
    assert "\\x1b[2J" in flat and "<i>x</i>" in flat   # escaped, never read as rich markup
    assert "\\[bold red\\]topic\\[/\\]" in outs["markdown"]
    assert "grp\\|\\*\\_\\`\\<b\\>x\\</b\\>\\x07" in outs["markdown"]
    blocks = outs["csv"].split("\n\n")
    clients = next(b for b in blocks if b.startswith("Clients"))
    rows = list(csv.reader(io.StringIO(clients)))
    assert rows[2][:2] == ["pro<b>ducer</b>", "10.0.0.1"] and rows[3][3] == "grp|*_`<b>x</b>\\x07"
    assert outs["json"].isascii()
    doc = {s["title"].split(" (")[0]: s["rows"] for s in json.loads(outs["json"])["sections"]}
    assert {r["client_id"] for r in doc["Clients"]} == {PRODUCER, CONSUMER}
    consumer = next(r for r in doc["Clients"] if r["client_id"] == CONSUMER)
    assert consumer["groups"] == [GROUP] and consumer["topics_consumed"] == [TOPIC]
    assert {r["software_name"] for r in doc["Client software"]} == {SOFTWARE, None}


def test_the_overview_counts_records_at_every_level():
    """The records the batch headers count at the bodies level are the rows the records level
    decodes (which test_real_captures checks against what the clients produced and fetched); the
    overview says which level counts or decodes them rather than showing a bare 0."""
    import analysis
    from analysis.summary import overview

    def shown(level):
        rows = overview(analysis.load(SHIPPED, level=level))
        return dict(zip(rows["what"], rows["value"]))
    headers, bodies, records = shown("headers"), shown("bodies"), shown("records")
    decoded = int(records["records decoded"])
    assert decoded > 100 and records["records in batches"] == str(decoded)
    assert bodies["records in batches"] == str(decoded)
    assert bodies["records decoded"] == "0 (--level records decodes them)"
    assert headers["records in batches"] == "not read (--level headers)"
    assert headers["records decoded"] == "0"
