"""V-prefix renames: `T.npuir_add(...)` -> `T.vadd(...)`. STYLE ONLY.

In TileLang-NPUIR (tilelang/language/__init__.py of tile-ai/tilelang-ascend,
npuir branch) every v-op is imported as a plain alias of its npuir_ op
(`npuir_add as vadd`), so the rename cannot change speed. The planner plans
it last and its verdict is "style", never an improvement. The table below
lists the v-prefixed aliases upstream defines; names upstream aliases without
a v (gemm, fill, reduce, ...) are not part of this style and are left alone.
The whole file is renamed in one variant: it is one logical (stylistic) change.

The aliases are not in every TileLang-NPUIR: they came in on the npuir branch in January 2026
(tile-ai/tilelang-ascend 7ce8b2e), and a kernel written against an older tree (heldout_p
tnp_pipelined_reduce, a pull request based before it) runs on a TileLang with no `vadd`. The
file itself does not say which TileLang it runs with, so the one the kernel will run on
decides: where an NPUIR TileLang is installed, its `tilelang/language/__init__.py` is read (as
text, never imported) and only the ops it aliases are renamed; where none is, the upstream
aliases below are taken, as documented.
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
    NPUIR TileLang defines, else upstream's."""
    here = installed_aliases()
    aliases, origin = here if here is not None else (ALIASES, "")
    return _rename(source, name, tuple(sorted(aliases.items())), origin)


@lru_cache(maxsize=256)
def _rename(
    source: str, name: str, table: tuple[tuple[str, str], ...], origin: str
) -> Variant | Refusal:
    aliases = dict(table)
    try:
        wrapper = parse(source)
    except ParseFailure as exc:
        return Refusal((str(exc),), strategy=STRATEGY)
    module = wrapper.module
    t = _Rename(_language_aliases(module), aliases)
    new_source = module.visit(t).code
    if not t.renamed:
        unaliased = sorted(_Rename(_language_aliases(module), ALIASES).count(module))
        if origin and unaliased:
            return Refusal(
                (
                    f"the installed TileLang ({origin}) defines no v-alias for "
                    f"{', '.join(unaliased)}: renaming would call names it does not have",
                ),
                strategy=STRATEGY,
            )
        return Refusal(
            ("no T.npuir_<op> call with a v-prefixed alias in the source",), strategy=STRATEGY
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


def applicable(source: str) -> bool:
    return isinstance(rename(source), Variant)
