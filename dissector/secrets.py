"""Secrets in decoded messages, masked unless the user asks for them (--show-secrets).

Captures and what is made of them get shared (bug reports, the HTML report, a pasted `tree`);
credentials must not travel with them. Masked, by default, in every output that shows message
contents (`read --bodies`, `tree` text and JSON, their hex dumps):

- SASL tokens (SaslAuthenticate auth_bytes, and the raw tokens after SaslHandshake v0): the
  PLAIN password, the SCRAM client proof (`p=`) and server signature (`v=`), the OAUTHBEARER
  token (`auth=Bearer ...`); a token of another mechanism (GSSAPI, unknown) entirely. SCRAM's
  first messages (user name, nonces, salt, iterations) carry no secret and stay.
- Delegation tokens: the HMAC and token id of CreateDelegationToken and DescribeDelegationToken
  responses, the HMAC of RenewDelegationToken and ExpireDelegationToken requests.
- AlterUserScramCredentials: the salted password.
- Config values (AlterConfigs, IncrementalAlterConfigs, CreateTopics, DescribeConfigs) that the
  specs' IsSensitive flag marks, or whose name says it holds a secret (SENSITIVE_CONFIG: Kafka's
  PASSWORD-type configs such as ssl.key.password and sasl.jaas.config): the specs have no
  general "sensitive" flag, so the name is the judgement.

A masked field shows MASKED in trees and JSON; in hex dumps its secret bytes show as `**`.
The exchange columns and the pairing never depend on this.
"""
from __future__ import annotations

import re

SENSITIVE_CONFIG = re.compile(r"password|secret|jaas|credential|\.key$")


class _Masked(str):
    """The marker itself: printed bare (not quoted as a capture string would be)."""


MASKED = _Masked("<masked>")

_ALL = "all"        # the whole value is secret
_SASL = "sasl"      # a SASL token: sasl_secret_spans says which bytes
_CONFIG = "config"  # a config entry: its value, when sensitive

# (api key, is request) -> {field: rule or nested {field: ...} for arrays/structs}
RULES = {
    (36, True): {"auth_bytes": _SASL},
    (36, False): {"auth_bytes": _SASL},
    (38, False): {"hmac": _ALL, "token_id": _ALL},
    (39, True): {"hmac": _ALL},
    (40, True): {"hmac": _ALL},
    (41, False): {"tokens": {"hmac": _ALL, "token_id": _ALL}},
    (51, True): {"upsertions": {"salted_password": _ALL}},
    (19, True): {"topics": {"configs": _CONFIG}},
    (19, False): {"topics": {"configs": _CONFIG}},
    (32, False): {"results": {"configs": _CONFIG}},
    (33, True): {"resources": {"configs": _CONFIG}},
    (44, True): {"resources": {"configs": _CONFIG}},
}

_SCRAM_PROOF = re.compile(rb"(?:^|,)p=([^,]*)")
_BEARER = re.compile(rb"auth=Bearer ([^\x01]*)", re.IGNORECASE)


def sasl_secret_spans(token) -> list[tuple[int, int]]:
    """The (start, end) byte ranges of `token` that hold a secret (see the module doc)."""
    t = bytes(token)
    if not t:
        return []
    if t.startswith(b"c=") and (m := _SCRAM_PROOF.search(t)):      # SCRAM client-final
        return [m.span(1)]
    if t.startswith(b"v="):                                          # SCRAM server-final
        end = t.find(b",")
        return [(2, len(t) if end < 0 else end)]
    if m := _BEARER.search(t):                                       # OAUTHBEARER
        return [m.span(1)]
    if t.startswith((b"n,", b"y,", b"p=")) or t.startswith(b"r=") or t.startswith(b"e="):
        return []   # SCRAM client-first (gs2 header), server-first, server error: no secret
    if t.count(b"\x00") == 2:                                        # PLAIN
        return [(t.rindex(b"\x00") + 1, len(t))]
    return [(0, len(t))]                                             # GSSAPI, unknown


