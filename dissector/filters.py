"""`--filter EXPR`: a restricted expression language over exchange columns (like tshark's -Y).

    api_name == "Fetch" and latency_ms > 100
    status != "ok" or error_code in (3, 6)
    "orders" in topics and not client_id == "admin"

The expression is parsed with `ast` and compiled into nested closures over a whitelist of node
kinds (column names, constants, comparisons, and/or/not, in, arithmetic); nothing is ever passed
to eval, and attribute access, calls, subscripts and lambdas are refused. A missing value (None)
compares false and makes arithmetic None, like SQL NULL, so `latency_ms > 100` simply skips
unanswered requests.
"""
from __future__ import annotations

import ast
import operator
from numbers import Number

from .tables import EXCHANGE_COLUMN_NAMES

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
    allowed = frozenset(columns if columns is not None else _default_columns())
    try:
        tree = ast.parse(expr.strip(), mode="eval")
        fn = _Compiler(allowed).build(tree.body)
    except SyntaxError as exc:
        raise ValueError(f"bad filter expression: {exc.msg} at column {exc.offset}") from None
    except (RecursionError, MemoryError):
        raise ValueError("filter expression nested too deeply") from None

    def predicate(row) -> bool:
        try:
            return bool(fn(row))
        except (TypeError, ZeroDivisionError, OverflowError):
            return False
    predicate.expression = expr
    return predicate


def _default_columns():
    names = set(EXCHANGE_COLUMN_NAMES)
    # request settings the analysis tables add (analysis.schema.EXCHANGE_EXTRA_COLUMNS)
    names.update(("acks", "transactional_id", "max_wait_ms", "min_bytes", "isolation_level",
                  "group_id", "member_id", "generation_id", "top_error_code"))
    return names


class _Compiler:
    def __init__(self, allowed):
        self.allowed = allowed

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
        operands = [self.build(node.left)] + [self.build(c) for c in node.comparators]

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
