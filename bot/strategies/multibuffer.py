"""Multi-buffering: the pass config `npuir.enable_auto_multi_buffer`.

(A declared multiplicity knob, e.g. `multi_l1 = 2` with `strategy:
multi_buffer` in tune.yaml, goes through the knob transform instead.)

The flag is found as a dict entry keyed by the string
"npuir.enable_auto_multi_buffer" or by `tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER`.
When absent, its effective value is the mode's default: Developer mode
turns automatic multi-buffering on, Expert mode (upstream's default) leaves
it off. Setting an absent flag adds the entry to the one `pass_configs`
dict, or adds `pass_configs={...}` to the one `tilelang.jit(...)` /
`tilelang.compile(...)` call.
"""

from __future__ import annotations

import re
from functools import lru_cache

import libcst as cst
from libcst.metadata import MetadataWrapper

from bot.strategies.base import Change, Refusal, Variant
from bot.strategies.source import (ParseFailure, bool_value, dotted, line_of, literal_node, make_variant, parse,
                                   replace_node, with_keyword, append_item)

STRATEGY = "multi_buffer"
FLAG = "npuir.enable_auto_multi_buffer"
FLAG_ATTR = "NPUIR_ENABLE_AUTO_MULTI_BUFFER"
_DEVELOPER = re.compile(r"""TILELANG_ASCEND_MODE['"]\s*\]?\s*[,=]\s*['"]Developer['"]""")


def developer_mode(source: str) -> bool:
    """True when the module selects TileLang-Ascend's Developer mode."""
    return bool(_DEVELOPER.search(source))


def _is_flag_key(key: cst.BaseExpression | None) -> bool:
    if isinstance(key, cst.SimpleString):
        return key.evaluated_value == FLAG
    return key is not None and dotted(key).endswith(FLAG_ATTR)


class _Finder(cst.CSTVisitor):
    def __init__(self, wrapper: MetadataWrapper) -> None:
        self.wrapper = wrapper
        self.entries: list[cst.DictElement] = []
        self.config_dicts: list[cst.Dict] = []  # `pass_configs = {...}` / `pass_configs={...}`
        self.compile_calls: list[cst.Call] = []  # tilelang.jit(...) / tilelang.compile(...) without pass_configs

    def visit_DictElement(self, node: cst.DictElement) -> None:
        if _is_flag_key(node.key):
            self.entries.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Dict) and any(
                isinstance(t.target, cst.Name) and t.target.value == "pass_configs" for t in node.targets):
            self.config_dicts.append(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted(node.func)
        kw = next((a for a in node.args if a.keyword is not None and a.keyword.value == "pass_configs"), None)
        if kw is not None and isinstance(kw.value, cst.Dict):
            self.config_dicts.append(kw.value)
        elif kw is None and name in ("tilelang.jit", "tilelang.compile", "jit", "compile"):
            self.compile_calls.append(node)


@lru_cache(maxsize=256)
def _scan(source: str) -> tuple[MetadataWrapper, _Finder]:
    wrapper = parse(source)
    finder = _Finder(wrapper)
    wrapper.visit(finder)
    return wrapper, finder


def current(source: str) -> bool | None:
    """Effective value of the flag, or None when it is set by an expression or more than once."""
    try:
        _, f = _scan(source)
    except ParseFailure:
        return None
    if len(f.entries) > 1:
        return None
    if f.entries:
        return bool_value(f.entries[0].value)
    return developer_mode(source)


@lru_cache(maxsize=1024)  # pure: the planner re-derives the same variants while it searches
def set_flag(source: str, enabled: bool, name: str = "kernel.py") -> Variant | Refusal:
    """Set `npuir.enable_auto_multi_buffer` to `enabled` (one entry, or one added)."""
    try:
        wrapper, f = _scan(source)
    except ParseFailure as exc:
        return Refusal((str(exc),), strategy=STRATEGY)
    module = wrapper.module
    if len(f.entries) > 1:
        lines = ", ".join(str(line_of(wrapper, e)) for e in f.entries)
        return Refusal((f"{FLAG} is set {len(f.entries)} times (lines {lines}); one change cannot pick one",),
                       strategy=STRATEGY)
    if f.entries:
        entry = f.entries[0]
        old = bool_value(entry.value)
        if old is None:
            return Refusal((f"{FLAG} at line {line_of(wrapper, entry)} is an expression, not True/False",),
                           strategy=STRATEGY)
        if old == enabled:
            return Refusal((f"{FLAG} is already {enabled}",), strategy=STRATEGY)
        new_source = replace_node(module, entry.value, literal_node(enabled))
        where = f"line {line_of(wrapper, entry)}"
    else:
        old = developer_mode(source)
        if old == enabled:
            mode = "Developer" if old else "Expert"
            return Refusal((f"{FLAG} is absent and {mode} mode already means {enabled}",), strategy=STRATEGY)
        element = cst.DictElement(key=cst.SimpleString(f'"{FLAG}"'), value=literal_node(enabled))
        if len(f.config_dicts) == 1:
            d = f.config_dicts[0]
            new_source = replace_node(module, d, _with_element(d, element))
            where = f"pass_configs at line {line_of(wrapper, d)}"
        elif not f.config_dicts and len(f.compile_calls) == 1:
            call = f.compile_calls[0]
            new_call = with_keyword(call, "pass_configs", cst.Dict([element]))
            new_source = replace_node(module, call, new_call)
            where = f"{dotted(call.func)}(...) at line {line_of(wrapper, call)}"
        else:
            return Refusal((f"{FLAG} is absent and there is no single pass_configs dict or tilelang.jit/compile "
                            f"call to add it to ({len(f.config_dicts)} dicts, {len(f.compile_calls)} calls)",),
                           strategy=STRATEGY)
    change = Change(strategy=STRATEGY, description=f"{FLAG}: {old} -> {enabled} ({where})",
                    knob=FLAG, old=old, new=enabled)
    return make_variant(source, new_source, change, name)


def _with_element(d: cst.Dict, element: cst.DictElement) -> cst.Dict:
    return d.with_changes(elements=append_item(d.elements, element, d.lbrace.whitespace_after))
