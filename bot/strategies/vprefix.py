"""V-prefix renames: `T.npuir_add(...)` -> `T.vadd(...)`. STYLE ONLY.

In TileLang-NPUIR (tilelang/language/__init__.py of tile-ai/tilelang-ascend,
npuir branch) every v-op is imported as a plain alias of its npuir_ op
(`npuir_add as vadd`), so the rename cannot change speed. The planner plans
it last and its verdict is "style", never an improvement. The table below
lists the v-prefixed aliases upstream defines; names upstream aliases without
a v (gemm, fill, reduce, ...) are not part of this style and are left alone.
The whole file is renamed in one variant: it is one logical (stylistic) change.

The aliases are not in every TileLang-NPUIR: upstream added them in batches on the npuir branch
of tile-ai/tilelang-ascend, from January to March 2026, and pull requests based on older trees
added some alone. A kernel written against an older tree (heldout_p tnp_pipelined_reduce, a pull
request based before them) runs on a TileLang with no `vadd`. The file itself does not say which
TileLang it runs with, so:

- where an NPUIR TileLang is installed, its `tilelang/language/__init__.py` is read (as text,
  never imported) and only the ops it aliases are renamed;
- where none is, the file's own v-calls show part of its tree: a file that calls `T.vcmp` runs
  on a tree with vcmp, and only the aliases every known upstream tree with vcmp also has
  (`IMPLIED`) are renamed;
- where none is and the file calls no v-alias, or tests for one by name (`hasattr(T, "vadd")`:
  written to run without them), nothing shows the aliases exist, and the rename is refused: it
  is style only, so it can gain nothing, and on an older tree it would not run.
"""

from __future__ import annotations

import re
from functools import lru_cache

import libcst as cst

from bot.strategies import installed
from bot.strategies.base import Change, Refusal, Variant
from bot.strategies.source import ParseFailure, dotted, import_bindings, make_variant, parse

STRATEGY = "vprefix"

# npuir name -> v-prefixed alias (upstream: `npuir_<op> as v<op>`).
ALIASES: dict[str, str] = {
    "npuir_add": "vadd",
    "npuir_sub": "vsub",
    "npuir_mul": "vmul",
    "npuir_div": "vdiv",
    "npuir_max": "vmax",
    "npuir_min": "vmin",
    "npuir_or": "vor",
    "npuir_and": "vand",
    "npuir_xor": "vxor",
    "npuir_not": "vnot",
    "npuir_pow": "vpow",
    "npuir_shl": "vshl",
    "npuir_shr": "vshr",
    "npuir_exp": "vexp",
    "npuir_ln": "vln",
    "npuir_exp2": "vexp2",
    "npuir_log2": "vlog2",
    "npuir_sqrt": "vsqrt",
    "npuir_rsqrt": "vrsqrt",
    "npuir_abs": "vabs",
    "npuir_rec": "vrec",
    "npuir_relu": "vrelu",
    "npuir_sigmoid": "vsigmoid",
    "npuir_brc": "vbrc",
    "npuir_cast": "vcast",
    "npuir_clamp": "vclamp",
    "npuir_select": "vselect",
    "npuir_cmp": "vcmp",
    "npuir_bitcast": "vbitcast",
    "npuir_vcos": "vcos",
    "npuir_vsin": "vsin",
    "npuir_verf": "verf",
    "npuir_vtanh": "vtanh",
}


