"""Safe arithmetic: the calculator's evaluator.

Expressions are parsed with :mod:`ast` and evaluated node by node over a closed grammar:
int and float literals, ``+ - * / // % **``, unary ``+ -``, calls by bare name to a fixed
set of math functions, and the constants ``pi``, ``e`` and ``tau``. Nothing else exists:
no names, attributes, subscripts, comprehensions, lambdas, keyword arguments, strings,
booleans or complex numbers.

Work is bounded *before* it is done, so no input can burn CPU or memory: the expression
length, the nesting depth and the number of nodes are capped; a power whose result would
exceed :data:`MAX_INT_BITS` bits is refused from ``exponent * log2(base)`` without being
computed (``9**9**9`` fails at once); ``factorial`` takes at most :data:`MAX_FACTORIAL`.

Integers stay integers (``2**100`` is exact, ``6/3`` is ``2``), other divisions give floats
(``7/2`` is ``3.5``), and a float that is not finite is an error, as is division by zero.
``^`` means power (``2^10`` is ``1024``): models write it that way far more often than they
mean bitwise XOR, which the calculator does not offer.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Final, TypeAlias

Number: TypeAlias = int | float

MAX_EXPRESSION_CHARS: Final = 1000
MAX_DEPTH: Final = 150
"""Enough for a sum of 150 terms (a left-leaning chain); far below the recursion limit."""
MAX_NODES: Final = 400
MAX_INT_BITS: Final = 10_000
"""About 3000 decimal digits: far below Python's int-to-str limit, instant to compute."""
MAX_FACTORIAL: Final = 1000
MAX_ROUND_DIGITS: Final = 100
MAX_FLOAT_DIGITS: Final = 15
NOISE_ULPS: Final = 4
"""A float this close to a 15-digit number is shown as that number: ``0.1+0.2`` → ``0.3``."""


class CalculationError(ValueError):
    """The expression is not allowed, malformed, or has no finite real result."""


