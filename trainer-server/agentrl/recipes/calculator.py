"""A calculator Tool that evaluates arithmetic safely: the expression is parsed with `ast` and only
numbers and arithmetic operators are evaluated. Model text is never passed to `eval`."""

from __future__ import annotations

import ast
import math
import operator
from typing import Any

from agentrl import Tool

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 64
MAX_MAGNITUDE = 1e30


class CalculatorError(ValueError):
    pass


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculatorError(f"exponent {right:g} is too large (at most {MAX_EXPONENT})")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        if isinstance(value, complex) or not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
            raise CalculatorError("result is out of range")
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise CalculatorError(f"only numbers and + - * / // % ** ( ) are allowed, not {type(node).__name__}")


def calculate(expression: str) -> float | int:
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    cleaned = expression.replace(",", "").replace("x", "*").replace("×", "*").replace("÷", "/").replace("$", "")
    try:
        tree = ast.parse(cleaned, mode="eval")
    except SyntaxError:
        raise CalculatorError(f"not an arithmetic expression: {expression!r}") from None
    value = _evaluate(tree)
    return int(value) if float(value).is_integer() else round(value, 10)


class Calculator(Tool):
    name = "calculator"
    description = "Evaluate an arithmetic expression with + - * / // % ** and parentheses, e.g. '(48 + 24) / 3'."
    parameters = {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "the arithmetic expression"}},
        "required": ["expression"],
        "additionalProperties": False,
    }
    timeout_s = 2.0

    def execute(self, expression: str) -> Any:
        return calculate(expression)
