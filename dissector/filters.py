"""`--filter EXPR`: a restricted expression language over exchange columns (like tshark's -Y).

    api_name == "Fetch" and latency_ms > 100
    status != "ok" or error_code in (3, 6)
    "orders" in topics and not client_id == "admin"

The expression is parsed with `ast` and compiled into nested closures over a whitelist of node
kinds (column names, constants, comparisons, and/or/not, in, arithmetic); nothing is ever passed
to eval, and attribute access, calls, subscripts and lambdas are refused. A missing value (None)
compares false and makes arithmetic None, like SQL NULL, so `latency_ms > 100` simply skips
unanswered requests.

As in tshark, a column compared with a constant of the wrong type (`api_name > 5`,
`latency_ms > "abc"`) is an error naming both, not an empty result; timestamp columns compare
with ISO 8601 strings (`request_ts >= "2024-05-01T12:00:00Z"`; UTC when no offset is given) as
well as with nanoseconds since the epoch.
"""
from __future__ import annotations

import ast
import operator
from numbers import Number

from .tables import EXCHANGE_COLUMNS

MAX_LENGTH = 4000

_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_ARITH = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}
_SYMBOL = {ast.Is: "is", ast.IsNot: "is not", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|",
           ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@"}


def compile_filter(expr: str, columns=None):
    """A predicate `row -> bool` for `expr` over a dict of column values.

    columns: the names allowed (default: the exchanges table's columns); rows may hold more.
    Raises ValueError with a one-line reason for anything outside the language.
    """
    if not isinstance(expr, str) or not expr.strip():
        raise ValueError("empty filter expression")
    if len(expr) > MAX_LENGTH:
        raise ValueError(f"filter expression longer than {MAX_LENGTH} characters")
    kinds = _default_kinds() if columns is None else {
        name: _default_kinds().get(name) for name in columns}
    text = expr.lstrip()
    indent = len(expr) - len(text)   # the columns reported count from the start of `expr`
    try:
        tree = ast.parse(text.rstrip(), mode="eval")
        fn = _Compiler(kinds).build(tree.body)
    except SyntaxError as exc:
        msg, offset = exc.msg, exc.offset
        if not offset:   # Python reports no position when the input ends too early
            msg, offset = "the expression ends too early", len(text.rstrip()) + 1
        raise ValueError(f"bad filter expression: {msg} at column {offset + indent}") from None
    except (RecursionError, MemoryError):
        raise ValueError("filter expression nested too deeply") from None

    def predicate(row) -> bool:
        try:
            return bool(fn(row))
        except (TypeError, ZeroDivisionError, OverflowError):
            return False
    predicate.expression = expr
    return predicate


# request settings the analysis tables add (analysis.schema.EXCHANGE_EXTRA_COLUMNS)
_EXTRA_KINDS = {"acks": "number", "transactional_id": "string", "max_wait_ms": "number",
                "min_bytes": "number", "isolation_level": "number", "group_id": "string",
                "member_id": "string", "generation_id": "number", "top_error_code": "number"}


def _kind(arrow_type: str) -> str:
    if arrow_type in ("string", "timestamp"):
        return arrow_type
    return "list" if arrow_type.startswith("list") else "number"


def _default_kinds() -> dict:
    """{column: "string" | "number" | "timestamp" | "list"} of the exchanges table."""
    kinds = {name: _kind(t) for name, t in EXCHANGE_COLUMNS}
    kinds.update(_EXTRA_KINDS)
    return kinds


_ARTICLE = {"string": "a string", "number": "a number", "timestamp": "a timestamp",
            "list": "a list", "bool": "a boolean", "null": "None"}


def _constant_kind(value) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    return "number" if isinstance(value, (int, float)) else None   # others: _Constant refuses


def iso_to_ns(text: str) -> int:
    """Nanoseconds since the epoch of an ISO 8601 date or time (UTC unless it has an offset);
    ValueError when it is not one. Fractions keep all nine digits."""
    from datetime import datetime, timezone
    import re
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?)(?:\.(\d{1,9}))?"
                     r"(Z|[+-]\d{2}:?\d{2})?", text.strip())
    if m is None:
        raise ValueError(text)
    when = datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) in (None, "Z")
                                                else m.group(3)))
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    seconds = int(when.timestamp())
    return seconds * 1_000_000_000 + int((m.group(2) or "0").ljust(9, "0"))


