"""The exchange list's model: every exchange once, and the rows shown (filtered, sorted) as
positions into it. Cells are made only for the rows drawn."""
from __future__ import annotations

from ..filters import compile_filter
from ..protocol.names import error_name
from ..tables import EXCHANGE_COLUMN_NAMES, exchange_api_name, exchange_row
from ..text_safety import escape


def _api(ex) -> str:
    name = exchange_api_name(ex) or "?"
    return name if ex.api_version is None else f"{name} v{ex.api_version}"


def _status(ex) -> str:
    text = f"{ex.status} {error_name(ex.error_code)}" if ex.error_code else ex.status
    if ex.issues:   # as `read` shows them
        n = len(ex.issues)
        text += f" [{n} issue{'s' if n > 1 else ''}: {ex.issues[0].code}]"
    return text


def _first_ts(ex) -> int:
    return (ex.request or ex.response).first_ts


# (header, width, right-aligned, cell text, sort key): the `read` columns
COLUMNS = (
    ("No.", 7, True, lambda ex, t0: str(ex.index), lambda ex: ex.index),
    ("Time", 11, True, lambda ex, t0: f"{(_first_ts(ex) - t0) / 1e9:.6f}", _first_ts),
    ("Client", 21, False, lambda ex, t0: f"{ex.connection.client_ip}:{ex.connection.client_port}",
     lambda ex: (str(ex.connection.client_ip), ex.connection.client_port)),
    ("Broker", 21, False, lambda ex, t0: f"{ex.connection.broker_ip}:{ex.connection.broker_port}",
     lambda ex: (str(ex.connection.broker_ip), ex.connection.broker_port)),
    ("API", 30, False, lambda ex, t0: _api(ex), _api),
    ("Corr", 9, True, lambda ex, t0: "" if ex.correlation_id is None else str(ex.correlation_id),
     lambda ex: -1 if ex.correlation_id is None else ex.correlation_id),
    ("Client id", 20, False, lambda ex, t0: escape(ex.client_id), lambda ex: ex.client_id or ""),
    ("Latency ms", 12, True,
     lambda ex, t0: "" if ex.latency_ms is None else f"{ex.latency_ms:.3f}",
     lambda ex: -1.0 if ex.latency_ms is None else ex.latency_ms),
    ("Status", 0, False, lambda ex, t0: _status(ex), _status),
)


def row_colour(ex) -> str | None:
    """Wireshark-like: errors red, requests without an answer yellow, the rest as they are."""
    if ex.error_code:
        return "red"
    if ex.status == "ok":
        return None
    return "yellow" if ex.status == "unanswered" else "magenta"


_AT = {name: i for i, name in enumerate(EXCHANGE_COLUMN_NAMES)}


class _RowView:
    """exchange_row's values looked up by column name (all a filter asks of a row), without
    building a dict per exchange (a third less time to filter)."""
    __slots__ = ("row",)

    def __init__(self, row):
        self.row = row

    def get(self, name, default=None):
        i = _AT.get(name)
        return default if i is None else self.row[i]


class ExchangeRows:
    def __init__(self):
        self.exchanges = []
        self.shown: list[int] = []   # positions in `exchanges`, in display order
        self.t0 = None
        self.keep = None             # the filter's predicate, None: all
        self.sort_column = 0
        self.descending = False

    def __len__(self) -> int:
        return len(self.shown)

    def add(self, exchanges) -> None:
        """Append exchanges (in capture order); those the filter keeps are shown, in order."""
        start = len(self.exchanges)
        self.exchanges.extend(exchanges)
        if self.t0 is None and self.exchanges:
            self.t0 = _first_ts(self.exchanges[0])
        new = [i for i in range(start, len(self.exchanges)) if self._kept(self.exchanges[i])]
        self.shown.extend(new)
        if self.sort_column or self.descending:   # capture order is the default order
            self._sort()

    def _kept(self, ex) -> bool:
        return self.keep is None or self.keep(_RowView(exchange_row(ex)))

    def set_filter(self, expr: str) -> None:
        """Show only the exchanges matching `expr` (the --filter language; "" shows all).
        Raises ValueError with a one-line reason for a bad expression, leaving the rows as
        they were."""
        self.keep = compile_filter(expr) if expr.strip() else None
        self.shown = [i for i, ex in enumerate(self.exchanges) if self._kept(ex)]
        self._sort()

    def sort_by(self, column: int, descending: bool = False) -> None:
        self.sort_column = column
        self.descending = descending
        self._sort()

    def _sort(self) -> None:
        key = COLUMNS[self.sort_column][4]
        ex = self.exchanges
        self.shown.sort(key=lambda i: (key(ex[i]), i), reverse=self.descending)

    def exchange(self, row: int):
        return self.exchanges[self.shown[row]]

    def cells(self, row: int) -> list[str]:
        ex = self.exchange(row)
        return [col[3](ex, self.t0) for col in COLUMNS]

    def row_of(self, index: int) -> int | None:
        """The displayed row of exchange number `index`, None when filtered out."""
        for row, i in enumerate(self.shown):
            if self.exchanges[i].index == index:
                return row
        return None
