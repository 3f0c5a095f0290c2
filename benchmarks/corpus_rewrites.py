"""Does a kernel's judgement survive a rewrite that keeps its meaning? (issue 13)

    python benchmarks/corpus_rewrites.py alias --json OUT.json [--base BASE.json] [KERNEL ...]
    python benchmarks/corpus_rewrites.py none --json BASE.json

Each rewrite below keeps what a corpus kernel (tests/data/upstream_kernels) means and keeps
every line where it was, so the kernel's hand-written expectation (expected.yaml) holds for the
rewritten file unchanged. The corpus judge (tests/test_strategies_upstream_corpus.py) is run on
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
  name to 7 (a same-named local elsewhere: issue 13's scope rule).

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
from collections.abc import Callable, Iterable
from pathlib import Path

import libcst as cst

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


def none(src: str, names: set[str], lines: set[int]) -> str | None:
    return src


REWRITES: dict[str, Callable[[str, set[str], set[int]], str | None]] = {
    f.__name__: f
    for f in (none, alias, qualified, from_import, quotes, annotate, annotate_all, comment, decoy)
}


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
    original = corpus.source_of
    corpus.source_of = lambda _kid: out  # type: ignore[assignment]
    try:
        row = {
            mode: dataclasses.asdict(corpus.judge_kernel(kid, mode == "every"))
            for mode in ("first", "every")
        }
    except Exception as exc:  # a crash on a rewritten file is a finding, not a stop
        row = {"crash": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        corpus.source_of = original
    return kid, row


_RESPELLED = re.compile(r"\bTL\b|\btilelang\.language(?=\.)")
_QUOTED = re.compile(r"'([^'\"\\\n]*)'")


def _items(row: dict, mode: str) -> dict:
    """A tally with each item read back to the unrewritten spelling (a message quotes the file)."""
    t = row[mode]
    return {
        k: t[k]
        if isinstance(t[k], int)
        else sorted(
            _QUOTED.sub(r'"\1"', _RESPELLED.sub("T", i))
            .replace("  # set by hand", "")
            .replace(": int =", " =")
            for i in t[k]
        )
        for k in KEYS
    }


def compare(base: dict, rewritten: dict) -> dict:
    """Kernels judged after the rewrite: how many, which differ (and how), which crashed."""
    judged = [
        k for k, r in rewritten.items() if "skipped" not in r and "skipped" not in base.get(k, {})
    ]
    crashed = sorted(k for k in judged if "crash" in rewritten[k])
    differ: dict[str, list[str]] = {}
    for kid in judged:
        if kid in crashed:
            continue
        lines = []
        for mode in ("first", "every"):
            a, b = _items(base[kid], mode), _items(rewritten[kid], mode)
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