# v-name -> the npuir_ ops whose ALIASES alias every known upstream tree defining that v-name
# also defines (scripts/vprefix_implied.py over 311 versions of tilelang/language/__init__.py in
# the whole history of tile-ai/tilelang-ascend, every fetched pull-request head included, and of
# 13 other clones: its forks, tilelang-mlir-ascend forks, tile-ai/tilelang; 21 define
# v-aliases). A tree with vcmp need not have vmin: pull request 524's head added vmin and vexp2
# on a tree before vcmp. vsigmoid first aliased npuir_vsigmoid.
_JANUARY: tuple[str, ...] = ("npuir_add", "npuir_brc", "npuir_cast", "npuir_div", "npuir_exp")
_JANUARY += ("npuir_max", "npuir_mul", "npuir_sub")
_FEBRUARY = (*_JANUARY, "npuir_clamp", "npuir_abs", "npuir_sigmoid")
IMPLIED: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("vadd", "vsub", "vmax", "vmul", "vdiv", "vexp", "vbrc", "vcast"), _JANUARY),
    "vclamp": (*_JANUARY, "npuir_clamp"),
    "vsigmoid": (*_JANUARY, "npuir_clamp"),
    "vabs": _FEBRUARY,
    "vcmp": (*_FEBRUARY, "npuir_cmp"),
    "vmin": (*_FEBRUARY, "npuir_min", "npuir_exp2"),
    "vexp2": (*_FEBRUARY, "npuir_min", "npuir_exp2"),
    "vnot": (*_FEBRUARY, "npuir_not"),
    **dict.fromkeys(
        (
            "vor", "vand", "vxor", "vpow", "vshl", "vshr", "vln", "vlog2", "vrelu", "vselect",
            "vsqrt", "vrsqrt", "vrec", "vbitcast", "vcos", "vsin", "verf", "vtanh",
        ),
        tuple(ALIASES),
    ),
}  # fmt: skip
# `hasattr(T, "vadd")`, `getattr(T, "vadd", None)`: the file tests for the alias itself
_PROBED = re.compile(r"""\b(?:hasattr|getattr)\(\s*[\w.]+\s*,\s*["'](v\w+)["']""")

NOTHING = "no T.npuir_<op> call with a v-prefixed alias in the source"
UNPARSED = "the source does not parse: "


def _language_aliases(module: cst.Module) -> set[str]:
    """Names bound to tilelang.language (`import tilelang.language as T`, `from tilelang import language as T`)."""
    modules, members = import_bindings(module, "tilelang")
    names = {name for name, target in modules.items() if target == "tilelang.language"}
    names |= {name for name, member in members.items() if member == "language"}
    return names or {"T"}


class _Rename(cst.CSTTransformer):
    def __init__(self, language: set[str], aliases: dict[str, str]) -> None:
        self.language, self.aliases = language, aliases
        self.renamed: dict[str, int] = {}

    def count(self, module: cst.Module) -> set[str]:
        """The npuir_ names of `module` this table would rename (nothing is changed)."""
        module.visit(self)
        return set(self.renamed)

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.Attribute:
        # `T.npuir_add` (T, or the name the file binds the module to), or the module reached
        # through its package (`tilelang.language.npuir_add`, `tl.language.npuir_add`)
        value = original_node.value
        if (isinstance(value, cst.Name) and value.value in self.language) or (
            isinstance(value, cst.Attribute) and dotted(value) == "T"
        ):
            old = updated_node.attr.value
            new = self.aliases.get(old)
            if new:
                self.renamed[old] = self.renamed.get(old, 0) + 1
                return updated_node.with_changes(attr=cst.Name(new))
        return updated_node


_ALIAS_IMPORTED = re.compile(r"\b(npuir_\w+)\s+as\s+(v\w+)\b")  # `npuir_add as vadd`
_ALIAS_ASSIGNED = re.compile(r"^\s*(v\w+)\s*=\s*(npuir_\w+)\s*$", re.M)  # `vadd = npuir_add`
_STAR_IMPORT = re.compile(r"^\s*from\s+\.(\w+)\s+import\s+\*", re.M)  # `from .ops import *`


def _code(text: str) -> str:
    """`text` without its comments: an alias commented out is not defined."""
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def _aliases_in(text: str) -> dict[str, str]:
    code = _code(text)
    found = dict(_ALIAS_IMPORTED.findall(code))
    found.update({npuir: v for v, npuir in _ALIAS_ASSIGNED.findall(code)})
    return found


def installed_aliases() -> tuple[dict[str, str], str] | None:
    """The v-aliases the installed NPUIR TileLang defines, and where they were read; None when
    no TileLang with `npuir_` ops is installed (the upstream table applies). Read in
    `tilelang/language/__init__.py` and in the modules it star-imports (`from .ops import *`),
    spelled `npuir_add as vadd` or `vadd = npuir_add`, outside comments."""
    for path, text in installed.tilelang_files("language/__init__.py"):
        if "npuir_" not in _code(text):
            continue  # not an NPUIR TileLang: it says nothing about these names
        found = _aliases_in(text)
        for sub in _STAR_IMPORT.findall(_code(text)):
            try:
                found.update(_aliases_in((path.parent / f"{sub}.py").read_text(encoding="utf-8")))
            except OSError:
                continue
        return {k: v for k, v in ALIASES.items() if found.get(k) == v}, str(path)
    return None


