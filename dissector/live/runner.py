"""The live capture loop: packets from a source into the same Dissector the file path uses.

Every packet taken off the socket is numbered, written to the pcapng file (when asked) and fed to
the dissector in that order, so reading the file back gives the same exchanges. Completed
exchanges are written out every FLUSH_S seconds. Once a second, connections idle for too long
are closed and requests waiting too long for an answer become `unanswered`, so memory stays flat
on runs of hours. Stopping, for whatever reason, flushes the in-flight state, prints the summary
and closes the file.
"""
from __future__ import annotations

import shutil
import time
from collections import Counter, deque

from ..text_safety import escape
from ..tls.layer import undecrypted_note

from .rolling import RollingStats
from .view import clock, fit_words, format_rows

POLL_S = 0.1          # longest wait for packets before looking at the clock and the stop flag
FLUSH_S = 0.1         # exchanges are written at most this late
HOUSEKEEPING_S = 1.0  # expiry and bookkeeping period
# With key logs followed, how long a packet waits before it is fed: a TLS 1.3 server logs the
# client's traffic secret only once it has read the client's Finished, which often arrives in the
# same segment as the first request, so the key line lands just after the packets it opens.
KEYLOG_LAG_S = 0.2


class LiveCapture:
    """Drive `dissector` from `source` until `stop` says so.

    source: .read(timeout) -> [(ts_ns, data, wire_len)], .linktype, .update_kernel_stats(),
    .kernel_packets, .kernel_drops (closing it is the caller's). writer: an output writer on `out`.
    display: a view.TerminalView or view.PeriodicStats, or None. pcap: a PcapngWriter (written
    to pcap_path) or None. metrics: a metrics.LiveMetrics fed every exchange, or None.
    keylogs: followers of key log files (dissector.tls.keylog.Follower) feeding the dissector's
    KeyLog: packets then wait KEYLOG_LAG_S, and the files are read just before they are fed, so
    a session's keys, appended as its handshake ends, are there when its records are decrypted.
    """

    def __init__(self, source, dissector, writer, out, err, stop, *, display=None, pcap=None,
                 pcap_path=None, stats=None, idle_timeout=600.0, request_timeout=60.0, label="",
                 metrics=None, keylogs=()):
        self.source = source
        self.dissector = dissector
        self.writer = writer
        self.out = out
        self.err = err
        self.stop = stop
        self.display = display
        self.pcap = pcap
        self.pcap_path = pcap_path
        self.stats = stats or RollingStats()
        self.idle_ns = int(idle_timeout * 1e9)
        self.request_timeout_ns = int(request_timeout * 1e9)
        self.label = label
        self.metrics = metrics
        self.keylogs = list(keylogs)
        self._waiting = deque()   # (arrival, packet) waiting for their keys (see KEYLOG_LAG_S)
        self.packets = 0
        self.issue_codes = Counter()
        self.output_closed = False
        self.error = None

    def run(self) -> None:
        """Capture until a stop condition; `error` says why when the capture itself failed."""
        self.stop.install()
        try:
            try:
                self._loop()
            except OSError as exc:   # the interface went away, the disk filled up, ...
                self.error = f"capture failed: {exc.strerror or exc}"
                self.stop.reason = self.stop.reason or "error"
            finally:
                self._finish()
        finally:
            self.stop.restore()

    def _loop(self) -> None:
        d = self.dissector
        stop = self.stop
        next_flush = next_housekeeping = 0.0
        while not stop.should_stop():
            batch = self.source.read(stop.remaining(POLL_S))
            self._feed(self._with_keys(batch) if self.keylogs else batch)
            now = time.monotonic()
            if d.output and now >= next_flush:
                self._write_exchanges()
                next_flush = now + FLUSH_S
            if now >= next_housekeeping:
                self._housekeeping()
                next_housekeeping = now + HOUSEKEEPING_S
            if self.display is not None and self.display.due():
                self.source.update_kernel_stats()
                self.display.show(self._view_lines())

    def _feed(self, batch) -> None:
        feed = self.dissector.feed
        linktype = self.source.linktype
        pcap = self.pcap
        for ts, data, wire_len in batch:
            self.packets += 1
            if pcap is not None:
                pcap.write(ts, data, wire_len)
            feed(self.packets, ts, linktype, data)
            if self.stop.count_reached(self.packets):
                break

    def _with_keys(self, batch, last=False):
        """The packets that have waited KEYLOG_LAG_S (all of them when `last`), after reading
        what the key logs gained."""
        now = time.monotonic()
        waiting = self._waiting
        waiting.extend((now, packet) for packet in batch)
        for follower in self.keylogs:
            follower.poll()
        due = now if last else now - KEYLOG_LAG_S
        ready = []
        while waiting and waiting[0][0] <= due:
            ready.append(waiting.popleft()[1])
        return ready

    def _housekeeping(self) -> None:
        d = self.dissector
        now_ns = time.time_ns()
        d.expire(now_ns, self.idle_ns)
        d.expire_requests(now_ns, self.request_timeout_ns)
        self._write_exchanges()
        self._collect()

    def _collect(self) -> None:
        """Count and drop what the dissector accumulates for the file path's tables."""
        d = self.dissector
        d.connections.clear()
        if self.metrics is not None:
            self.source.update_kernel_stats()
            self.metrics.count_packets(self.packets, self.source.kernel_drops)
        for issue in d.issues:
            self.issue_codes[issue.code] += 1
        d.issues.clear()

    def _write_exchanges(self) -> None:
        out = self.dissector.output
        if not out:
            return
        if self.display is not None:
            self.display.before_output()
        write = self.writer.write
        add = self.stats.add
        count = self.metrics.add if self.metrics is not None else None
        codes = self.issue_codes
        while out:
            ex = out.popleft()
            add(ex)
            if count is not None:
                count(ex)
            for issue in ex.issues:
                codes[issue.code] += 1
            if not self.output_closed:
                try:
                    write(ex)
                except BrokenPipeError:   # the reader went away (`| head`): stop cleanly
                    self._output_gone()
        if not self.output_closed:
            try:
                self.out.flush()
            except BrokenPipeError:
                self._output_gone()
        if self.display is not None:
            self.display.after_output()

    def _output_gone(self) -> None:
        self.output_closed = True
        self.stop.reason = self.stop.reason or "output closed"

    def _finish(self) -> None:
        if self._waiting and self.stop.reason != "count":
            self._feed(self._with_keys((), last=True))
        self.dissector.finish()
        self._write_exchanges()
        self._collect()
        self.source.update_kernel_stats()
        if self.pcap is not None:
            try:
                self.pcap.close()
            except OSError as exc:
                self.error = self.error or f"{self.pcap_path}: {exc.strerror or exc}"
        if self.display is not None:
            self.display.close()
        self.err.write("".join(line + "\n" for line in self.summary_lines()))
        self.err.flush()

    def _view_lines(self) -> list[str]:
        s = self.source
        width = getattr(self.display, "width", None)
        head = fit_words([f"live on {escape(self.label)}", clock(self.stop.elapsed()),
                          f"packets {self.packets}", f"kernel drops {s.kernel_drops}",
                          f"exchanges {self.stats.exchanges}",
                          f"| per api, last {self.stats.window_ns / 1e9:g} s:"], width)
        rows = self.stats.window_rows(time.time_ns(), self.stop.elapsed())
        return head + format_rows(rows, width)

    def _err_width(self) -> int | None:
        """The summary's width: the terminal's when it goes to one, else as wide as it is."""
        try:
            if self.err.isatty():
                return max(shutil.get_terminal_size().columns - 1, 20)
        except (AttributeError, ValueError, OSError):
            pass
        return None

    def summary_lines(self) -> list[str]:
        s = self.source
        elapsed = self.stop.elapsed()
        statuses = ", ".join(f"{k} {v}" for k, v in self.stats.statuses.most_common())
        lines = [f"kafka-dissect live: stopped ({self.stop.reason or 'error'}) after "
                 f"{elapsed:.1f} s on {escape(self.label)}",
                 f"packets: {self.packets} captured; kernel: {s.kernel_packets} passed the "
                 f"filter, {s.kernel_drops} dropped",
                 f"exchanges: {self.stats.exchanges}" + (f" ({statuses})" if statuses else "")]
        if self.issue_codes:
            lines.append(f"issues: {sum(self.issue_codes.values())} ("
                         + ", ".join(f"{k} {v}" for k, v in self.issue_codes.most_common()) + ")")
        undecrypted = self.dissector.tls.undecrypted
        if undecrypted:
            lines.append(f"TLS: {undecrypted_note(undecrypted, bool(self.keylogs))}")
        if self.pcap_path:
            lines.append(f"written: {self.packets} packets to {self.pcap_path}")
        if self.stats.totals:
            lines += format_rows(self.stats.total_rows(elapsed), self._err_width())
        return lines
