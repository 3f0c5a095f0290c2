"""A literal handed to an environment-override helper is the value the file runs with.

Upstream examples let the environment override a size without editing the file:

    def env_int(name, default):
        value = os.environ.get(name)
        return default if value is None else int(value)

    parser.add_argument("--block-m", type=int, default=env_int("TILELANG_ADC_BLOCK_M", 256))

With the variable unset (as a tuning run leaves it) the helper returns its `default`
argument unchanged, so the literal passed there is the knob's value and the place to edit
it. A helper qualifies when it is a module function that reads the environment
(`os.environ`, `os.getenv`) and returns one of its parameters as it is (`return default`,
`return default if value is None else int(value)`); the argument bound to that parameter
must be an integer literal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from bot.strategies.source import dotted, int_value

if TYPE_CHECKING:
    from bot.strategies.facts import Function

ENVIRON = ("environ", "getenv")


def _returned_params(fn: Function) -> set[str]:
    """Parameters of `fn` some return statement hands back unchanged."""
    found: set[str] = set()

    class _Returns(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn.node  # not a nested function's returns

        def visit_Return(self, node: cst.Return) -> None:
            value = node.value
            parts = [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
            found.update(p.value for p in parts if isinstance(p, cst.Name) and p.value in fn.params)

    fn.node.visit(_Returns())
    return found


def _reads_environment(fn: Function) -> bool:
    class _Env(cst.CSTVisitor):
        hit = False

        def visit_Attribute(self, node: cst.Attribute) -> None:
            if node.attr.value in ENVIRON and dotted(node.value) == "os":
                _Env.hit = True

    fn.node.visit(_Env())
    return _Env.hit


def fallback(call: cst.BaseExpression, functions: list[Function]) -> cst.BaseExpression | None:
    """The integer literal `call` returns when the environment does not override it, or None
    when `call` is no call of an environment-override helper."""
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name):
        return None
    helpers = [fn for fn in functions if fn.name == call.func.value and not fn.parents]
    if len(helpers) != 1 or not _reads_environment(helpers[0]):
        return None
    fn = helpers[0]
    returned = _returned_params(fn)
    if len(returned) != 1:
        return None
    (param,) = returned
    arg = next((a.value for a in call.args if a.keyword and a.keyword.value == param), None)
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if arg is None and fn.params.index(param) < len(positional):
        arg = positional[fn.params.index(param)]
    return arg if arg is not None and int_value(arg) is not None else None
