"""`kafka-dissect live`: watch Kafka exchanges on a network interface as they happen."""
from __future__ import annotations

import os
import sys

from ..output import make_writer
from ..pipeline import MAX_FRAME, Dissector
from ..session import LEVELS
from ..text_safety import escape
from .common import add_keylog_option, parse_ports

LIVE_FORMATS = ("text", "jsonl")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "live", help="capture from a network interface and show Kafka exchanges as they happen",
        description="Sniff an interface (Linux AF_PACKET through scapy; root or CAP_NET_RAW, no "
                    "libpcap needed) and print each Kafka exchange when its response arrives, or "
                    "as unanswered after --request-timeout. On a terminal a rolling view of "
                    "requests/s, latency percentiles and errors per api stays at the bottom; "
                    "otherwise the same table goes to stderr every --stats-every seconds. Stops "
                    "on Ctrl-C, SIGTERM, --duration or --count with a summary on stderr.")
    p.add_argument("-i", "--interface", required=True, metavar="IFACE",
                   help="network interface to capture on (e.g. eth0, lo)")
    p.add_argument("--port", action="append", metavar="PORT|auto",
                   help="broker port (repeatable; default 9092); 'auto' finds Kafka on any port")
    p.add_argument("--bpf", metavar="EXPR",
                   help="kernel capture filter in tcpdump syntax, instead of the one built from "
                        "--port (needs libpcap or tcpdump to compile it)")
    p.add_argument("-w", "--write", metavar="FILE.pcapng",
                   help="also write every captured packet to a pcapng file")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    p.add_argument("-c", "--count", type=int, metavar="N", help="stop after N packets")
    p.add_argument("--format", choices=LIVE_FORMATS, default="text",
                   help="exchange output format (default text)")
    p.add_argument("--stats-every", type=float, default=10.0, metavar="S",
                   help="statistics window, and how often to print them when stderr is not a "
                        "terminal (default 10; 0 turns the view and the periodic stats off)")
    p.add_argument("--level", choices=LEVELS, default="bodies",
                   help="how deep to decode (as for `read`; default bodies)")
    p.add_argument("--request-timeout", type=float, default=60.0, metavar="S",
                   help="a request without a response after S seconds is printed as unanswered "
                        "(default 60)")
    p.add_argument("--idle-timeout", type=float, default=600.0, metavar="S",
                   help="close connections without packets for S seconds (default 600)")
    p.add_argument("--buffer", type=int, default=32, metavar="MiB",
                   help="kernel socket buffer (default 32 MiB; raise it if packets are dropped)")
    p.add_argument("--max-frame", type=int, default=MAX_FRAME, metavar="BYTES",
                   help="largest Kafka message accepted (default 100 MiB)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve Prometheus metrics (requests, errors, bytes, latency histograms "
                        "per api, broker, client id and topic) on http://ADDR:PORT/metrics "
                        "(0: any free port; needs prometheus-client)")
    p.add_argument("--metrics-addr", default="0.0.0.0", metavar="ADDR",
                   help="address the metrics server listens on (default 0.0.0.0, every interface)")
    p.add_argument("--metrics-max-values", type=int, default=100, metavar="N",
                   help="distinct values kept per metrics label; later ones are reported as "
                        "'other' and counted (default 100)")
    add_keylog_option(p)   # live: each file re-read as clients append to it (may not exist yet)
    p.set_defaults(run=run)