def rename(source: str, name: str = "kernel.py") -> Variant | Refusal:
    """Rename every `T.npuir_<op>` that has a v-alias to `T.v<op>`: the aliases the installed
    NPUIR TileLang defines; with none installed, the upstream aliases the file's own v-calls
    show its tree has (refused when it calls none)."""
    here = installed_aliases()
    if here is not None:
        aliases, origin = here
        return _rename(source, name, tuple(sorted(aliases.items())), origin)
    return _rename(source, name, None, "")


def _v_calls(module: cst.Module) -> set[str]:
    """The upstream v-aliases `module` calls on TileLang's language module, however bound
    (`T.vadd(...)`, `tilelang.language.vadd(...)`, `vadd(...)` imported from it)."""
    found: set[str] = set()

    class _Seen(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            name = dotted(node.func)
            if name.startswith("T.") and name[2:] in IMPLIED:
                found.add(name[2:])

    module.visit(_Seen())
    return found


def _dated(
    module: cst.Module, source: str, wanted: list[str]
) -> tuple[dict[str, str], str] | Refusal:
    """The upstream aliases the tree of `module` has, as its own v-calls show; `wanted` are the
    npuir_ ops it calls that upstream aliases."""
    probed = sorted({v for v in _PROBED.findall(_code(source)) if v in IMPLIED})
    if probed:
        return Refusal(
            (
                f"the file tests for {', '.join(probed)} itself (hasattr / getattr): it is written "
                "to run on TileLang trees without the v-aliases, and renaming its npuir_ calls "
                "would break it there (the rename is style only)",
            ),
            strategy=STRATEGY,
        )
    used = _v_calls(module)
    if not used:
        return Refusal(
            (
                "no NPUIR TileLang is installed here to read its v-aliases, and the file calls "
                f"no v-prefixed op itself: nothing shows that the TileLang it runs with has "
                f"{', '.join(ALIASES[k] for k in wanted)} (upstream added them from January to "
                "March 2026; older trees have none). The rename is style only; run tunebot where "
                "the kernel's TileLang is installed to have it planned",
            ),
            strategy=STRATEGY,
        )
    have = {k for v in used for k in IMPLIED[v]}
    aliases = {k: v for k, v in ALIASES.items() if k in have}
    calls = ", ".join(f"T.{v}" for v in sorted(used))
    return aliases, f"not every known upstream tree with the file's own {calls} has them"


@lru_cache(maxsize=256)
def _rename(
    source: str, name: str, table: tuple[tuple[str, str], ...] | None, origin: str
) -> Variant | Refusal:
    try:
        wrapper = parse(source)
    except ParseFailure as exc:
        return Refusal((f"{UNPARSED}{exc}",), strategy=STRATEGY)
    module = wrapper.module
    unaliased = sorted(_Rename(_language_aliases(module), ALIASES).count(module))
    if not unaliased:
        return Refusal((NOTHING,), strategy=STRATEGY)
    if table is None:
        dated = _dated(module, source, unaliased)
        if isinstance(dated, Refusal):
            return dated
        aliases, origin = dated
    else:
        aliases = dict(table)
    t = _Rename(_language_aliases(module), aliases)
    new_source = module.visit(t).code
    if not t.renamed:
        if table is not None:
            why = f"the installed TileLang ({origin}) defines no v-alias for {', '.join(unaliased)}"
        else:
            why = f"{', '.join(ALIASES[k] for k in unaliased)}: {origin}"
        return Refusal(
            (f"{why}: renaming could call names the kernel's TileLang does not have",),
            strategy=STRATEGY,
        )
    what = ", ".join(f"{k} -> {aliases[k]} (x{n})" for k, n in sorted(t.renamed.items()))
    change = Change(
        strategy=STRATEGY,
        description=f"v-prefix style: {what}",
        knob=None,
        old=sorted(t.renamed),
        new=sorted(aliases[k] for k in t.renamed),
    )
    return make_variant(source, new_source, change, name)


def offer(source: str, name: str = "kernel.py") -> Variant | Refusal | None:
    """The rename, or why it is not made; None when the file has no upstream-aliased npuir_
    call (or does not parse: the other strategies say so)."""
    r = rename(source, name)
    if isinstance(r, Refusal) and (r.reason == NOTHING or r.reason.startswith(UNPARSED)):
        return None
    return r
