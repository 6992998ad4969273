"""Damaged TLS: packets lost inside and across records, a capture that starts after the
handshake, a wrong key, a truncated key log. The same TLS capture read whole is the reference;
every exchange that comes out of a damaged one must be one of its, and decryption must go on
after the damage."""
import collections
import struct

import pytest

from dissector.pipeline import dissect

from tests.support import CAPTURES, require_module
from tests.tls.conftest import TLS_PORT

PLAIN = CAPTURES / "codecs.pcap"   # two connections with large Fetch responses


@pytest.fixture(scope="module")
def tls13(tmp_path_factory):
    """(packets, key log path) of codecs.pcap's conversations over TLS 1.3."""
    require_module("cryptography")
    from tests.tls import tlsgen
    d = tmp_path_factory.mktemp("damage")
    keys = d / "keys.txt"
    client, server = tlsgen.contexts(keys, "1.3", None, d)
    wires = [tlsgen.tls_wire(c, client, server) for c in tlsgen.conversations(PLAIN, 9092)]
    return tlsgen.packets(wires, TLS_PORT), keys


def _ports(frame):
    sport, dport = struct.unpack("!HH", frame[34:38])
    return sport, dport, len(frame) - 54


def rows(path, keylog, auto=False):
    run = dissect(path, () if auto else (TLS_PORT,), auto=auto, level="bodies", keylog=keylog)
    out = [(e.connection.client_port, e.api_key, e.api_version, e.correlation_id, e.client_id,
            e.status, e.request.length if e.request else None,
            e.response.length if e.response else None) for e in run]
    return out, run


def write(tmp_path, packets, drop=()):
    from tests.tls import tlsgen
    drop = set(drop)
    path = tmp_path / "cap.pcap"
    tlsgen.write_pcap(path, [p for i, p in enumerate(packets) if i not in drop])
    return path


def busiest(packets):
    """The client port of the connection with the most server payload packets."""
    c = collections.Counter(_ports(f)[1] for _, f in packets
                            if _ports(f)[0] == TLS_PORT and _ports(f)[2])
    return c.most_common(1)[0][0]


def payload_packets(packets, port, from_server):
    want = (TLS_PORT, port) if from_server else (port, TLS_PORT)
    return [i for i, (_, f) in enumerate(packets) if _ports(f)[:2] == want and _ports(f)[2]]


def test_reference_is_clean(tls13, tmp_path):
    packets, keys = tls13
    got, run = rows(write(tmp_path, packets), keys)
    assert got and not run.issues
    assert all(r[5] == "ok" for r in got)


@pytest.mark.parametrize("from_server,count,where", [
    (True, 1, 0.5),     # inside one record: only that record is lost
    (True, 15, 0.33),   # across record headers: resynchronised, sequence number searched for
    (False, 1, 0.5),    # a segment of small records (many requests)
    (False, 3, 0.3),
])
def test_decryption_goes_on_after_a_hole(tls13, tmp_path, from_server, count, where):
    packets, keys = tls13
    ref, _ = rows(write(tmp_path, packets), keys)
    port = busiest(packets)
    idx = payload_packets(packets, port, from_server)
    start = int(len(idx) * where)
    got, run = rows(write(tmp_path, packets, idx[start:start + count]), keys)
    codes = collections.Counter(i.code for i in run.issues)
    assert codes["tcp.gap"] >= 1
    assert not codes["tls.seq_window"] and not codes["tls.bad_record"]
    ok = [r for r in got if r[5] == "ok"]
    assert not collections.Counter(ok) - collections.Counter(ref)   # nothing made up
    mine = [r for r in ref if r[0] == port]
    assert mine[-1] in got                                           # decrypting went on
    if from_server and count == 1:
        assert len([r for r in ok if r[0] == port]) == len(mine) - 1   # one response lost
    others = [r for r in ref if r[0] != port]
    assert collections.Counter(others) == collections.Counter(r for r in got if r[0] != port)


