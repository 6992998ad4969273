"""`kafka-dissect browse`: captures (or a live interface) in a terminal browser with Wireshark's
three panes: the exchange list, the selected exchange's field tree, its bytes."""
from __future__ import annotations

import os
import sys

from ..pipeline import MAX_FRAME
from .common import add_keylog_option, check_captures, keylog_from, parse_ports


def add_parser(sub) -> None:
    p = sub.add_parser(
        "browse", help="browse exchanges, field trees and bytes in a terminal user interface",
        description="A terminal browser in Wireshark's three panes: the exchange list (the "
                    "`read` columns, sortable, coloured by status, with a filter box taking the "
                    "--filter language), the selected exchange's request and response as field "
                    "trees, and the message bytes with the selected field highlighted. Keyboard "
                    "driven (/ filter, s sort, r reverse, Enter or Tab to the tree, Esc back, q "
                    "quit); works in any terminal, over SSH too.")
    p.add_argument("captures", nargs="*", metavar="CAPTURE",
                   help="pcap or pcapng files (optionally gzip-compressed), read as one capture")
    p.add_argument("--live", action="store_true",
                   help="capture from --interface instead of reading files (root or CAP_NET_RAW)")
    p.add_argument("-i", "--interface", metavar="IFACE", help="interface for --live")
    p.add_argument("--port", action="append", metavar="PORT|auto",
                   help="broker port (repeatable; default 9092); 'auto' finds Kafka on any port")
    p.add_argument("--max-frame", type=int, default=MAX_FRAME, metavar="BYTES",
                   help="largest Kafka message accepted (default 100 MiB)")
    add_keylog_option(p)
    p.add_argument("--show-secrets", action="store_true",
                   help="show SASL credentials, tokens and sensitive config values (masked by "
                        "default, in the tree and the bytes)")
    p.add_argument("--request-timeout", type=float, default=60.0, metavar="S",
                   help="with --live: a request unanswered after S seconds is listed as such")
    p.set_defaults(run=run)


def make_app(args):
    """The BrowseApp for the parsed arguments (UsageError for what cannot work)."""
    from ..cli import UsageError
    try:
        from ..browse.app import BrowseApp
    except ImportError as exc:
        raise UsageError(f"browse needs Textual ({exc.name} is not installed): "
                         "pip install 'kafka-dissector[tui]'") from None
    from ..browse.sources import file_feed, live_feed
    ports, auto = parse_ports(args.port)
    keylog = keylog_from(args)
    if args.live:
        if args.captures or not args.interface:
            raise UsageError("browse --live takes -i IFACE and no capture files")
        from ..live.errors import LiveError
        from ..live.sniffer import Sniffer
        from ..pipeline import Dissector
        try:
            sniffer = Sniffer(args.interface, ports=ports, auto=auto)
        except LiveError as exc:
            raise UsageError(str(exc)) from None
        dissector = Dissector(ports, auto=auto, level="bodies", max_frame=args.max_frame,
                              keep_bodies=False, keylog=keylog)
        app = BrowseApp(live_feed(sniffer, dissector, args.request_timeout, 600.0),
                        f"live on {args.interface}", args.show_secrets)
        app.close_source = sniffer.close
        return app
    if not args.captures:
        raise UsageError("browse needs capture files, or --live -i IFACE")
    check_captures(args.captures, stdin=False)
    name = ", ".join(os.path.basename(p) for p in args.captures)
    return BrowseApp(file_feed(args.captures, ports, auto, args.max_frame, keylog), name,
                     args.show_secrets)


def run(args) -> int:
    from ..cli import UsageError
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("browse needs a terminal (for a file or a pipe: read, tree or stats)")
    app = make_app(args)
    try:
        app.run()
    finally:
        app.stop_source()
        app.source_finished.wait(2.0)   # the capture loop notices within its poll interval
        app.close_source()
    return 0
