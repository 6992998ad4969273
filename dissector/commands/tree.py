"""`kafka-dissect tree`: one exchange as a Wireshark-like field tree with hex dumps.

The exchange is chosen by its number in `read` output. Offsets are inside each message, counted
from the first byte after the 4-byte size prefix, as in the hex dump below each tree.
"""
from __future__ import annotations

import json
import sys

from ..cli import UsageError
from ..protocol.names import api_name, error_name
from ..protocol.tree import request_tree, response_tree
from ..secrets import MASKED, mask_tree, masked_bytes, sasl_secret_spans
from ..text_safety import escape
from .common import (add_capture_options, add_keylog_option, open_dissection, report_errors,
                     report_capture_hints)

_VALUE_BYTES = 24   # bytes values longer than this are shown cut, with their length


def add_parser(sub) -> None:
    p = sub.add_parser("tree", help="show one exchange as a field tree with hex dumps",
                       description="Show the request and response of one exchange (its number "
                                   "in `read` output) field by field, each with its offset and "
                                   "length in the message, followed by a hex dump of each message.")
    add_capture_options(p)
    add_keylog_option(p)
    p.add_argument("--exchange", type=int, required=True, metavar="N",
                   help="the exchange number (first column of `read`)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default) or JSON (the trees and the messages as hex)")
    p.add_argument("--show-secrets", action="store_true",
                   help="show SASL credentials, delegation-token HMACs and sensitive config "
                        "values (masked by default, in the tree and the hex dump)")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.exchange < 1:
        raise UsageError("--exchange counts from 1")
    run_, progress = open_dissection(args, "bodies")
    run_.dissector.tls.keep_records = True   # the TLS records of the exchange's messages
    found = None
    try:
        for ex in run_:
            if ex.index == args.exchange:
                found = ex
                break
    finally:
        progress.done()
    if found is None:
        status = report_errors(run_)
        if status:
            return status
        report_capture_hints(run_, args)
        n = run_.exchanges
        raise UsageError(f"no exchange {args.exchange} in the capture (it has {n} exchange"
                         f"{'' if n == 1 else 's'})")
    parts = exchange_trees(found, show_secrets=args.show_secrets)
    if args.format == "json":
        json.dump({"exchange": found.index, "api_key": found.api_key,
                   "api_version": found.api_version, "correlation_id": found.correlation_id,
                   "status": found.status, "tls": _tls_json(found.connection.tls),
                   "messages": [{"direction": d, "packets": [f.first_packet, f.last_packet],
                                 "tls_records": _records_json(found.connection.tls, f),
                                 "hex": _hex(bytes(f.data), hidden),
                                 "tree": _json(t) if t else None}
                                for d, f, t, hidden in parts]}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        write_text(sys.stdout, found, parts)
    return 0


def exchange_trees(ex, show_secrets=False):
    """[(direction, frame, root Node or None, hidden)] for the request and the response that
    exist; unless show_secrets, secrets are masked in the trees and `hidden` (per byte of the
    message: masked in the hex dump) marks their bytes, else hidden is None."""
    out = []
    raw = ex.raw_sasl or ex.api_key is None
    if ex.request is not None:
        tree = None if raw else request_tree(ex.request.data)
        out.append(("request", ex.request, tree, _mask(ex, True, ex.request, tree, show_secrets)))
    if ex.response is not None:
        tree = None
        if not raw:
            tree = response_tree(ex.response.data, ex.api_key, ex.api_version, ex.request_msg)
        out.append(("response", ex.response, tree,
                    _mask(ex, False, ex.response, tree, show_secrets)))
    return out


def _mask(ex, is_request, frame, tree, show_secrets):
    if show_secrets:
        return None
    if ex.raw_sasl:   # the whole message is a SASL token
        spans = sasl_secret_spans(frame.data)
    else:
        spans = mask_tree(ex.api_key, is_request, tree)
    return masked_bytes(bytes(frame.data), spans) if spans else None


def write_text(out, ex, parts) -> None:
    c = ex.connection
    title = "SASL token (raw, after SaslHandshake v0)" if ex.raw_sasl else (
        f"{api_name(ex.api_key)} v{ex.api_version}" if ex.api_key is not None else "unknown")
    out.write(f"Exchange {ex.index}: {title}, correlation id {ex.correlation_id}, {ex.status}\n")
    out.write(f"Connection {c.connection_id}: {c.client_ip}:{c.client_port} \u2192 "
              f"{c.broker_ip}:{c.broker_port}\n")
    for issue in ex.issues:
        out.write(f"Issue: {issue.code} ({issue.severity}) at stream offset "
                  f"{issue.stream_offset}: {escape(issue.detail)}\n")
    tls = c.tls
    if tls is not None:
        out.write(f"TLS: {tls.version_name or '?'}, {tls.cipher_name or '?'}, "
                  f"SNI {escape(tls.sni or '-')}, ALPN {escape(tls.alpn or '-')}\n")
    for direction, frame, tree, hidden in parts:
        out.write(f"\n{direction.capitalize()}: {len(frame.data)} bytes after the size prefix, "
                  f"packets {frame.first_packet}-{frame.last_packet}\n")
        if tls is not None:
            out.write(f"  TLS records: {_records_text(tls, frame)}\n")
        if tree is None:
            out.write("  (no Kafka header: raw bytes)\n")
        else:
            for depth, node in tree.walk():
                out.write(f"{'  ' * (depth + 1)}{_label(node)}\n")
        out.write("\n")
        out.write(hex_dump(bytes(frame.data), hidden))


def _tls_records(tls, frame):
    return tls.records_of(frame.direction, frame.stream_offset, frame.length)


def _records_text(tls, frame) -> str:
    recs = _tls_records(tls, frame)
    if not recs:
        return "(not logged)"
    shown = ", ".join(f"#{seq} ({n} bytes, packets {a}-{b})" for _, n, seq, a, b in recs[:8])
    return shown + (f", \u2026 {len(recs) - 8} more" if len(recs) > 8 else "")


def _tls_json(tls):
    if tls is None:
        return None
    return {"version": tls.version_name, "cipher": tls.cipher_name, "sni": tls.sni,
            "alpn": tls.alpn, "handshake_ms": tls.handshake_ms}


def _records_json(tls, frame):
    if tls is None:
        return None
    return [{"seq": seq, "plaintext_bytes": n, "packets": [a, b]}
            for _, n, seq, a, b in _tls_records(tls, frame)]


def _label(node) -> str:
    where = f"[{node.offset}+{node.length}]"
    if node.children or node.value is None and node.length == 0:
        return f"{node.name} {where}"
    return f"{node.name}: {_value(node.name, node.value)} {where}"


def _value(name, v) -> str:
    if v is None:
        return "null"
    if v is MASKED:
        return MASKED
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        if not b:
            return "(0 bytes)"
        cut = "\u2026" if len(b) > _VALUE_BYTES else ""
        return f"{b[:_VALUE_BYTES].hex()}{cut} ({len(b)} bytes)"
    if isinstance(v, str):   # quoted; a quote inside is \" (its backslash cannot be the text's)
        return '"' + escape(v).replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        if name == "error_code":
            return f"{v} ({error_name(v)})"
        if name in ("request_api_key", "api_key"):
            return f"{v} ({api_name(v)})"
    return str(v)


def hex_dump(b: bytes, hidden=None) -> str:
    """Offset, 16 bytes in hex, printable ASCII: the classic layout. Bytes `hidden` marks (a
    masked secret) show as ** and *."""
    lines = []
    for off in range(0, len(b), 16):
        chunk = b[off:off + 16]
        mask = hidden[off:off + 16] if hidden else [False] * len(chunk)
        cells = ["**" if m else f"{x:02x}" for x, m in zip(chunk, mask)]
        hexes = " ".join(cells[:8]) + "  " + " ".join(cells[8:])
        text = "".join("*" if m else chr(x) if 32 <= x < 127 else "." for x, m in zip(chunk, mask))
        lines.append(f"{off:08x}  {hexes:<48}  {text}\n")
    return "".join(lines)


def _hex(b: bytes, hidden) -> str:
    if not hidden:
        return b.hex()
    return "".join("**" if m else f"{x:02x}" for x, m in zip(b, hidden))


def _json(node) -> dict:
    d = {"name": node.name, "offset": node.offset, "length": node.length}
    if node.children:
        d["children"] = [_json(c) for c in node.children]
    elif node.value is not None:
        v = node.value
        d["value"] = bytes(v).hex() if isinstance(v, (bytes, bytearray, memoryview)) else (
            v if isinstance(v, (int, float, str, bool)) else str(v))
    return d
