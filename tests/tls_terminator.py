"""A TLS terminator for the real-traffic lab: TLS on one loopback port, the broker in the clear on
another, one broker connection per client connection.

    python tests/tls_terminator.py --listen PORT --upstream PORT --cert CERT --key KEY \
        --keylog FILE --map FILE [--tls 1.2|1.3] [--ciphers OPENSSL_CIPHER_LIST]

Python's ssl writes the NSS key log of every session to --keylog (SSLContext.keylog_filename).
--map gets one JSON line per connection: the client's port on the TLS leg and the terminator's
port on the plaintext leg, which is how a test pairs the two legs of a capture one to one.
--tls pins the protocol version; --ciphers picks the TLS 1.2 suites (TLS 1.3 suites are chosen
through OPENSSL_CONF, which Python's ssl cannot set: see tests/tls_lab.py); --no-etm refuses the
encrypt_then_mac extension (RFC 7366) that OpenSSL agrees to for CBC suites by default, so CBC
records are MAC-then-encrypt, as with Java clients (JSSE does not offer the extension). Prints
"ready PORT" on stdout once it listens; stops on SIGTERM or SIGINT.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import ssl
import sys

VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
CHUNK = 1 << 16
OP_NO_ENCRYPT_THEN_MAC = 1 << 19   # OpenSSL's SSL_OP_NO_ENCRYPT_THEN_MAC (not named by ssl)


def server_context(args):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    ctx.keylog_filename = args.keylog
    if args.tls:
        ctx.minimum_version = ctx.maximum_version = VERSIONS[args.tls]
    if args.ciphers:
        ctx.set_ciphers(args.ciphers)
    if args.no_etm:
        ctx.options |= OP_NO_ENCRYPT_THEN_MAC
    return ctx


async def pipe(reader, writer):
    """Copy until end of stream or error, then close the other side too (TLS has no half close
    that every client honours, so either end closing ends the pair)."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        writer.close()


async def serve(args):
    ctx = server_context(args)
    mapping = open(args.map, "a", buffering=1) if args.map else None
    tasks = set()

    async def handle(tls_reader, tls_writer):
        client = tls_writer.get_extra_info("peername")
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", args.upstream)
        except OSError:
            tls_writer.close()
            return
        if mapping is not None:
            ssl_object = tls_writer.get_extra_info("ssl_object")
            mapping.write(json.dumps({
                "client_port": client[1],
                "upstream_port": up_writer.get_extra_info("sockname")[1],
                "version": ssl_object.version(), "cipher": ssl_object.cipher()[0]}) + "\n")
        task = asyncio.gather(pipe(tls_reader, up_writer), pipe(up_reader, tls_writer))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        await task

    server = await asyncio.start_server(handle, "127.0.0.1", args.listen, ssl=ctx,
                                        ssl_handshake_timeout=10)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"ready {server.sockets[0].getsockname()[1]}", flush=True)
    await stop.wait()
    server.close()
    for task in list(tasks):
        task.cancel()
    if mapping is not None:
        mapping.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--upstream", type=int, required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--keylog", required=True)
    ap.add_argument("--map")
    ap.add_argument("--tls", choices=sorted(VERSIONS))
    ap.add_argument("--ciphers")
    ap.add_argument("--no-etm", action="store_true")
    asyncio.run(serve(ap.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