def _secret(rule, value) -> list[tuple[int, int]] | bool:
    if rule == _SASL:
        return sasl_secret_spans(value) if value is not None else []
    return value is not None


def _config_sensitive(entry: dict, inherited: bool) -> bool:
    name = entry.get("name")
    return bool(inherited or entry.get("is_sensitive")
                or isinstance(name, str) and SENSITIVE_CONFIG.search(name.lower()))


# -- decoded bodies as JSON (dissector.protocol.jsonify) -------------------------------------------

def mask_json(api_key, is_request: bool, body) -> None:
    """Mask, in place, the secrets of a body in to_json's form."""
    rules = RULES.get((api_key, is_request))
    if rules and isinstance(body, dict):
        _mask_json_struct(rules, body)


def _mask_json_struct(rules: dict, d: dict) -> None:
    for field, rule in rules.items():
        value = d.get(field)
        if value is None:
            continue
        if rule == _CONFIG:
            _mask_json_configs(value, False)
        elif isinstance(rule, dict):
            for elem in value if isinstance(value, list) else [value]:
                if isinstance(elem, dict):
                    _mask_json_struct(rule, elem)
        elif rule == _ALL or rule == _SASL and _json_sasl_secret(value):
            d[field] = MASKED


def _json_sasl_secret(b64: str) -> bool:
    import base64
    return bool(sasl_secret_spans(base64.b64decode(b64)))


def _mask_json_configs(entries, inherited: bool) -> None:
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, dict):
            sensitive = _config_sensitive(e, inherited)
            if sensitive and e.get("value") is not None:
                e["value"] = MASKED
            if e.get("synonyms"):
                _mask_json_configs(e["synonyms"], sensitive)


# -- field trees (dissector.protocol.tree) ---------------------------------------------------------

def mask_tree(api_key, is_request: bool, root) -> list[tuple[int, int]]:
    """Mask, in place, the secret values of a message tree (request_tree/response_tree); return
    the byte ranges in the message that held them, for the hex dump."""
    rules = RULES.get((api_key, is_request))
    spans: list[tuple[int, int]] = []
    if not rules or root is None:
        return spans
    body = next((c for c in root.children if c.name == "body"), None)
    if body is not None:
        _mask_node_struct(rules, body, spans)
    return spans


def _children(node) -> dict:
    return {c.name: c for c in node.children}


def _mask_node_struct(rules: dict, node, spans) -> None:
    fields = _children(node)
    for field, rule in rules.items():
        child = fields.get(field)
        if child is None:
            continue
        if rule == _CONFIG:
            _mask_node_configs(child, False, spans)
        elif isinstance(rule, dict):   # an array's elements are its "[i]" children
            is_array = child.children and child.children[0].name.startswith("[")
            for elem in child.children if is_array else [child]:
                _mask_node_struct(rule, elem, spans)
        else:
            _mask_leaf(child, rule, spans)


def _mask_leaf(node, rule, spans) -> None:
    value = node.value
    if value is None or node.children:
        return
    raw = value.encode() if isinstance(value, str) else bytes(value)
    start = node.offset + node.length - len(raw)   # the value's bytes end the field
    secret = _secret(rule, raw)
    if secret is True:
        secret = [(0, len(raw))]
    if secret:
        spans.extend((start + a, start + b) for a, b in secret)
        node.value = MASKED


def _mask_node_configs(array, inherited: bool, spans) -> None:
    for elem in array.children:
        fields = _children(elem)
        entry = {n: fields[n].value for n in ("name", "is_sensitive") if n in fields}
        sensitive = _config_sensitive(entry, inherited)
        if sensitive and "value" in fields:
            _mask_leaf(fields["value"], _ALL, spans)
        if "synonyms" in fields:
            _mask_node_configs(fields["synonyms"], sensitive, spans)


def masked_bytes(data: bytes, spans) -> list[bool]:
    """Per byte of `data`: whether a span covers it."""
    hidden = [False] * len(data)
    for a, b in spans:
        for i in range(max(a, 0), min(b, len(data))):
            hidden[i] = True
    return hidden
