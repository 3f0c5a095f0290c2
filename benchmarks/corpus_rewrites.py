"""Does a kernel's judgement survive a rewrite that keeps its meaning? (issue 13)

    python benchmarks/corpus_rewrites.py alias --json OUT.json [--base BASE.json] [KERNEL ...]
    python benchmarks/corpus_rewrites.py none --json BASE.json

Each rewrite below keeps what a corpus kernel (tests/data/upstream_kernels) means and keeps
every line where it was, so the kernel's hand-written expectation (expected.yaml) holds for the
rewritten file unchanged (tuple_bind moves bindings onto one line; the expectation's lines move
with them). The corpus judge (tests/test_strategies_upstream_corpus.py) is run on
the rewritten file, first moves and every value; every kernel whose tally (counts and items)
differs from the unrewritten file's is a place where tunebot reads the spelling, not the kernel.
Users write the same kernel many ways; the corpus holds one spelling of each.

- alias: TileLang's language module bound as `TL` (`import tilelang.language as TL`);
- qualified: `import tilelang.language` and every `T.x` written `tilelang.language.x`;
- from_import: `from tilelang import language as T`;
- quotes: every plain double-quoted string single-quoted (`'npuir.enable_auto_multi_buffer'`);
- annotate: each expected knob's literal binding annotated (`block_M: int = 64`, `def f(block_M:
  int = 64)`), outside any @prim_func (TVMScript reads an annotation there as a type);
- annotate_all: every literal binding outside a @prim_func annotated (`dtype: str = "float16"`);
- comment: a trailing comment on every line an expectation names;
- decoy: an unrelated function, never called, appended at the end, binding each expected knob
  name to 7 (a same-named local elsewhere: issue 13's scope rule);
- kwargs: positional arguments at calls of an undecorated module-level function bound once
  (`matmul(1024, 1024)` -> `matmul(M=1024, N=1024)`): shapes read from keyword call sites;
- kwarg_order: the keyword arguments of a one-line call whose values make no call, reversed;
- tl_alias: `import tilelang as tl`, every use of the name outside an import written `tl`;
- digits: integers of four digits or more with separators (`8192` -> `8_192`);
- dtype_str: `T.float16` and the like given as a value (an argument, a default, the right side of
  `=`), never an annotation or a call, written as the string `"float16"`;
- tuple_bind: consecutive one-line `name = literal` bindings outside a @prim_func bound at once
  (`block_M, block_N = 64, 128`), the lines they leave blank; the one rewrite that moves a
  binding, so the expectation's knob lines (and the lines items cite) move with it;
- kilo: a multiple of 1024 (2048 and up) given as a whole value off the knobs' lines written
  `8 * 1024`;
- tabs: every logical line indented with one tab per block level instead of spaces
  (continuation lines and the text inside strings as they were);
- crlf: every line ended CR LF (a checkout with `core.autocrlf`), files already so left out.

A rewrite that does not apply to a kernel (no such import, no such binding) skips it. Needs the
corpus materialised (tests/data/upstream_kernels/README.md); the base run (`none`) is the
unrewritten judge, written by the same code.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import multiprocessing
import re
import sys
import tokenize
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import libcst as cst
import libcst.metadata

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

KEYS = (
    "produced",
    "correct",
    "refused",
    "wrong_site",
    "noop",
    "breaking",
    "refused_valid",
    "missed_knobs",
    "unexplained",
)


def _replace_tokens(src: str, edits: list[tuple[tuple[int, int], tuple[int, int], str]]) -> str:
    """Apply same-line token edits ((row, col), (row, col), text), rows 1-based."""
    lines = src.splitlines(keepends=True)
    for (row, c0), (_, c1), new in sorted(edits, reverse=True):
        lines[row - 1] = lines[row - 1][:c0] + new + lines[row - 1][c1:]
    return "".join(lines)


def _tokens(src: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(src).readline))


LANGUAGE_AS_T = re.compile(
    r"^(import tilelang\.language as T|from tilelang import .*\blanguage as T)\b", re.M
)


def alias(src: str, names: set[str], lines: set[int]) -> str | None:
    if not LANGUAGE_AS_T.search(src):
        return None
    toks = _tokens(src)
    if any(t.type == tokenize.NAME and t.string == "TL" for t in toks):
        return None
    return _replace_tokens(
        src, [(t.start, t.end, "TL") for t in toks if t.type == tokenize.NAME and t.string == "T"]
    )


def qualified(src: str, names: set[str], lines: set[int]) -> str | None:
    if not re.search(r"^import tilelang\.language as T$", src, re.M):
        return None
    toks = _tokens(src)
    edits = []
    for i, t in enumerate(toks):
        if t.type != tokenize.NAME or t.string != "T":
            continue
        if i + 1 < len(toks) and toks[i + 1].string == ".":
            edits.append((t.start, t.end, "tilelang.language"))
        elif not (i >= 1 and toks[i - 1].string == "as"):
            return None  # `T` read as a value: left to the alias rewrite
    out = _replace_tokens(src, edits)
    return re.sub(r"^import tilelang\.language as T$", "import tilelang.language", out, flags=re.M)


def quotes(src: str, names: set[str], lines: set[int]) -> str | None:
    edits = [
        (t.start, t.end, "'" + t.string[1:-1] + "'")
        for t in _tokens(src)
        if t.type == tokenize.STRING
        and re.fullmatch(r'"[^"\'\\\n]*"', t.string)  # plain, one line, no quote or escape inside
    ]
    return _replace_tokens(src, edits) if edits else None


def from_import(src: str, names: set[str], lines: set[int]) -> str | None:
    out, n = re.subn(
        r"^import tilelang\.language as T\b", "from tilelang import language as T", src, flags=re.M
    )
    return out if n else None


_TYPES: dict[type, str] = {cst.Integer: "int", cst.Float: "float", cst.SimpleString: "str"}


class _Annotate(cst.CSTTransformer):
    def __init__(self, names: set[str] | None) -> None:
        self.names, self.count, self.depth = names, 0, 0

    @staticmethod
    def _prim(node: cst.FunctionDef) -> bool:
        return any("prim_func" in cst.Module([]).code_for_node(d) for d in node.decorators)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.depth += self._prim(node)

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        self.depth -= self._prim(original_node)
        return updated_node

    def _wanted(self, name: str, value: cst.BaseExpression | None) -> bool:
        if self.depth or value is None or type(value) not in _TYPES or name == "_":
            return False
        return (self.names is None) or (name in self.names and isinstance(value, cst.Integer))

    def leave_Assign(
        self, original_node: cst.Assign, updated_node: cst.Assign
    ) -> cst.Assign | cst.AnnAssign:
        (target, *more) = updated_node.targets
        if more or not isinstance(target.target, cst.Name):
            return updated_node
        if not self._wanted(target.target.value, updated_node.value):
            return updated_node
        self.count += 1
        kind = _TYPES[type(updated_node.value)]
        return cst.AnnAssign(target.target, cst.Annotation(cst.Name(kind)), updated_node.value)

    def leave_Param(self, original_node: cst.Param, updated_node: cst.Param) -> cst.Param:
        if updated_node.annotation is not None or not self._wanted(
            updated_node.name.value, updated_node.default
        ):
            return updated_node
        self.count += 1
        kind = _TYPES[type(updated_node.default)]
        return updated_node.with_changes(annotation=cst.Annotation(cst.Name(kind)))


def _annotated(src: str, names: set[str] | None) -> str | None:
    t = _Annotate(names)
    out = cst.parse_module(src).visit(t).code
    return out if t.count else None


def annotate(src: str, names: set[str], lines: set[int]) -> str | None:
    return _annotated(src, names)


def annotate_all(src: str, names: set[str], lines: set[int]) -> str | None:
    return _annotated(src, None)


def comment(src: str, names: set[str], lines: set[int]) -> str | None:
    ends: dict[int, int] = {}
    commented: set[int] = set()
    for t in _tokens(src):
        if t.type in (tokenize.NEWLINE, tokenize.NL):
            ends[t.start[0]] = t.start[1]
        elif t.type == tokenize.COMMENT:
            commented.add(t.start[0])
    edits = [
        ((row, ends[row]), (row, ends[row]), "  # set by hand")
        for row in lines
        if row in ends and row not in commented
    ]
    return _replace_tokens(src, edits) if edits else None


def decoy(src: str, names: set[str], lines: set[int]) -> str | None:
    bound = sorted(n for n in names if n.isidentifier())
    if not bound:
        return None
    body = "".join(f"    {n} = 7\n" for n in bound)
    return f"{src.rstrip()}\n\n\ndef _unrelated_helper():\n{body}    return ({', '.join(bound)},)\n"


def _bindings(module: cst.Module) -> dict[str, int]:
    """How many times each name is bound anywhere in the file (defs, assignments, params, imports)."""
    counts: dict[str, int] = {}

    class Count(cst.CSTVisitor):
        def _add(self, name: str) -> None:
            counts[name] = counts.get(name, 0) + 1

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            self._add(node.name.value)

        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            self._add(node.name.value)

        def visit_Param(self, node: cst.Param) -> None:
            self._add(node.name.value)

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            for n in _names_in(node.target):
                self._add(n)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            for n in _names_in(node.target):
                self._add(n)

        def visit_For(self, node: cst.For) -> None:
            for n in _names_in(node.target):
                self._add(n)

        def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
            bound = node.asname.name if node.asname else node.name
            for n in _names_in(bound):
                self._add(n)

    module.visit(Count())
    return counts


def _names_in(node: cst.CSTNode) -> list[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, cst.Attribute):
        return _names_in(node.value)[:1] if isinstance(node.value, cst.Name) else []
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for e in node.elements for n in _names_in(e.value)]
    return []


class _Keywords(cst.CSTTransformer):
    """Positional arguments at calls of plain module-level functions passed by keyword."""

    def __init__(self, signatures: dict[str, list[str]]) -> None:
        self.signatures, self.count = signatures, 0

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        func = updated_node.func
        if not isinstance(func, cst.Name) or func.value not in self.signatures:
            return updated_node
        params = self.signatures[func.value]
        args = list(updated_node.args)
        if any(a.star for a in args):
            return updated_node
        tight = cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        )
        for i, a in enumerate(args):
            if a.keyword is None and i < len(params):
                args[i] = a.with_changes(keyword=cst.Name(params[i]), equal=tight)
                self.count += 1
        return updated_node.with_changes(args=args)


def kwargs(src: str, names: set[str], lines: set[int]) -> str | None:
    module = cst.parse_module(src)
    bound = _bindings(module)
    signatures = {
        s.name.value: [p.name.value for p in s.params.params]
        for s in module.body
        if isinstance(s, cst.FunctionDef)
        and not s.decorators
        and not s.params.posonly_params
        and not isinstance(s.params.star_arg, cst.Param)
        and bound.get(s.name.value) == 1
    }
    t = _Keywords(signatures)
    out = module.visit(t).code
    return out if t.count else None


class _Pure(cst.CSTVisitor):
    def __init__(self) -> None:
        self.pure = True

    def visit_Call(self, node: cst.Call) -> None:
        self.pure = False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self.pure = False


class _Reorder(cst.CSTTransformer):
    """Keyword arguments of a one-line call, values free of calls, in reverse order."""

    METADATA_DEPENDENCIES = (cst.metadata.PositionProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        pos = self.get_metadata(cst.metadata.PositionProvider, original_node)
        args = list(updated_node.args)
        keyed = [i for i, a in enumerate(args) if a.keyword is not None]
        if pos.start.line != pos.end.line or len(keyed) < 2 or any(a.star for a in args):
            return updated_node
        if keyed != list(range(keyed[0], len(args))):
            return updated_node
        for i in keyed:
            v = _Pure()
            args[i].value.visit(v)
            if not v.pure:
                return updated_node
        values = [args[i] for i in keyed]
        commas = [a.comma for a in values]
        for i, a, comma in zip(keyed, reversed(values), commas, strict=True):
            args[i] = a.with_changes(comma=comma)
        self.count += 1
        return updated_node.with_changes(args=args)


def kwarg_order(src: str, names: set[str], lines: set[int]) -> str | None:
    t = _Reorder()
    out = cst.metadata.MetadataWrapper(cst.parse_module(src)).visit(t).code
    return out if t.count else None


def _import_lines(toks: list[tokenize.TokenInfo]) -> set[int]:
    """Rows of tokens inside import statements."""
    rows: set[int] = set()
    inside = False
    first = True
    for t in toks:
        if first and t.type == tokenize.NAME:
            inside = t.string in ("import", "from")
        if t.type not in (tokenize.INDENT, tokenize.DEDENT, tokenize.NL, tokenize.COMMENT):
            first = False
        if inside:
            rows.update(range(t.start[0], t.end[0] + 1))
        if t.type == tokenize.NEWLINE:
            inside, first = False, True
    return rows


def tl_alias(src: str, names: set[str], lines: set[int]) -> str | None:
    if not re.search(r"^import tilelang$", src, re.M):
        return None
    toks = _tokens(src)
    if any(t.type == tokenize.NAME and t.string == "tl" for t in toks):
        return None
    imports = _import_lines(toks)
    edits = [
        (t.start, t.end, "tl")
        for i, t in enumerate(toks)
        if t.type == tokenize.NAME
        and t.string == "tilelang"
        and t.start[0] not in imports
        and not (i and toks[i - 1].string == ".")
    ]
    out = re.sub(r"^import tilelang$", "import tilelang as tl", src, count=1, flags=re.M)
    return _replace_tokens(out, edits)


def digits(src: str, names: set[str], lines: set[int]) -> str | None:
    edits = [
        (t.start, t.end, f"{int(t.string):_}")
        for t in _tokens(src)
        if t.type == tokenize.NUMBER and re.fullmatch(r"[1-9][0-9]{3,}", t.string)
    ]
    return _replace_tokens(src, edits) if edits else None


DTYPES = [
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float8_e4m3",
    "float8_e5m2",
]


def dtype_str(src: str, names: set[str], lines: set[int]) -> str | None:
    if not LANGUAGE_AS_T.search(src):
        return None
    toks = _tokens(src)
    edits = []
    for i in range(len(toks) - 2):
        a, dot, d = toks[i : i + 3]
        before = toks[i - 1].string if i else ""
        after = toks[i + 3] if i + 3 < len(toks) else None
        ends = after is not None and (
            after.string in (",", ")") or after.type in (tokenize.NEWLINE, tokenize.COMMENT)
        )
        # only a value: an argument, a default or the right side of `=`, never an annotation
        value = ends and before in ("=", ",", "(")
        if (a.string, dot.string) == ("T", ".") and d.string in DTYPES and value:
            edits.append((a.start, d.end, f'"{d.string}"'))
    return _replace_tokens(src, edits) if edits else None


def _literal(node: cst.BaseExpression) -> bool:
    """A number or plain string, or one negated: a value that reads no name."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)) and not node.lpar