def _check(args) -> None:
    from ..cli import UsageError
    for name in ("duration", "request_timeout", "idle_timeout"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive number of seconds")
    if args.count is not None and args.count <= 0:
        raise UsageError("--count must be a positive number of packets")
    if not args.stats_every >= 0:
        raise UsageError("--stats-every must be 0 or more seconds")
    if args.buffer <= 0:
        raise UsageError("--buffer must be a positive number of MiB")
    if args.metrics_port is not None and not 0 <= args.metrics_port < 65536:
        raise UsageError("--metrics-port must be a port number (0: any free one)")
    if args.metrics_max_values < 1:
        raise UsageError("--metrics-max-values must be 1 or more")


def _metrics(args):
    """The LiveMetrics served on --metrics-port, and its server; (None, None) without it."""
    from ..cli import UsageError
    if args.metrics_port is None:
        return None, None
    try:
        from ..live.metrics import LiveMetrics
        metrics = LiveMetrics(args.metrics_max_values)
    except ImportError as exc:
        raise UsageError(f"--metrics-port needs prometheus-client ({exc.name} is not installed): "
                         "pip install 'kafka-dissector[live]'") from None
    try:
        server = metrics.serve(args.metrics_port, args.metrics_addr)
    except OSError as exc:
        raise UsageError(f"--metrics-port {args.metrics_port}: {exc.strerror or exc}") from None
    host = args.metrics_addr if ":" not in args.metrics_addr else f"[{args.metrics_addr}]"
    print(f"kafka-dissect: metrics on http://{host}:{server.server_port}/metrics",
          file=sys.stderr, flush=True)
    return metrics, server


def _display(stats_every):
    from ..live.view import PeriodicStats, TerminalView
    if not stats_every:
        return None
    if sys.stderr.isatty():
        return TerminalView(sys.stderr, shares_output=sys.stdout.isatty())
    return PeriodicStats(sys.stderr, stats_every)


def _keylogs(args):
    """(KeyLog or None, its followers): the --keylog files (default $SSLKEYLOGFILE), read as
    they grow; a file may appear after the capture starts."""
    from ..cli import UsageError
    from ..tls.keylog import KeyLog, default_paths
    paths = args.keylog or default_paths()
    if not paths:
        return None, []
    from ..tls.crypto import MISSING, available
    if not available():
        raise UsageError(MISSING)
    keylog = KeyLog()
    followers = [keylog.follow(path) for path in paths]
    for follower in followers:
        follower.poll()
    return keylog, followers


def _describe(args, ports, auto) -> str:
    if args.bpf:
        return f"{args.interface}, filter {args.bpf!r}"
    what = [f"port {p}" for p in ports] + (["any port (auto)"] if auto else [])
    return f"{args.interface}, tcp {' or '.join(what)}"


def run(args) -> int:
    from ..capture.writer import PcapngWriter
    from ..cli import UsageError
    from ..live.errors import LiveError
    from ..live.rolling import RollingStats
    from ..live.runner import LiveCapture
    from ..live.sniffer import Sniffer
    from ..live.stop import StopConditions

    _check(args)
    ports, auto = parse_ports(args.port)
    keylog, followers = _keylogs(args)
    # the live output is the table's rows: the bodies' summaries are all it needs of them
    dissector = Dissector(ports, auto=auto, level=args.level, max_frame=args.max_frame,
                          keep_bodies=False, keylog=keylog)
    try:
        sniffer = Sniffer(args.interface, ports=ports, auto=auto, bpf_expr=args.bpf,
                          buffer_bytes=args.buffer << 20)
    except LiveError as exc:
        raise UsageError(str(exc)) from None
    pcap = server = None
    try:
        metrics, server = _metrics(args)
        if args.write:
            try:
                pcap = PcapngWriter(args.write, sniffer.linktype)
            except OSError as exc:
                raise UsageError(f"{args.write}: {exc.strerror or exc}") from None
        label = _describe(args, ports, auto)
        print(f"kafka-dissect: listening on {label}", file=sys.stderr, flush=True)
        capture = LiveCapture(
            sniffer, dissector, make_writer(args.format, sys.stdout), sys.stdout, sys.stderr,
            StopConditions(args.duration, args.count), display=_display(args.stats_every),
            pcap=pcap, pcap_path=args.write, stats=RollingStats(args.stats_every or 10.0),
            idle_timeout=args.idle_timeout, request_timeout=args.request_timeout, label=label,
            metrics=metrics, keylogs=followers)
        capture.run()
    finally:
        sniffer.close()
        if server is not None:
            server.shutdown()
    if capture.output_closed:   # nothing more may reach the closed pipe, not even at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if capture.error:
        print(f"kafka-dissect: error: {escape(capture.error)}", file=sys.stderr)
        return 2
    return 0
