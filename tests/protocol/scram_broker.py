"""A minimal Kafka 0.10.0-era broker on loopback for one job: a real client (kafka-python)
authenticating with SCRAM-SHA-512 (or PLAIN, or OAUTHBEARER) over SaslHandshake v0, so the raw
SASL tokens on the wire are written by a real client; with authenticate=True it offers
SaslHandshake v1 and SaslAuthenticate v0-1 instead, and the client's tokens travel in those. The server side of SCRAM follows RFC 5802 / RFC 7677. Responses are
encoded by kafka-python's message classes. It also answers the client's first ApiVersions request
the way Kafka answers an unsupported version: a v0-shaped body with error 35."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import struct
import threading

USER, PASSWORD = "alice", "pencil"
BEARER = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.c2VjcmV0LXNpZ25hdHVyZQ"   # an OAUTHBEARER token
ITERATIONS = 4096
# (api key, min, max) offered: ApiVersions, SaslHandshake v0 only (raw tokens), Metadata v0-1
OFFERED = ((18, 0, 0), (17, 0, 0), (3, 0, 1))
# ... or SaslHandshake v1 and SaslAuthenticate v0-1 (tokens inside SaslAuthenticate)
OFFERED_AUTHENTICATE = ((18, 0, 0), (17, 0, 1), (36, 0, 1), (3, 0, 1))


def list_topics(port, mechanism):
    """The real client's side: a kafka-python consumer (client id sasl-client) authenticates to
    127.0.0.1:port with `mechanism` as USER/PASSWORD (or with BEARER), lists the topics and
    closes."""
    from kafka import KafkaConsumer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Token(AbstractTokenProvider):
        def token(self):
            return BEARER

        def extensions(self):
            return {}

    consumer = KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{port}", client_id="sasl-client",
        security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
        sasl_plain_username=USER, sasl_plain_password=PASSWORD,
        sasl_oauth_token_provider=Token(), request_timeout_ms=5000)
    try:
        return consumer.topics()
    finally:
        consumer.close()


def _h(data):
    return hashlib.sha512(data).digest()


def _hmac(key, data):
    return hmac.new(key, data, hashlib.sha512).digest()


class Scram:
    """The server side of one SCRAM-SHA-512 exchange."""

    def __init__(self):
        self.salt = os.urandom(16)
        salted = hashlib.pbkdf2_hmac("sha512", PASSWORD.encode(), self.salt, ITERATIONS)
        self.stored_key = _h(_hmac(salted, b"Client Key"))
        self.server_key = _hmac(salted, b"Server Key")
        self.first_bare = self.server_first = None
        self.ok = False

    def step(self, token: bytes) -> bytes:
        text = token.decode()
        if self.server_first is None:                      # client-first: "n,,n=user,r=nonce"
            self.first_bare = text.split(",", 2)[2]
            attrs = dict(a.split("=", 1) for a in self.first_bare.split(","))
            assert attrs["n"] == USER
            nonce = attrs["r"] + base64.b64encode(os.urandom(12)).decode()
            self.server_first = (f"r={nonce},s={base64.b64encode(self.salt).decode()},"
                                 f"i={ITERATIONS}")
            return self.server_first.encode()
        without_proof, proof = text.rsplit(",p=", 1)      # client-final
        auth = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        signature = _hmac(self.stored_key, auth)
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature))
        self.ok = _h(client_key) == self.stored_key
        if not self.ok:
            return b"e=invalid-proof"
        return b"v=" + base64.b64encode(_hmac(self.server_key, auth))


class Plain:
    """PLAIN (RFC 4616): one token, authzid NUL authcid NUL password; an empty answer."""

    def __init__(self):
        self.ok = False

    def step(self, token: bytes) -> bytes:
        self.ok = token.split(b"\0")[1:] == [USER.encode(), PASSWORD.encode()]
        return b""


class OAuthBearer:
    """OAUTHBEARER (RFC 7628): one client response holding auth=Bearer <token>."""

    def __init__(self):
        self.ok = False

    def step(self, token: bytes) -> bytes:
        self.ok = f"auth=Bearer {BEARER}\x01".encode() in token
        return b""


MECHANISMS = {"SCRAM-SHA-512": Scram, "PLAIN": Plain, "OAUTHBEARER": OAuthBearer}


class Broker:
    """Serves connections on a thread each until closed; `port` is the listening port."""

    def __init__(self, mechanism="SCRAM-SHA-512", authenticate=False):
        self.mechanism = mechanism
        self.offered = OFFERED_AUTHENTICATE if authenticate else OFFERED
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.authenticated = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]

    def __enter__(self):
        self._threads[0].start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(5)
        self.sock.close()
        return False

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn):
        conn.settimeout(0.2)
        buf = b""
        scram = None
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                    size = struct.unpack(">i", buf[:4])[0]
                    msg, buf = buf[4:4 + size], buf[4 + size:]
                    if scram is not None and not scram.ok and self.offered is OFFERED:   # raw
                        reply = scram.step(msg)
                        if scram.ok:
                            self.authenticated += 1
                    else:
                        reply, scram = self._answer(msg, scram)
                    conn.sendall(struct.pack(">i", len(reply)) + reply)

    def _answer(self, msg, scram):
        from kafka.protocol.metadata import MetadataResponse
        from kafka.protocol.sasl import SaslHandshakeResponse
        api_key, version, corr = struct.unpack(">hhi", msg[:8])
        head = struct.pack(">i", corr)
        if api_key == 18:
            if version > 0:   # Kafka's answer to an unsupported version: v0 body, error 35
                return head + struct.pack(">hihhh", 35, 1, 18, 0, 0), scram
            body = struct.pack(">hi", 0, len(self.offered)) + b"".join(
                struct.pack(">hhh", *o) for o in self.offered)
            return head + body, scram
        if api_key == 17:
            resp = SaslHandshakeResponse(version=version, error_code=0,
                                         mechanisms=[self.mechanism])
            return head + bytes(resp.encode(version=version)), MECHANISMS[self.mechanism]()
        if api_key == 36:   # SaslAuthenticate v0-1: header v1, then auth_bytes (int32 length)
            from kafka.protocol.sasl import SaslAuthenticateResponse
            (n,) = struct.unpack_from(">h", msg, 8)
            (size,) = struct.unpack_from(">i", msg, 10 + n)
            reply = scram.step(msg[14 + n:14 + n + size])
            if scram.ok:
                self.authenticated += 1
            fields = dict(error_code=0, error_message=None, auth_bytes=reply)
            if version >= 1:
                fields["session_lifetime_ms"] = 0
            resp = SaslAuthenticateResponse(version=version, **fields)
            return head + bytes(resp.encode(version=version)), scram
        if api_key == 3:
            broker = MetadataResponse.MetadataResponseBroker(
                node_id=0, host="127.0.0.1", port=self.port, rack=None)
            resp = MetadataResponse(version=version, brokers=[broker], controller_id=0, topics=[])
            return head + bytes(resp.encode(version=version)), scram
        raise AssertionError(f"unexpected api key {api_key}")
