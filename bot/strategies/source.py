"""Helpers shared by the transforms: hashing, diffs, parsing, line numbers."""

from __future__ import annotations

import difflib
import hashlib
import operator
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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


def keep_untouched_lines(parent: str, rendered_parent: str, new_source: str) -> str:
    """`new_source` with every line the transform did not change taken verbatim from `parent`.

    libcst renders a few inputs not byte for byte (a whitespace-only last line);
    the edit (rendered parent -> new source) is applied to the real parent text
    instead, so nothing but the intended lines ever changes. Falls back to
    `new_source` when an edited line cannot be placed in the parent.
    """
    if rendered_parent == parent:
        return new_source
    a, b, p = (t.splitlines(keepends=True) for t in (rendered_parent, new_source, parent))
    to_parent: dict[int, int] = {}
    for block in difflib.SequenceMatcher(a=a, b=p, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            to_parent[block.a + k] = block.b + k
    out = list(p)
    edits = [
        op
        for op in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
        if op[0] != "equal"
    ]
    for _, i1, i2, j1, j2 in reversed(edits):
        if i1 < i2:
            if (
                any(i not in to_parent for i in range(i1, i2))
                or to_parent[i2 - 1] - to_parent[i1] != i2 - 1 - i1
            ):
                return new_source
            start, end = to_parent[i1], to_parent[i2 - 1] + 1
        elif i1 in to_parent:  # a pure insertion before rendered line i1
            start = end = to_parent[i1]
        elif i1 - 1 in to_parent:
            start = end = to_parent[i1 - 1] + 1
        else:
            return new_source
        out[start:end] = b[j1:j2]
    return "".join(out)


def make_variant(
    parent: str, new_source: str, change: Change, name: str = "kernel.py"
) -> Variant | Refusal:
    """A Variant from parent -> new_source, or a Refusal when nothing changed."""
    from bot.strategies.facts import facts  # the parent's parse is cached there

    try:
        rendered = facts(parent).wrapper.module.code
    except ParseFailure:
        rendered = parent
    new_source = keep_untouched_lines(parent, rendered, new_source)
    if new_source == parent:
        return Refusal(
            (f"{change.strategy}: the change leaves the source identical",),
            strategy=change.strategy,
        )
    return Variant(
        change=change,
        source=new_source,
        diff=unified_diff(parent, new_source, name),
        source_hash=source_hash(new_source),
    )


class ParseFailure(Exception):
    """The source is not valid Python: carries a one-line message with the line number."""


def parse(source: str) -> MetadataWrapper:
    """Parse with positions available; raises ParseFailure with a readable message."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise ParseFailure(
            f"not valid Python: line {exc.raw_line}, column {exc.raw_column}: {exc.message}"
        ) from None
    wrapper = MetadataWrapper(module)
    _spell_language(wrapper.module, source)  # the wrapper's copy: the tree every caller walks
    return wrapper


# The rules name TileLang's language module `T` (`T.copy`, `T.Pipelined`), as nearly every
# kernel spells it. A file may bind it otherwise: `import tilelang.language as TL`, `import
# tilelang as tl` and `tl.language.copy`, `from tilelang.language import Pipelined`. The nodes
# of such a spelling are recorded at parse time with the name the rules know them by, so that
# `dotted` reads `TL.copy` as `T.copy`. Keyed by node identity (libcst nodes are neither
# hashable by value nor weakly referable); the nodes are held, so the ids stay theirs. A file's
# entries live as long as its tree: they are dropped only once nothing but this table holds
# its nodes (every cache of the parse let it go), never while a cached parse can still be read.
_SPELLED: dict[int, tuple[cst.CSTNode, str]] = {}
_SPELLED_FILES: list[list[int]] = []
_SPELLED_SWEEP = [256]  # files recorded before the next sweep for trees no longer held


def _sweep_spelled() -> None:
    """Drop the entries of every file whose tree nothing else holds any more."""
    kept: list[list[int]] = []
    for keys in _SPELLED_FILES:
        node = _SPELLED[keys[0]][0]
        # references: the table's tuple, `node` here and getrefcount's argument; a tree that is
        # still held holds the node from its parent as well
        if sys.getrefcount(node) > 3:
            kept.append(keys)
        else:
            for key in keys:
                _SPELLED.pop(key, None)
        del node
    _SPELLED_FILES[:] = kept
    _SPELLED_SWEEP[0] = max(256, 2 * len(kept))


def _spell_language(module: cst.Module, source: str) -> None:
    modules, members = import_bindings(module, "tilelang")
    language = {n for n, target in modules.items() if target == "tilelang.language"}
    language |= {n for n, member in members.items() if member == "language"}
    language.discard("T")
    roots = {n for n, target in modules.items() if target == "tilelang"}
    # `import tilelang` / `import tilelang.language` unaliased: `tilelang.language.copy`
    if any(
        isinstance(small, cst.Import)
        and any(
            dotted(a.name).split(".")[0] == "tilelang" and a.asname is None for a in small.names
        )
        for small in top_level_imports(module)
    ):
        roots.add("tilelang")
    roots = {r for r in roots if f"{r}.language" in source}
    _, functions = import_bindings(module, "tilelang.language")
    if not (language or roots or functions):
        return

    spelled: dict[int, tuple[cst.CSTNode, str]] = {}

    class _Spell(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            if node.value in language:
                spelled[id(node)] = (node, "T")
            elif node.value in functions:
                spelled[id(node)] = (node, f"T.{functions[node.value]}")

        def visit_Attribute(self, node: cst.Attribute) -> None:
            if (
                node.attr.value == "language"
                and isinstance(node.value, cst.Name)
                and node.value.value in roots
            ):
                spelled[id(node)] = (node, "T")

        def visit_Import(self, node: cst.Import) -> bool:
            return False  # the import's own names are spelled as written

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            return False

    module.visit(_Spell())
    if not spelled:
        return
    _SPELLED.update(spelled)
    _SPELLED_FILES.append(list(spelled))
    if len(_SPELLED_FILES) > _SPELLED_SWEEP[0]:
        _sweep_spelled()


def line_of(wrapper: MetadataWrapper, node: cst.CSTNode) -> int:
    return wrapper.resolve(PositionProvider)[node].start.line


# integer arithmetic on literals alone is a constant as written (`8 * 1024`, `1 << 13`)
_FOLDED: dict[type, Callable[[int, int], int]] = {
    cst.Add: operator.add,
    cst.Subtract: operator.sub,
    cst.Multiply: operator.mul,
    cst.FloorDivide: operator.floordiv,
    cst.Power: operator.pow,
    cst.LeftShift: operator.lshift,
}


def int_value(node: cst.BaseExpression | None) -> int | None:
    """The value of an integer literal (also -N), or of arithmetic on integer literals alone
    (`8 * 1024`, `2 ** 13`, `1 << 13`: how users write sizes), else None."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = int_value(node.expression)
        return None if inner is None else -inner
    if isinstance(node, cst.BinaryOperation) and type(node.operator) in _FOLDED:
        left, right = int_value(node.left), int_value(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.operator, cst.FloorDivide) and right == 0:
            return None
        if isinstance(node.operator, (cst.Power, cst.LeftShift)) and not 0 <= right <= 64:
            return None
        return _FOLDED[type(node.operator)](left, right)
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

    def on_leave(self, original_node, updated_node):
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


def top_level_imports(module: cst.Module) -> list[cst.Import | cst.ImportFrom]:
    """The module's own import statements (not those inside functions or branches)."""
    return [
        small
        for stmt in module.body
        if isinstance(stmt, cst.SimpleStatementLine)
        for small in stmt.body
        if isinstance(small, (cst.Import, cst.ImportFrom))
    ]


def import_bindings(module: cst.Module, package: str) -> tuple[dict[str, str], dict[str, str]]:
    """Top-level imports of `package`: {bound name: dotted module} for `import package[.sub] as X`,
    and {bound name: member} for `from package import member [as X]`."""
    modules: dict[str, str] = {}
    members: dict[str, str] = {}
    for small in top_level_imports(module):
        if isinstance(small, cst.Import):
            for alias in small.names:
                name = dotted(alias.name)
                if alias.asname is not None and (name == package or name.startswith(package + ".")):
                    modules[alias.asname.name.value] = name  # type: ignore[union-attr]
        elif (
            isinstance(small, cst.ImportFrom)
            and small.module is not None
            and dotted(small.module) == package
            and not isinstance(small.names, cst.ImportStar)
        ):
            for alias in small.names:
                if isinstance(alias.name, cst.Name):
                    bound = alias.asname.name.value if alias.asname else alias.name.value  # type: ignore[union-attr]
                    members[bound] = alias.name.value
    return modules, members


def one_assignment(
    small: cst.CSTNode,
) -> tuple[cst.BaseAssignTargetExpression, cst.BaseExpression] | None:
    """(target, value) of a one-target assignment, `x = v` or the annotated `x: int = v`, which
    binds the same; None for anything else."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        return small.targets[0].target, small.value
    if isinstance(small, cst.AnnAssign) and small.value is not None:
        return small.target, small.value
    return None


def dotted(node: cst.BaseExpression) -> str:
    """`a.b.c` for Name/Attribute chains, '' otherwise; TileLang's language module, however the
    file binds it, is spelled `T` (see `_spell_language`)."""
    known = _SPELLED.get(id(node))
    if known is not None and known[0] is node:
        return known[1]
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


@dataclass(frozen=True)
class Launch:
    """One `T.Kernel(...)` item of a `with`: `with T.Kernel(grid, is_npu=True) as (cid, vid)`."""

    call: cst.Call
    grid: list[cst.BaseExpression]  # the positional arguments: the launch grid
    npu: bool  # `is_npu=` given
    names: list[str]  # the names it binds, by position ('' where a target is not a plain name)


def name_reads(module: cst.Module) -> dict[str, int]:
    """How many times the module reads each name (a def's or class's own name excluded): one
    walk serves every name, and a walk of a large module is the expensive part."""
    seen: dict[str, int] = {}
    own: set[int] = set()

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            own.add(id(node.name))

        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            own.add(id(node.name))

        def visit_Name(self, node: cst.Name) -> None:
            if id(node) not in own:
                seen[node.value] = seen.get(node.value, 0) + 1

    module.visit(V())
    return seen


def min_operands(
    node: cst.BaseExpression, spellings: tuple[str, ...] = ("min", "T.min")
) -> list[cst.BaseExpression] | None:
    """The operands of a `min(a, b, ...)` call (`T.min` too by default), or None for any
    other expression or a call with keywords or starred arguments."""
    if not isinstance(node, cst.Call) or dotted(node.func) not in spellings:
        return None
    if any(a.keyword is not None or a.star for a in node.args):
        return None
    return [a.value for a in node.args]


def launch(item: cst.WithItem) -> Launch | None:
    """The `T.Kernel(...)` launch `item` opens, or None for any other context manager."""
    call = item.item
    if not (isinstance(call, cst.Call) and dotted(call.func).endswith("Kernel")):
        return None
    target = item.asname.name if item.asname is not None else None
    if isinstance(target, (cst.Tuple, cst.List)):
        names = [e.value.value if isinstance(e.value, cst.Name) else "" for e in target.elements]
    else:
        names = [target.value if isinstance(target, cst.Name) else ""]
    return Launch(
        call,
        [a.value for a in call.args if a.keyword is None],
        any(a.keyword is not None and a.keyword.value == "is_npu" for a in call.args),
        names,
    )


def annotation_heads(fn: cst.FunctionDef, every_kind: bool = False) -> dict[str, str]:
    """Parameter -> the dotted head of its annotation (`T.Tensor` of `A: T.Tensor((M, K), dt)`
    and of `A: T.Tensor`; '' when it has none that is a dotted name) for the plain parameters
    of `fn`, and with `every_kind` its positional-only and keyword-only ones too."""
    params = fn.params
    kinds = (
        (*params.posonly_params, *params.params, *params.kwonly_params)
        if every_kind
        else params.params
    )
    out: dict[str, str] = {}
    for p in kinds:
        ann = p.annotation.annotation if p.annotation is not None else None
        head = ann.func if isinstance(ann, cst.Call) else ann
        out[p.name.value] = dotted(head) if head is not None else ""
    return out


def tensor_params(fn: cst.FunctionDef) -> set[str]:
    """The plain parameters of a prim_func annotated as tensors (`X: T.Tensor(...)`)."""
    return {name for name, head in annotation_heads(fn).items() if "Tensor" in head}


def append_item(items: Sequence, item, opener_ws: cst.BaseParenthesizableWhitespace) -> list:
    """`items` (Args or DictElements) with `item` appended in the same layout.

    One-line lists get ", item"; lists with a trailing comma (one item per
    line) get the item on its own line, with the separator whitespace of the
    previous items (or the opener's, for a single item).
    """
    items = list(items)
    if not items:
        return [item]
    last = items[-1]
    if isinstance(last.comma, cst.Comma):
        prev = items[-2].comma if len(items) > 1 else None
        sep = prev.whitespace_after if isinstance(prev, cst.Comma) else opener_ws
        after = last.comma.whitespace_after
        if isinstance(after, cst.ParenthesizedWhitespace) and isinstance(
            sep, cst.ParenthesizedWhitespace
        ):
            # a comment after the last item stays on its line; the new item's line gets none
            sep = sep.with_changes(first_line=after.first_line)
            after = after.with_changes(first_line=cst.TrailingWhitespace())
        items[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=sep))
        items.append(item.with_changes(comma=last.comma.with_changes(whitespace_after=after)))
    else:
        if isinstance(item, cst.Arg):
            # `f(\n    a, b\n)`: the break before `)` follows the new item
            item = item.with_changes(whitespace_after_arg=last.whitespace_after_arg)
            last = last.with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
        items[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        items.append(item)
    return items


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value` appended, in the call's own layout."""
    new = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    return call.with_changes(args=append_item(call.args, new, call.whitespace_before_args))


def changed_lines(parent: str, variant: str) -> list[tuple[str, str]]:
    """(removed, added) line pairs of a change, '' for a pure insertion or deletion.

    Used by tests and by the proposer's summary to show exactly what moved.
    """
    pairs: list[tuple[str, str]] = []
    a, b = parent.splitlines(), variant.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        old, new = a[i1:i2], b[j1:j2]
        for k in range(max(len(old), len(new))):
            pairs.append((old[k] if k < len(old) else "", new[k] if k < len(new) else ""))
    return pairs
