"""Helpers shared by the transforms: hashing, diffs, parsing, line numbers."""

from __future__ import annotations

import difflib
import hashlib

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from bot.strategies.base import Change, Refusal, Variant


def source_hash(source: str) -> str:
    """sha256 of the source text: the identity the planner never evaluates twice."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def unified_diff(parent: str, variant: str, name: str = "kernel.py") -> str:
    """Unified diff parent -> variant, as stored in the record and shown to reviewers."""
    lines = difflib.unified_diff(
        parent.splitlines(keepends=True),
        variant.splitlines(keepends=True),
        fromfile=f"a/{name}",
        tofile=f"b/{name}",
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def make_variant(parent: str, new_source: str, change: Change, name: str = "kernel.py") -> Variant | Refusal:
    """A Variant from parent -> new_source, or a Refusal when nothing changed."""
    if new_source == parent:
        return Refusal((f"{change.strategy}: the change leaves the source identical",), strategy=change.strategy)
    return Variant(change=change, source=new_source, diff=unified_diff(parent, new_source, name),
                   source_hash=source_hash(new_source))


class ParseFailure(Exception):
    """The source is not valid Python: carries a one-line message with the line number."""


def parse(source: str) -> MetadataWrapper:
    """Parse with positions available; raises ParseFailure with a readable message."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise ParseFailure(f"not valid Python: line {exc.raw_line}, column {exc.raw_column}: {exc.message}") from None
    return MetadataWrapper(module)


def line_of(wrapper: MetadataWrapper, node: cst.CSTNode) -> int:
    return wrapper.resolve(PositionProvider)[node].start.line


def int_value(node: cst.BaseExpression | None) -> int | None:
    """The value of an integer literal (also -N), else None."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = int_value(node.expression)
        return None if inner is None else -inner
    return None


def bool_value(node: cst.BaseExpression | None) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def literal_node(value: int | bool) -> cst.BaseExpression:
    """The literal to write for a knob value (bools first: bool is an int)."""
    if isinstance(value, bool):
        return cst.Name("True" if value else "False")
    if value < 0:
        return cst.UnaryOperation(operator=cst.Minus(), expression=cst.Integer(str(-value)))
    return cst.Integer(str(value))


class _Replace(cst.CSTTransformer):
    """Replace exactly one node (by identity) and nothing else."""

    def __init__(self, target: cst.CSTNode, replacement: cst.CSTNode) -> None:
        self.target, self.replacement, self.done = target, replacement, False

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        if original_node is self.target:
            self.done = True
            return self.replacement
        return updated_node


def replace_node(module: cst.Module, target: cst.CSTNode, replacement: cst.CSTNode) -> str:
    """The module's code with `target` (a node of `module`) replaced."""
    t = _Replace(target, replacement)
    new = module.visit(t)
    if not t.done:  # a bug, not a user error: the target must come from `module`
        raise AssertionError("replace_node: target node not found in module")
    return new.code


def dotted(node: cst.BaseExpression) -> str:
    """`a.b.c` for Name/Attribute chains, '' otherwise."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value` appended, in the call's own layout (one line or one arg per line)."""
    args = list(call.args)
    new = cst.Arg(value=value, keyword=cst.Name(name),
                  equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                        whitespace_after=cst.SimpleWhitespace("")))
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):  # trailing comma: multi-line layout, keep it
        between = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else last.comma
        args[-1] = last.with_changes(comma=between)
        args.append(new.with_changes(comma=last.comma))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(new.with_changes(whitespace_after_arg=last.whitespace_after_arg))
    return call.with_changes(args=args)