CONSTANTS: Final[dict[str, float]] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _real(value: object) -> Number:
    """Check a math-library result: a finite int or float, never complex/inf/nan."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CalculationError("the result is not a real number")
    return _checked(value)


def _checked(value: Number) -> Number:
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculationError("the result is too large or undefined")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculationError(f"the result is too large (more than {MAX_INT_BITS} bits)")
    return value


def _as_int(value: Number, what: str) -> int:
    if isinstance(value, int):
        return value
    if value.is_integer():
        return int(value)
    raise CalculationError(f"{what} needs a whole number, got {format_number(value)}")


def _unary(fn: Callable[[float], float]) -> Callable[[list[Number]], Number]:
    def call(args: list[Number]) -> Number:
        return _real(fn(args[0]))

    return call


def _sqrt(args: list[Number]) -> Number:
    (x,) = args
    if x < 0:
        raise CalculationError("sqrt of a negative number is not a real number")
    if isinstance(x, int):
        root = math.isqrt(x)
        if root * root == x:
            return root
    return _real(math.sqrt(x))


def _log(args: list[Number]) -> Number:
    if any(a <= 0 for a in args):
        raise CalculationError("log is only defined for positive numbers")
    if len(args) == 2 and args[1] == 1:
        raise CalculationError("log base 1 is undefined")
    return _real(math.log(*args))


def _positive(fn: Callable[[float], float], name: str) -> Callable[[list[Number]], Number]:
    def call(args: list[Number]) -> Number:
        if args[0] <= 0:
            raise CalculationError(f"{name} is only defined for positive numbers")
        return _real(fn(args[0]))

    return call


def _round(args: list[Number]) -> Number:
    if len(args) == 1:
        return _real(round(args[0]))
    digits = _as_int(args[1], "round's digits")
    if abs(digits) > MAX_ROUND_DIGITS:
        raise CalculationError(f"round's digits must be within ±{MAX_ROUND_DIGITS}")
    return _real(round(args[0], digits))


def _factorial(args: list[Number]) -> Number:
    n = _as_int(args[0], "factorial")
    if n < 0:
        raise CalculationError("factorial is only defined for non-negative integers")
    if n > MAX_FACTORIAL:
        raise CalculationError(f"factorial is limited to n <= {MAX_FACTORIAL}")
    return _checked(math.factorial(n))


def _rounding(fn: Callable[[float], int]) -> Callable[[list[Number]], Number]:
    def call(args: list[Number]) -> Number:
        x = args[0]
        return x if isinstance(x, int) else _checked(fn(x))

    return call


_Function: TypeAlias = tuple[int, int | None, Callable[[list[Number]], Number]]
"""(minimum arguments, maximum arguments or None for any, implementation)."""

FUNCTIONS: Final[dict[str, _Function]] = {
    "abs": (1, 1, lambda a: abs(a[0])),
    "round": (1, 2, _round),
    "min": (1, None, min),
    "max": (1, None, max),
    "sqrt": (1, 1, _sqrt),
    "log": (1, 2, _log),
    "ln": (1, 1, _positive(math.log, "ln")),
    "log10": (1, 1, _positive(math.log10, "log10")),
    "log2": (1, 1, _positive(math.log2, "log2")),
    "exp": (1, 1, _unary(math.exp)),
    "sin": (1, 1, _unary(math.sin)),
    "cos": (1, 1, _unary(math.cos)),
    "tan": (1, 1, _unary(math.tan)),
    "asin": (1, 1, _unary(math.asin)),
    "acos": (1, 1, _unary(math.acos)),
    "atan": (1, 1, _unary(math.atan)),
    "ceil": (1, 1, _rounding(math.ceil)),
    "floor": (1, 1, _rounding(math.floor)),
    "factorial": (1, 1, _factorial),
    "hypot": (1, None, lambda a: _real(math.hypot(*a))),
}


def _power(base: Number, exponent: Number) -> Number:
    if isinstance(base, int) and isinstance(exponent, int) and exponent >= 0:
        if base in (0, 1) or exponent in (0, 1):
            return int(pow(base, exponent))
        if base == -1:
            return 1 if exponent % 2 == 0 else -1
        # |base| >= 2, so the result has at least `exponent` bits: refuse before computing
        if exponent > MAX_INT_BITS or exponent * math.log2(abs(base)) > MAX_INT_BITS:
            raise CalculationError(f"the result is too large (more than {MAX_INT_BITS} bits)")
        return int(pow(base, exponent))
    if base == 0 and exponent < 0:
        raise CalculationError("division by zero (zero to a negative power)")
    if base < 0 and not float(exponent).is_integer():
        raise CalculationError("a negative number to a fractional power is not a real number")
    return _real(float(base) ** float(exponent))


def _divide(left: Number, right: Number) -> Number:
    if right == 0:
        raise CalculationError("division by zero")
    if isinstance(left, int) and isinstance(right, int):
        quotient, remainder = divmod(left, right)
        if remainder == 0:
            return quotient
    return _real(left / right)


def _floor_divide(left: Number, right: Number) -> Number:
    if right == 0:
        raise CalculationError("division by zero")
    return _real(left // right)


def _modulo(left: Number, right: Number) -> Number:
    if right == 0:
        raise CalculationError("modulo by zero")
    return _real(left % right)


_BINARY: Final[dict[type[ast.operator], Callable[[Number, Number], Number]]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: _divide,
    ast.FloorDiv: _floor_divide,
    ast.Mod: _modulo,
    ast.Pow: _power,
}

_DESCRIBE: Final[dict[type[ast.AST], str]] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscripts",
    ast.Lambda: "lambdas",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.Compare: "comparisons",
    ast.BoolOp: "boolean operators",
    ast.IfExp: "conditional expressions",
    ast.NamedExpr: "assignment",
    ast.JoinedStr: "strings",
    ast.List: "lists",
    ast.Tuple: "tuples",
    ast.Set: "sets",
    ast.Dict: "dicts",
    ast.Starred: "unpacking",
}


class _Evaluator:
    def __init__(self) -> None:
        self.nodes = 0

    def eval(self, node: ast.AST, depth: int) -> Number:
        self.nodes += 1
        if depth > MAX_DEPTH:
            raise CalculationError(f"the expression is nested too deeply (max {MAX_DEPTH})")
        if self.nodes > MAX_NODES:
            raise CalculationError(f"the expression is too complex (max {MAX_NODES} parts)")
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise CalculationError(f"only numbers are allowed, not {value!r}")
            return _checked(value)
        if isinstance(node, ast.BinOp):
            operation = _BINARY.get(type(node.op))
            if operation is None:
                raise CalculationError(f"the operator {_op_name(node.op)} is not allowed")
            left = self.eval(node.left, depth + 1)
            right = self.eval(node.right, depth + 1)
            return _checked(operation(left, right))
        if isinstance(node, ast.UnaryOp):
            operand = self.eval(node.operand, depth + 1)
            if isinstance(node.op, ast.USub):
                return -operand
            if isinstance(node.op, ast.UAdd):
                return operand
            raise CalculationError(f"the operator {_op_name(node.op)} is not allowed")
        if isinstance(node, ast.Name):
            if node.id in CONSTANTS:
                return CONSTANTS[node.id]
            raise CalculationError(
                f"unknown name '{node.id}'; the constants are " + ", ".join(CONSTANTS)
            )
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        what = _DESCRIBE.get(type(node), type(node).__name__)
        raise CalculationError(f"{what} not allowed")

    def call(self, node: ast.Call, depth: int) -> Number:
        if not isinstance(node.func, ast.Name):
            raise CalculationError("only calls of the listed functions by name are allowed")
        name = node.func.id
        if name not in FUNCTIONS:
            raise CalculationError(
                f"unknown function '{name}'; the functions are " + ", ".join(FUNCTIONS)
            )
        if node.keywords:
            raise CalculationError(f"{name}() takes no keyword arguments")
        low, high, implementation = FUNCTIONS[name]
        if len(node.args) < low or (high is not None and len(node.args) > high):
            expected = (
                str(low)
                if low == high
                else f"{low} or more"
                if high is None
                else (f"{low} to {high}")
            )
            raise CalculationError(f"{name}() takes {expected} argument(s), got {len(node.args)}")
        args = [self.eval(arg, depth + 1) for arg in node.args]
        return _checked(implementation(args))


def _op_name(op: ast.AST) -> str:
    symbols = {
        ast.BitXor: "^",
        ast.BitAnd: "&",
        ast.BitOr: "|",
        ast.LShift: "<<",
        ast.RShift: ">>",
        ast.MatMult: "@",
        ast.Invert: "~",
        ast.Not: "not",
    }
    return symbols.get(type(op), type(op).__name__)


def evaluate(expression: str) -> Number:
    """Evaluate ``expression``; anything disallowed or undefined raises CalculationError."""
    text = expression.strip()
    if not text:
        raise CalculationError("the expression is empty")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise CalculationError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    text = " ".join(text.split()).replace("^", "**")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise CalculationError(f"invalid syntax: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise CalculationError("the expression cannot be parsed (too deeply nested?)") from None
    try:
        return _Evaluator().eval(tree.body, 0)
    except CalculationError:
        raise
    except (ArithmeticError, TypeError, ValueError, RecursionError, MemoryError) as exc:
        raise CalculationError(f"cannot compute: {exc}") from None


def format_number(value: Number) -> str:
    """Integers in full; floats as ``repr`` (the shortest exact form) minus binary noise.

    When the value is within a few units in the last place of a 15-digit number, that
    number is shown (``0.1 + 0.2`` reads ``0.3``); real precision (``pi``) is kept.
    """
    if isinstance(value, int):
        return str(value)
    short = float(f"{value:.{MAX_FLOAT_DIGITS}g}")
    if abs(short - value) <= NOISE_ULPS * math.ulp(value):
        return repr(short)
    return repr(value)