class _Compiler:
    def __init__(self, kinds):
        self.kinds = kinds
        self.allowed = frozenset(kinds)

    def build(self, node):
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise ValueError(f"not allowed in a filter: {_describe(node)}")
        return method(node)

    def _Constant(self, node):
        value = node.value
        if not isinstance(value, (str, int, float, bool, type(None))):
            raise ValueError(f"not allowed in a filter: constant {value!r}")
        return lambda row: value

    def _Name(self, node):
        name = node.id
        if name not in self.allowed:
            hint = ", ".join(sorted(self.allowed))
            raise ValueError(f"unknown column {name!r} in filter (columns: {hint})")
        return lambda row: row.get(name)

    def _Tuple(self, node):
        items = [self.build(e) for e in node.elts]
        return lambda row: tuple(f(row) for f in items)

    _List = _Tuple
    _Set = _Tuple

    def _BoolOp(self, node):
        parts = [self.build(v) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda row: all(p(row) for p in parts)
        return lambda row: any(p(row) for p in parts)

    def _UnaryOp(self, node):
        operand = self.build(node.operand)
        if isinstance(node.op, ast.Not):
            return lambda row: not operand(row)
        if isinstance(node.op, ast.USub):
            return lambda row: _none_or(operand(row), operator.neg)
        if isinstance(node.op, ast.UAdd):
            return operand
        raise ValueError(f"not allowed in a filter: {_describe(node.op)}")

    def _BinOp(self, node):
        op = _ARITH.get(type(node.op))
        if op is None:
            raise ValueError(f"not allowed in a filter: operator {_describe(node.op)}")
        left, right = self.build(node.left), self.build(node.right)

        def arith(row):
            a, b = left(row), right(row)
            if isinstance(a, Number) and isinstance(b, Number):
                return op(a, b)
            if a.__class__ is str and b.__class__ is str and op is operator.add:
                return a + b
            return None   # NULL, or no arithmetic for the operands: `(1,) * 10**9` allocates
        return arith

    def _Compare(self, node):
        ops = []
        for o in node.ops:
            fn = _COMPARE.get(type(o))
            if fn is None:
                raise ValueError(f"not allowed in a filter: operator {_describe(o)} "
                                 "(compare with == None or != None instead)"
                                 if isinstance(o, (ast.Is, ast.IsNot))
                                 else f"not allowed in a filter: operator {_describe(o)}")
            ops.append((fn, isinstance(o, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))))
        nodes = [node.left] + list(node.comparators)
        for i, o in enumerate(node.ops):
            nodes[i], nodes[i + 1] = self._typed(nodes[i], o, nodes[i + 1])
        operands = [self.build(n) for n in nodes]

        def compare(row):
            left = operands[0](row)
            for (fn, none_ok), get in zip(ops, operands[1:]):
                right = get(row)
                if not none_ok and (left is None or right is None):
                    return False   # NULL never orders
                if fn in (_COMPARE[ast.In], _COMPARE[ast.NotIn]) and right is None:
                    return False
                if not fn(left, right):
                    return False
                left = right
            return True
        return compare


    def _column_kind(self, node):
        return self.kinds.get(node.id) if isinstance(node, ast.Name) else None

    def _typed(self, left, op, right):
        """(left, right) checked for a column compared with constants of the wrong type, an ISO
        string compared with a timestamp column made nanoseconds; ValueError names both."""
        if isinstance(op, (ast.In, ast.NotIn)):
            if self._column_kind(right) == "list" and isinstance(left, ast.Constant):
                self._check(right.id, "string", left, op, list_item=True)
            elif isinstance(right, (ast.Tuple, ast.List, ast.Set)) and self._column_kind(left):
                right.elts = [self._check(left.id, self._column_kind(left), e, op)
                              for e in right.elts]
            return left, right
        if self._column_kind(left) and isinstance(right, ast.Constant):
            right = self._check(left.id, self._column_kind(left), right, op)
        elif self._column_kind(right) and isinstance(left, ast.Constant):
            left = self._check(right.id, self._column_kind(right), left, op)
        return left, right

    def _check(self, column, kind, const, op, list_item=False):
        if not isinstance(const, ast.Constant):
            return const
        value = const.value
        ckind = _constant_kind(value)
        equality = isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
        if ckind is None or ckind == "null" and equality:
            return const
        if kind == "timestamp" and ckind == "string":
            try:
                return ast.copy_location(ast.Constant(iso_to_ns(value)), const)
            except (ValueError, OverflowError, OSError):
                raise ValueError(f"{column} is a timestamp: {value!r} is not an ISO 8601 "
                                 "date or time (e.g. 2024-05-01T12:00:00.5Z)") from None
        fits = (ckind == kind or kind in ("number", "timestamp") and ckind in ("number", "bool")
                or kind == "list" and list_item and ckind == "string")
        if kind == "list" and not list_item:
            fits = False
        if not fits:
            what = "an element of " + column if list_item else column
            raise ValueError(f"cannot compare {what} ({_ARTICLE[kind]} column) with {value!r} "
                             f"({_ARTICLE[ckind]})")
        return const


def _none_or(value, fn):
    return None if value is None else fn(value)


def _describe(node) -> str:
    symbol = _SYMBOL.get(type(node))
    if symbol:
        return repr(symbol)
    kinds = {ast.Call: "function calls", ast.Attribute: "attribute access",
             ast.Subscript: "subscripts", ast.Lambda: "lambda", ast.IfExp: "if-else",
             ast.ListComp: "comprehensions", ast.GeneratorExp: "comprehensions",
             ast.DictComp: "comprehensions", ast.SetComp: "comprehensions", ast.Dict: "dicts",
             ast.NamedExpr: "assignment", ast.JoinedStr: "f-strings", ast.Starred: "starred"}
    return kinds.get(type(node), type(node).__name__)


def compile_filter_option(expr, columns=None):
    """compile_filter for a `--filter` option: None when not given, UsageError when invalid."""
    if expr is None:
        return None
    from .cli import UsageError
    try:
        return compile_filter(expr, columns)
    except ValueError as exc:
        raise UsageError(f"--filter: {exc}") from None
