"""`kafka-dissect tree`: one exchange of a constructed capture, fields with offsets and hex."""
import json
import struct

from dissector.cli import main
from tests.analysis.build import Capture, ms, request_bytes, response_bytes

from .test_special_cases import SUBSCRIPTION, join_group_v5_request, s16


def capture(tmp_path):
    cap = Capture()
    c = cap.connection(broker_port=9092, ts=ms(0))
    # 1: Metadata v1 request for topic "orders"; response: no brokers, controller 1, one topic
    #    (count 1: error 3, "orders", internal false, no partitions)
    c.request(ms(10), request_bytes(3, 1, 7, struct.pack(">i", 1) + s16("orders"), client_id="cli"))
    c.response(ms(12), response_bytes(7, struct.pack(">iiih", 0, 1, 1, 3) + s16("orders")
                                      + struct.pack(">?i", False, 0)))
    # 2: JoinGroup v5 with a consumer subscription; no response
    c.request(ms(20), request_bytes(11, 5, 8, join_group_v5_request("consumer", SUBSCRIPTION)))
    return cap.write(tmp_path / "tree.pcap")


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def leaves(node):
    kids = node.get("children", [])
    if not kids:
        yield node
    for k in kids:
        yield from leaves(k)


def test_tree_json_fields_offsets_and_hex(capsys, tmp_path):
    code, out, err = run(capsys, "tree", capture(tmp_path), "--exchange", 1, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["api_key"], doc["api_version"], doc["correlation_id"]) == (3, 1, 7)
    req, resp = doc["messages"]
    assert bytes.fromhex(req["hex"]) == request_bytes(3, 1, 7, struct.pack(">i", 1) + s16("orders"),
                                                      client_id="cli")[4:]
    header, body = req["tree"]["children"]
    # header v1: api key, version, correlation id, client id (2 + 3 bytes) at offsets 0, 2, 4, 8
    assert [(n["name"], n["offset"], n["length"], n.get("value")) for n in header["children"]] == [
        ("request_api_key", 0, 2, 3), ("request_api_version", 2, 2, 1),
        ("correlation_id", 4, 4, 7), ("client_id", 8, 5, "cli")]
    topics = body["children"][0]
    name = topics["children"][0]["children"][0]
    assert (topics["offset"], name["name"], name["offset"], name["length"], name["value"]) == (
        13, "name", 17, 8, "orders")
    for tree, raw in ((req["tree"], req["hex"]), (resp["tree"], resp["hex"])):
        pos = 0
        for leaf in leaves(tree):   # leaves tile the message in order
            assert leaf["offset"] >= pos
            pos = leaf["offset"] + leaf["length"]
        assert pos == len(bytes.fromhex(raw))
        assert not [n for n in leaves(tree) if n["name"] in ("malformed", "trailing_bytes")]
    err_node = [n for n in leaves(resp["tree"]) if n["name"] == "error_code"][0]
    assert (err_node["offset"], err_node["value"]) == (4 + 12, 3)


def test_tree_text_shows_names_offsets_and_hex_dump(capsys, tmp_path):
    code, out, _ = run(capsys, "tree", capture(tmp_path), "--exchange", "1")
    assert code == 0
    assert "Exchange 1: Metadata v1, correlation id 7, ok" in out
    assert "request_api_key: 3 (Metadata) [0+2]" in out
    assert "error_code: 3 (UNKNOWN_TOPIC_OR_PARTITION) [16+2]" in out
    # the request's hex dump: 16 bytes a line, ASCII at the right
    assert "00000000  00 03 00 01 00 00 00 07  00 03 63 6c 69 00 00 00  ..........cli..." in out


def test_tree_shows_embedded_consumer_subscription(capsys, tmp_path):
    code, out, _ = run(capsys, "tree", capture(tmp_path), "--exchange", 2, "--format", "json")
    assert code == 0
    (req,) = json.loads(out)["messages"]   # unanswered: the request alone
    raw = bytes.fromhex(req["hex"])
    meta = [n for n in _walk(req["tree"]) if n["name"] == "metadata"][0]
    version, sub = meta["children"]
    # the subscription's bytes sit at the end of the metadata field, after its int32 length
    assert raw[version["offset"]:version["offset"] + 2] == SUBSCRIPTION[:2]
    assert sub["name"] == "consumer_protocol_subscription"
    assert raw[sub["offset"]:sub["offset"] + sub["length"]] == SUBSCRIPTION[2:]
    topics = [n["value"] for n in sub["children"][0]["children"]]
    assert topics == ["orders", "pay"]


def _walk(node):
    yield node
    for c in node.get("children", []):
        yield from _walk(c)


def test_tree_unknown_exchange_is_a_usage_error(capsys, tmp_path):
    path = capture(tmp_path)
    code, out, _ = run(capsys, "read", path, "--format", "csv")
    n = out.count("\n") - 1
    code, _, err = run(capsys, "tree", path, "--exchange", 9)
    assert code == 2 and f"no exchange 9 in the capture (it has {n} exchanges)" in err


def test_tree_of_a_raw_sasl_token_exchange_is_hex_only(capsys, tmp_path):
    cap = Capture()
    c = cap.connection(broker_port=19094, ts=ms(0))
    c.request(ms(10), request_bytes(17, 0, 1, s16("SCRAM-SHA-512")))
    c.response(ms(11), response_bytes(1, struct.pack(">hi", 0, 1) + s16("SCRAM-SHA-512")))
    token = b"n,,n=user,r=abc"
    c.request(ms(20), struct.pack(">i", len(token)) + token)
    c.response(ms(21), struct.pack(">i", 5) + b"r=abc")
    path = cap.write(tmp_path / "sasl.pcap")
    code, out, _ = run(capsys, "tree", path, "--exchange", 2, "--port", 19094)
    assert code == 0
    assert "SASL token (raw, after SaslHandshake v0)" in out
    assert out.count("(no Kafka header: raw bytes)") == 2
    assert "00000000  6e 2c 2c 6e 3d 75 73 65  72 2c 72 3d 61 62 63     n,,n=user,r=abc" in out
