"""V-prefix renames: `T.npuir_add(...)` -> `T.vadd(...)`. STYLE ONLY.

In TileLang-NPUIR (tilelang/language/__init__.py of tile-ai/tilelang-ascend,
npuir branch) every v-op is imported as a plain alias of its npuir_ op
(`npuir_add as vadd`), so the rename cannot change speed. The planner plans
it last and its verdict is "style", never an improvement. The table below
lists the v-prefixed aliases upstream defines; names upstream aliases without
a v (gemm, fill, reduce, ...) are not part of this style and are left alone.
The whole file is renamed in one variant: it is one logical (stylistic) change.
"""

from __future__ import annotations

from functools import lru_cache

import libcst as cst

from bot.strategies.base import Change, Refusal, Variant
from bot.strategies.source import ParseFailure, import_bindings, make_variant, parse

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
    def __init__(self, language: set[str]) -> None:
        self.language = language
        self.renamed: dict[str, int] = {}

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.Attribute:
        if isinstance(updated_node.value, cst.Name) and updated_node.value.value in self.language:
            old = updated_node.attr.value
            new = ALIASES.get(old)
            if new:
                self.renamed[old] = self.renamed.get(old, 0) + 1
                return updated_node.with_changes(attr=cst.Name(new))
        return updated_node


@lru_cache(maxsize=256)
def rename(source: str, name: str = "kernel.py") -> Variant | Refusal:
    """Rename every `T.npuir_<op>` that has a v-alias to `T.v<op>`."""
    try:
        wrapper = parse(source)
    except ParseFailure as exc:
        return Refusal((str(exc),), strategy=STRATEGY)
    module = wrapper.module
    t = _Rename(_language_aliases(module))
    new_source = module.visit(t).code
    if not t.renamed:
        return Refusal(
            ("no T.npuir_<op> call with a v-prefixed alias in the source",), strategy=STRATEGY
        )
    what = ", ".join(f"{k} -> {ALIASES[k]} (x{n})" for k, n in sorted(t.renamed.items()))
    change = Change(
        strategy=STRATEGY,
        description=f"v-prefix style: {what}",
        knob=None,
        old=sorted(t.renamed),
        new=sorted(ALIASES[k] for k in t.renamed),
    )
    return make_variant(source, new_source, change, name)


def applicable(source: str) -> bool:
    return isinstance(rename(source), Variant)