def test_tls13_capture_starting_after_the_handshake(tls13, tmp_path):
    packets, keys = tls13
    ref, _ = rows(write(tmp_path, packets), keys)
    port = busiest(packets)
    first = payload_packets(packets, port, False)
    # everything of that connection before its 3rd client data packet is not captured
    cut = {i for i, (_, f) in enumerate(packets) if port in _ports(f)[:2] and i < first[2]}
    got, run = rows(write(tmp_path, packets, cut), keys)
    codes = collections.Counter(i.code for i in run.issues)
    assert codes["tls.midstream"] == 2   # both directions found their traffic secret
    assert not codes["tls.no_keys"] and not codes["tls.bad_record"]
    mine = [r for r in got if r[0] == port and r[5] == "ok"]
    ref_mine = [r for r in ref if r[0] == port]
    assert mine and not collections.Counter(mine) - collections.Counter(ref_mine)
    assert ref_mine[-1] in mine
    assert len(mine) >= len(ref_mine) - 8


def test_tls13_mid_stream_without_the_secrets(tls13, tmp_path):
    packets, keys = tls13
    port = busiest(packets)
    first = payload_packets(packets, port, False)
    cut = {i for i, (_, f) in enumerate(packets) if port in _ports(f)[:2] and i < first[2]}
    others = "".join(line + "\n" for line in keys.read_text().splitlines()
                     if line.startswith("#"))
    empty = tmp_path / "empty.txt"
    empty.write_text(others)
    got, run = rows(write(tmp_path, packets, cut), empty)
    assert [r for r in got if r[0] == port] == []
    assert any(i.code == "tls.no_keys" and "after the handshake" in i.detail for i in run.issues)


def test_wrong_key(tls13, tmp_path):
    packets, keys = tls13
    lines = []
    for line in keys.read_text().splitlines():
        if line and not line.startswith("#"):
            label, random, secret = line.split()
            secret = ("0" if secret[0] != "0" else "1") + secret[1:]   # one bit off
            line = f"{label} {random} {secret}"
        lines.append(line)
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines) + "\n")
    got, run = rows(write(tmp_path, packets), bad)
    assert got == []
    codes = collections.Counter(i.code for i in run.issues)
    assert codes["tls.bad_record"] > 0 and set(codes) <= {"tls.bad_record"}