class _Runs(cst.CSTVisitor):
    """Runs of two or more consecutive one-line `name = literal` statements outside a @prim_func,
    each with no comment, binding distinct names: [(first line, [(line, name, value code)])]."""

    METADATA_DEPENDENCIES = (cst.metadata.PositionProvider,)

    def __init__(self, commented: set[int]) -> None:
        super().__init__()
        self.commented, self.runs, self.depth = commented, [], 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.depth += _Annotate._prim(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.depth -= _Annotate._prim(original_node)

    def _one(self, stmt: cst.CSTNode) -> tuple[int, str, str] | None:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None
        a = stmt.body[0]
        if not isinstance(a, cst.Assign) or len(a.targets) != 1:
            return None
        target = a.targets[0].target
        pos = self.get_metadata(cst.metadata.PositionProvider, stmt)
        if not isinstance(target, cst.Name) or not _literal(a.value):
            return None
        if pos.start.line != pos.end.line or pos.start.line in self.commented:
            return None
        return pos.start.line, target.value, cst.Module([]).code_for_node(a.value)

    def _body(self, body: Sequence[cst.CSTNode]) -> None:
        if self.depth:
            return
        run: list[tuple[int, str, str]] = []
        for stmt in [*body, None]:
            one = None if stmt is None else self._one(stmt)
            if one is not None and one[1] not in {n for _, n, _ in run}:
                run.append(one)
                continue
            if len(run) >= 2:
                self.runs.append(run)
            run = [one] if one is not None else []

    def visit_Module(self, node: cst.Module) -> None:
        self._body(node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._body(node.body)


def _tuple_runs(src: str) -> list[list[tuple[int, str, str]]]:
    commented = {t.start[0] for t in _tokens(src) if t.type == tokenize.COMMENT}
    v = _Runs(commented)
    cst.metadata.MetadataWrapper(cst.parse_module(src)).visit(v)
    return v.runs


def tuple_bind_moves(src: str) -> dict[int, int]:
    """Where tuple_bind moves each binding it merges: its old line -> the run's first line."""
    return {line: run[0][0] for run in _tuple_runs(src) for line, _, _ in run[1:]}


def tuple_bind(src: str, names: set[str], lines: set[int]) -> str | None:
    runs = _tuple_runs(src)
    if not runs:
        return None
    rows = src.splitlines(keepends=True)
    for run in runs:
        first = rows[run[0][0] - 1]
        indent = first[: len(first) - len(first.lstrip())]
        names_ = ", ".join(n for _, n, _ in run)
        values = ", ".join(v for _, _, v in run)
        rows[run[0][0] - 1] = f"{indent}{names_} = {values}\n"
        for line, _, _ in run[1:]:
            rows[line - 1] = "\n"
    return "".join(rows)


def kilo(src: str, names: set[str], lines: set[int]) -> str | None:
    toks = _tokens(src)
    edits = []
    for i, t in enumerate(toks):
        # a knob's own value stays a literal: on the lines an expectation names, or bound by name
        named = i >= 2 and toks[i - 1].string == "=" and toks[i - 2].string in names
        if t.type != tokenize.NUMBER or named or t.start[0] in lines:
            continue
        if not re.fullmatch(r"[1-9]\d*", t.string):
            continue
        n = int(t.string)
        if n < 2048 or n % 1024:
            continue
        before = toks[i - 1].string if i else ""
        after = toks[i + 1] if i + 1 < len(toks) else None
        # a whole value only (a binding, default, argument or element): no operator to bind tighter
        ends = after is not None and (
            after.string in (",", ")", "]") or after.type in (tokenize.NEWLINE, tokenize.COMMENT)
        )
        if ends and before in ("=", ",", "(", "["):
            edits.append((t.start, t.end, f"{n // 1024} * 1024"))
    return _replace_tokens(src, edits) if edits else None


def tabs(src: str, names: set[str], lines: set[int]) -> str | None:
    toks = _tokens(src)
    if any(t.type == tokenize.INDENT and "\t" in t.string for t in toks):
        return None  # already tab-indented
    depth, starts, logical_start = 0, {}, True
    for t in toks:
        if t.type == tokenize.INDENT:
            depth += 1
        elif t.type == tokenize.DEDENT:
            depth -= 1
        elif t.type in (tokenize.NL, tokenize.COMMENT, tokenize.ENCODING, tokenize.ENDMARKER):
            continue
        elif t.type == tokenize.NEWLINE:
            logical_start = True
        elif logical_start:
            starts[t.start[0]] = depth
            logical_start = False
    rows = src.splitlines(keepends=True)
    for row, level in starts.items():
        text = rows[row - 1]
        body = text.lstrip(" ")
        if level and len(text) - len(body):
            rows[row - 1] = "\t" * level + body
    out = "".join(rows)
    return out if out != src else None


def crlf(src: str, names: set[str], lines: set[int]) -> str | None:
    if "\r" in src:
        return None  # already CRLF (or mixed): left as upstream wrote it
    return src.replace("\n", "\r\n")


def none(src: str, names: set[str], lines: set[int]) -> str | None:
    return src


REWRITES: dict[str, Callable[[str, set[str], set[int]], str | None]] = {
    f.__name__: f
    for f in (
        none,
        alias,
        qualified,
        from_import,
        quotes,
        annotate,
        annotate_all,
        comment,
        decoy,
        kwargs,
        kwarg_order,
        tl_alias,
        digits,
        dtype_str,
        tuple_bind,
        kilo,
        tabs,
        crlf,
    )
}

# rewrites that move bindings between lines: the expectation's lines are moved the same way
MOVES: dict[str, Callable[[str], dict[int, int]]] = {"tuple_bind": tuple_bind_moves}


def expected_names_lines(exp: dict) -> tuple[set[str], set[int]]:
    """The bare knob names and the lines a kernel's expectation names."""
    knobs = exp.get("block_size") or {}
    names = {k.rsplit(".", 1)[-1] for k in (*knobs, *(exp.get("dropped") or []))}
    lines = {v["line"] for v in knobs.values()} | {p["line"] for p in exp.get("pipeline") or []}
    return names, lines


def judge(args: tuple[str, str]) -> tuple[str, dict]:
    """One kernel's tallies after one rewrite ({"skipped": why} when none can be made)."""
    import test_strategies_upstream_corpus as corpus
    from _pytest.outcomes import Skipped

    kid, which = args
    try:
        src = corpus.source_of(kid)
    except Skipped:
        return kid, {"skipped": "not materialised"}
    names, lines = expected_names_lines(corpus.EXPECTED[kid])
    out = REWRITES[which](src, names, lines)
    if out is None:
        return kid, {"skipped": "does not apply"}
    if which != "decoy" and len(out.splitlines()) != len(src.splitlines()):
        raise AssertionError(f"{which} moved the lines of {kid}")
    moved = MOVES[which](src) if which in MOVES else {}
    original, expected = corpus.source_of, corpus.EXPECTED[kid]
    corpus.source_of = lambda _kid: out
    corpus.EXPECTED[kid] = _moved_expectation(expected, moved)
    row: dict[str, object]
    try:
        row = {
            mode: dataclasses.asdict(corpus.judge_kernel(kid, mode == "every"))
            for mode in ("first", "every")
        }
    except Exception as exc:  # a crash on a rewritten file is a finding, not a stop
        row = {"crash": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        corpus.source_of, corpus.EXPECTED[kid] = original, expected
    if moved:
        row["moved"] = {str(a): b for a, b in moved.items()}
    return kid, row


def _moved_expectation(exp: dict, moved: dict[int, int]) -> dict:
    """The expectation with each knob's line (and each pipeline depth's, which may be a
    `NUM_STAGES = 2` binding) where the rewrite moved its binding."""
    if not moved:
        return exp
    knobs = {
        k: {**v, "line": moved.get(v["line"], v["line"])}
        for k, v in (exp.get("block_size") or {}).items()
    }
    loops = [{**p, "line": moved.get(p["line"], p["line"])} for p in exp.get("pipeline") or []]
    return {**exp, "block_size": knobs, "pipeline": loops}


_RESPELLED = re.compile(r"\bTL\b|\btilelang\.language(?=\.)")
_QUOTED = re.compile(r"'([^'\"\\\n]*)'")
_TL = re.compile(r"(?<![.\w])tl(?=\.)")
_SEPARATED = re.compile(r"(?<=\d)_(?=\d)")
_DTYPE = re.compile(r"\bT\.(" + "|".join(DTYPES) + r")\b(?!\()")


def _respelled(item: str) -> str:
    """An item read back to the unrewritten spelling: the rewrites' marks undone on both sides."""
    item = _QUOTED.sub(r'"\1"', _RESPELLED.sub("T", item))
    item = _DTYPE.sub(r'"\1"', _SEPARATED.sub("", _TL.sub("tilelang", item)))
    item = item.replace("(keyword at line", "(positional at line")
    return item.replace("  # set by hand", "").replace(": int =", " =")


_LINE = re.compile(r"\bline (\d+)")


def _items(row: dict, mode: str, moved: dict[str, int] | None = None) -> dict:
    """A tally with each item read back to the unrewritten spelling (a message quotes the file);
    with `moved`, the line numbers an item cites moved as the rewrite moved the bindings."""
    t = row[mode]

    def read(item: str) -> str:
        item = _respelled(item)
        if moved:
            item = _LINE.sub(lambda m: f"line {moved.get(m.group(1), m.group(1))}", item)
        return item

    return {k: t[k] if isinstance(t[k], int) else sorted(read(i) for i in t[k]) for k in KEYS}


def compare(base: dict, rewritten: dict) -> dict:
    """Kernels judged after the rewrite: how many, which differ (and how), which crashed."""
    judged = [
        k
        for k, r in rewritten.items()
        if "skipped" not in r and k in base and "skipped" not in base[k]
    ]
    crashed = sorted(k for k in judged if "crash" in rewritten[k])
    differ: dict[str, list[str]] = {}
    for kid in judged:
        if kid in crashed:
            continue
        lines = []
        for mode in ("first", "every"):
            a = _items(base[kid], mode, rewritten[kid].get("moved"))
            b = _items(rewritten[kid], mode)
            for k in KEYS:
                if isinstance(a[k], int):
                    if a[k] != b[k]:
                        lines.append(f"{mode} {k}: {a[k]} -> {b[k]}")
                    continue
                lines += [f"{mode} {k} gone: {i}" for i in sorted(set(a[k]) - set(b[k]))]
                lines += [f"{mode} {k} new: {i}" for i in sorted(set(b[k]) - set(a[k]))]
        if lines:
            differ[kid] = lines
    return {"judged": len(judged), "differ": differ, "crashed": crashed}


def run(which: str, kernels: Iterable[str], procs: int) -> dict:
    jobs = [(k, which) for k in kernels]
    if procs <= 1:
        return dict(map(judge, jobs))
    with multiprocessing.Pool(procs) as pool:
        return dict(pool.map(judge, jobs, chunksize=4))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rewrite", choices=sorted(REWRITES))
    parser.add_argument("kernels", nargs="*", help="corpus ids (default: every kernel)")
    parser.add_argument("--json", type=Path, required=True, help="write the tallies here")
    parser.add_argument("--base", type=Path, help="a `none` run to compare with")
    parser.add_argument("--procs", type=int, default=2)
    args = parser.parse_args(argv)
    import test_strategies_upstream_corpus as corpus

    kernels = args.kernels or sorted(corpus.KERNELS)
    unknown = sorted(set(kernels) - set(corpus.KERNELS))
    if unknown:
        print(f"error: not corpus kernels: {', '.join(unknown)}", file=sys.stderr)
        return 2
    rows = run(args.rewrite, kernels, args.procs)
    args.json.write_text(json.dumps(rows, indent=0))
    applied = sum("skipped" not in r for r in rows.values())
    print(f"{args.rewrite}: {applied} of {len(rows)} kernels rewritten and judged")
    if args.base is not None:
        result = compare(json.loads(args.base.read_text()), rows)
        for kid, lines in sorted(result["differ"].items()):
            print(f"  {kid}")
            for line in lines:
                print(f"    {line[:240]}")
        same = result["judged"] - len(result["differ"]) - len(result["crashed"])
        print(
            f"{args.rewrite}: {same} of {result['judged']} judged the same as unrewritten; "
            f"{len(result['differ'])} differ, {len(result['crashed'])} crashed"
            + (f" ({', '.join(result['crashed'])})" if result["crashed"] else "")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
