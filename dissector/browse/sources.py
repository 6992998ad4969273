"""Where the browser's exchanges come from, each run in the app's worker thread: capture files
(dissected once, handed over in batches so the list fills while the rest is read), or a live
interface (every exchange as its response arrives)."""
from __future__ import annotations

BATCH = 5000       # exchanges handed to the screen at a time while reading files


def file_feed(paths, ports, auto, max_frame, keylog=None):
    from ..pipeline import dissect
    from ..tls.layer import undecrypted_note

    def feed(app) -> None:
        run = dissect(paths, ports, auto=auto, level="bodies", max_frame=max_frame,
                      keep_bodies=False, keylog=keylog)
        batch = []
        try:
            for ex in run:
                batch.append(ex)
                if len(batch) >= BATCH:
                    app.add_exchanges(batch)
                    batch = []
        except Exception as exc:   # noqa: BLE001 - shown in the status line, never a traceback
            app.source_done(f"error: {type(exc).__name__}: {exc}")
            return
        if batch:
            app.add_exchanges(batch)
        notes = list(run.errors)
        undecrypted = run.dissector.tls.undecrypted
        if undecrypted:
            notes.append(undecrypted_note(undecrypted, keylog is not None))
        from ..capture_survey import hints
        notes += hints(run, paths, ports, auto)
        app.source_done("; ".join(notes))
    return feed


class _Collector:
    """The live loop's output writer and stream at once: exchanges go to the screen, handed
    over when the loop flushes its output (after each batch, at most FLUSH_S late)."""

    def __init__(self, app):
        self.app = app
        self.pending = []

    def write(self, ex) -> None:
        self.pending.append(ex)

    def flush(self) -> None:
        if self.pending:
            self.app.add_exchanges(self.pending)
            self.pending = []

    close = flush


def live_feed(sniffer, dissector, request_timeout, idle_timeout):
    import io

    from ..live.runner import LiveCapture
    from ..live.stop import StopConditions

    class ScreenStop(StopConditions):
        """Stops when the browser closes; signals stay the app's (this runs in a thread)."""

        def install(self) -> None:
            pass

        def restore(self) -> None:
            pass

    def feed(app) -> None:
        stop = ScreenStop()
        app.stop_source = lambda: setattr(stop, "reason", "closed")
        collector = _Collector(app)
        capture = LiveCapture(sniffer, dissector, collector, collector, io.StringIO(), stop,
                              idle_timeout=idle_timeout, request_timeout=request_timeout)
        capture.run()
        collector.close()
        app.source_done(capture.error or "capture stopped")
    return feed