def test_truncated_key_log(tls13, tmp_path):
    packets, keys = tls13
    text = keys.read_bytes()
    cut = tmp_path / "cut.txt"
    cut.write_bytes(text[:len(text) * 2 // 3 - 7])   # ends inside a line
    ref, _ = rows(write(tmp_path, packets), keys)
    got, run = rows(write(tmp_path, packets), cut)
    codes = collections.Counter(i.code for i in run.issues)
    assert codes["tls.keylog_malformed"] == 1
    assert codes["tls.no_keys"] >= 1
    ok = [r for r in got if r[5] == "ok"]
    assert ok and not collections.Counter(ok) - collections.Counter(ref)
    # sessions whose application secrets both survived whole decode as with the full key log
    complete = collections.Counter(line.split()[1] for line in cut.read_text().splitlines()[:-1]
                                   if line.split()[0].endswith("TRAFFIC_SECRET_0"))
    whole = {c.client_port for c in run.connections
             if complete[c.tls.client_random.hex()] == 2}
    assert whole and len(whole) < len(run.connections)
    assert (collections.Counter(r for r in ref if r[0] in whole)
            == collections.Counter(r for r in got if r[0] in whole))


def test_port_auto_with_keys_finds_tls(tls13, tmp_path):
    packets, keys = tls13
    ref, _ = rows(write(tmp_path, packets), keys)
    got, run = rows(write(tmp_path, packets), keys, auto=True)
    assert collections.Counter(got) == collections.Counter(ref)


def _made(tmp_path, version, mss=None):
    """(packets, key log path, wires) of codecs.pcap's conversations over TLS `version`."""
    require_module("cryptography")
    from tests.tls import tlsgen
    keys = tmp_path / "keys.txt"
    client, server = tlsgen.contexts(keys, version, None, tmp_path)
    wires = [tlsgen.tls_wire(c, client, server) for c in tlsgen.conversations(PLAIN, 9092)]
    return tlsgen.packets(wires, TLS_PORT, mss=mss or tlsgen.MSS), keys, wires


def _client_ports(packets):
    return {_ports(f)[0] for _, f in packets if _ports(f)[1] == TLS_PORT}


def _whole_and_without(tmp_path, packets, keys, lost):
    """The rows of the whole capture, and the rows and run of the capture without `lost`."""
    want, _ = rows(write(tmp_path, packets), keys)
    (tmp_path / "lost").mkdir()
    got, run = rows(write(tmp_path / "lost", packets, lost), keys)
    return want, got, run


def _each(packets, from_server, k):
    """The index of each connection's k-th data packet from one side."""
    return {payload_packets(packets, port, from_server)[k] for port in _client_ports(packets)}


@pytest.mark.parametrize("client_syn", [True, False])
def test_first_data_out_of_order(tmp_path, client_syn):
    """Each connection's first client segments swapped (a 200-byte MSS: the ClientHello's second
    piece, mid-record, comes first): the stream's start still decides TLS once it arrives, and
    everything is decrypted as in order. Without the client's SYN (its stream's start known
    from the SYN-ACK) the piece that comes first is joined mid-stream: still TLS, nothing of
    it framed as Kafka, and the application data still opened (by trial)."""
    packets, keys, wires = _made(tmp_path, "1.3", mss=200)
    swapped = list(packets)
    for port in _client_ports(packets):
        first, second = payload_packets(packets, port, from_server=False)[:2]
        assert not 20 <= packets[second][1][54] <= 24   # not a record's first byte
        (t1, f1), (t2, f2) = packets[first], packets[second]
        swapped[first], swapped[second] = (t1, f2), (t2, f1)
    syns = set() if client_syn else {i for i, (_, f) in enumerate(packets)
                                     if _ports(f)[1] == TLS_PORT and f[47] & 0x12 == 0x02}
    assert client_syn or len(syns) == len(wires)
    want, run = rows(write(tmp_path, packets), keys)
    (tmp_path / "swapped").mkdir()
    got, run2 = rows(write(tmp_path / "swapped", swapped, syns), keys)
    assert run2.dissector.tls.connections == run.dissector.tls.connections == len(wires)
    assert want and got == want
    if not client_syn:   # the ClientHello's first piece comes before the stream's start: the
        # application data decrypted with the secrets found by trial
        assert {i.code for i in run2.issues} <= {"tls.no_keys", "tls.midstream", "tls.resync"}


@pytest.mark.parametrize("version", ["1.3", "1.2"])
def test_without_its_client_hello(tmp_path, version):
    """A capture that lost each connection's ClientHello (one packet) but saw the rest: every
    exchange is answered, as in the whole capture (all 70 were left unanswered in TLS 1.3,
    none decrypted in TLS 1.2). TLS 1.3: the client's application data opens by trial with a
    traffic secret of the key log, and its client random is still tried on the server's,
    which had used up its own tries on handshake records. TLS 1.2: the key log's master
    secrets, with the ServerHello's random, are tried on the first protected record."""
    packets, keys, wires = _made(tmp_path, version)
    hellos = _each(packets, False, 0)
    assert all(packets[i][1][54] == 0x16 for i in hellos) and len(hellos) == len(wires)
    want, got, run = _whole_and_without(tmp_path, packets, keys, hellos)
    assert len(want) == 70 and got == want
    codes = collections.Counter(i.code for i in run.issues)
    assert codes["tcp.gap"] == len(wires)
    if version == "1.3":   # each direction by trial; the handshake stays undecrypted
        assert codes["tls.midstream"] == 2 * len(wires) and codes["tls.no_keys"] == len(wires)
        assert set(codes) == {"tls.midstream", "tls.no_keys", "tcp.gap"}
        assert all("before the application data a key log secret opened" in i.detail
                   for i in run.issues if i.code == "tls.no_keys")
    else:   # the master secret opens the whole connection from its Finished on
        assert codes["tls.midstream"] == len(wires) and set(codes) == {"tls.midstream",
                                                                       "tcp.gap"}


@pytest.mark.parametrize("version", ["1.3", "1.2"])
def test_without_its_server_hello(tmp_path, version):
    """A capture that lost the server's first data packet (its ServerHello, and the rest of
    its flight that fitted) on each connection. TLS 1.3: once the server's records show the
    ServerHello will not come, neither direction waits for it and the client random's traffic
    secrets open both (70 exchanges, as in the whole capture; none before). TLS 1.2: the
    master secret needs the server's random, so nothing opens, and the issue says why (it
    said the key log had no line for the client random)."""
    packets, keys, wires = _made(tmp_path, version)
    hellos = _each(packets, True, 0)
    assert all(packets[i][1][54:56] == b"\x16\x03" for i in hellos) and len(hellos) == len(wires)
    want, got, run = _whole_and_without(tmp_path, packets, keys, hellos)
    codes = collections.Counter(i.code for i in run.issues)
    assert codes["tcp.gap"] == len(wires) and len(want) == 70
    if version == "1.3":
        assert got == want
        assert codes["tls.midstream"] == 2 * len(wires)
        assert all("without its ServerHello" in i.detail
                   for i in run.issues if i.code == "tls.midstream")
    else:
        assert got == [] and codes["tls.no_keys"] == len(wires)
    assert all(i.detail.endswith("the ServerHello is not in the capture")
               for i in run.issues if i.code == "tls.no_keys")


@pytest.mark.parametrize("version", ["1.3", "1.2"])
@pytest.mark.parametrize("from_server", [False, True])
def test_without_the_finished(tmp_path, version, from_server):
    """Each connection's second data packet of one side lost: the client's (TLS 1.2: its
    ClientKeyExchange, ChangeCipherSpec and Finished; TLS 1.3: its Finished, the first request
    behind it) or the server's (TLS 1.2: its ChangeCipherSpec and Finished). Decryption goes on
    with the next keys: the application keys after the hole (TLS 1.3), the key block from the
    first application data (TLS 1.2); at most the exchange in the lost packet is lost (none
    was decrypted on three of the four before)."""
    packets, keys, wires = _made(tmp_path, version)
    lost = _each(packets, from_server, 1)
    want, got, run = _whole_and_without(tmp_path, packets, keys, lost)
    ok = [r for r in got if r[5] == "ok"]
    assert len(ok) >= len(want) - len(wires)
    assert not collections.Counter(ok) - collections.Counter(want)
    assert not {i.code for i in run.issues} & {"tls.no_keys", "tls.seq_window", "tls.bad_record"}


@pytest.mark.parametrize("version", ["1.3", "1.2"])
def test_a_lost_request_costs_its_exchange_only(tmp_path, version):
    """Each connection's first request after the handshake lost (one packet, one record): the
    next request, alone in its record, is decrypted as soon as it comes (its record
    authenticates, proving where it starts) and pairs with its response. It used to wait for
    a second record header, at worst the stream's end, and its response went unpaired (37 of
    70 exchanges answered, against 57)."""
    packets, keys, wires = _made(tmp_path, version)
    lost = _each(packets, False, 2)
    want, got, run = _whole_and_without(tmp_path, packets, keys, lost)
    ok = [r for r in got if r[5] == "ok"]
    assert len(ok) == len(want) - len(wires)   # the first request of each: ApiVersions
    assert not collections.Counter(ok) - collections.Counter(want)
    assert {r[1] for r in want if r not in ok} == {18}
    assert {i.code for i in run.issues} == {"tcp.gap"}


def test_resync_candidates_tried_a_bounded_number_of_times():
    """Hostile bytes after a hole can make every offset a record header whose chain the data
    has not refuted yet: each is tried once, RESYNC_TRIES of them a loss of sync, over
    RESYNC_SEQS sequence numbers, whatever the bytes."""
    from dissector.budget import Budget
    from dissector.tls import stream as S

    class Counting:
        opened = 0

        def open(self, seq, rtype, rver, body):
            Counting.opened += 1
            return None

    s = S.TlsStream(None, 0, None, Budget())
    s.cipher = Counting()
    record = bytes([23, 3, 3, 0, 20]) + bytes(20)
    for loss in range(2):
        s._lose(S.WARNING, 0, 1)
        for at in range(100):
            assert not s._opens(record, 0, at)
            assert not s._opens(record, 0, at)   # the same candidate again: not tried
        assert Counting.opened == (loss + 1) * S.RESYNC_TRIES * S.RESYNC_SEQS
