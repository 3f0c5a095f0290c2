"""Multi-buffering: the pass config `npuir.enable_auto_multi_buffer`.

(A declared multiplicity knob, e.g. `multi_l1 = 2` with `strategy:
multi_buffer` in tune.yaml, goes through the knob transform instead.)

The flag is found as a dict entry keyed by the string
"npuir.enable_auto_multi_buffer" or by `<tilelang>.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER`
(any alias: `import tilelang as tl` is the same module).
When absent, its effective value is TileLang's own default: read from the
installed TileLang's `jit/jit_npu.py` when there is one (never imported, only
read), else upstream's documented default, which is ON in both Expert and
Developer mode (`pass_configs.get("npuir.enable_auto_multi_buffer", True)`).
Both directions are planned. Setting an absent flag adds the entry to the one
`pass_configs` dict, or adds `pass_configs={...}` to the one `jit(...)` /
`compile(...)` call. Refused, with the reason: a file that does not target TileLang-NPUIR (the
ascendc/PTO back end of Ascend TileLang has no such pass config), a call that also passes
`**options` (the keyword could be passed twice), several candidate calls, and
turning it on where the kernel disables automatic sync injection (its manual
flags cannot cover buffers the compiler adds) or synchronises by hand in its body (paired
`T.set_flag`/`T.wait_flag`, cross-core `T.sync_block_set`/`T.sync_block_wait`, `T.set_cross_flag`/
`T.wait_cross_flag`: flags that pair the buffers the author rotates, which the compiler's added
copies would not be paired by; where the entry is the `pass_configs` of one jit decorator, flags
inside another jit-decorated factory of the file are another kernel's and do not count), and
turning it on where the file sets it False
with a comment about buffering attached to the entry (the lines just above it, or after it on its
line): the author turned it off on purpose and says why (a register budget the doubled buffers
overshoot, buffers managed by hand), which one flip cannot weigh.
"""

from __future__ import annotations

import functools
import re
from functools import lru_cache

import libcst as cst
from libcst.metadata import MetadataWrapper

from bot.strategies import installed
from bot.strategies.base import Change, Refusal, Variant
from bot.strategies.source import (
    ParseFailure,
    append_item,
    bool_value,
    dotted,
    import_bindings,
    line_of,
    literal_node,
    make_variant,
    parse,
    replace_node,
    with_keyword,
)

STRATEGY = "multi_buffer"
FLAG = "npuir.enable_auto_multi_buffer"
FLAG_ATTR = "NPUIR_ENABLE_AUTO_MULTI_BUFFER"
MANUAL_SYNC_ATTR = "NPUIR_DISABLE_HIVM_AUTO_INJECT_SYNC"
MANUAL_SYNC = "npuir.disable_hivm_auto_inject_sync"
UPSTREAM_DEFAULT = True  # tile-ai/tilelang-ascend npuir, tilelang/jit/jit_npu.py, both modes
_MODE = re.compile(r"""TILELANG_ASCEND_MODE['"]\s*\]?\s*[,=]\s*['"]([^'"]*)['"]""")
_EXPERT = (
    "expert",
    "exp",
    "e",
)  # upstream's spellings of Expert; anything else is Developer ("Dev", ...)
# What marks a TileLang-NPUIR kernel: the npuir target, an npuir pass config, an npuir op.
_NPUIR_MARK = re.compile(r"""["']npuir["']|["']npuir\.|PassConfigKey\.NPUIR_|\bnpuir_[a-z]""")
# Calls that pair a producer with a consumer by hand (a flag set on one pipe or core, waited on
# by another): a kernel that makes them rotates its own buffers between the two sides.
MANUAL_SYNC_CALLS = frozenset(
    {
        "set_flag",
        "wait_flag",
        "sync_block_set",
        "sync_block_wait",
        "set_cross_flag",
        "wait_cross_flag",
        "ascend_sync_inter_arrive",
        "ascend_sync_inter_wait",
    }
)
_DEFAULT_IN_SOURCE = re.compile(r"""["']npuir\.enable_auto_multi_buffer["']\s*,\s*(True|False)""")


def npuir_kernel(source: str) -> bool:
    """True when the file targets TileLang-NPUIR, the only compiler that reads the flag."""
    return _NPUIR_MARK.search(source) is not None


def developer_mode(source: str) -> bool:
    """True when the module selects Developer mode (`Developer`, `Dev`, any value upstream does not read as
    Expert); unset means Expert."""
    m = _MODE.search(source)
    return m is not None and m.group(1).strip().lower() not in _EXPERT


@functools.cache
def default_enabled() -> tuple[bool, str]:
    """The flag's value when absent, and where that comes from (installed TileLang, else upstream's default)."""
    for path, text in installed.tilelang_files("jit/jit_npu.py"):
        m = _DEFAULT_IN_SOURCE.search(text)
        if m:
            return m.group(1) == "True", f"installed TileLang ({path})"
    return (
        UPSTREAM_DEFAULT,
        "upstream TileLang-Ascend default (jit_npu.py: on in Expert and Developer mode)",
    )


@functools.cache
def ignored_by_installed() -> str | None:
    """The installed TileLang-NPUIR's jit/jit_npu.py when it never reads the flag (None when it
    does, or when none is installed). Trees before tilelang-mlir-ascend 1ba7c74 (2026-05-08,
    also on tile-ai/tilelang-ascend's npuir branch) pass a fixed `--enable-auto-multi-buffer=true`
    to the compiler, so there the pass config is never read."""
    for path, text in installed.tilelang_files("jit/jit_npu.py"):
        if FLAG in text:
            return None
        if "npuir" in text or "auto-multi-buffer" in text:
            return str(path)
    return None


def _tilelang_names(module: cst.Module) -> tuple[set[str], set[str]]:
    """Names bound to the tilelang module, and names imported from it (`from tilelang import jit`)."""
    modules, members = import_bindings(module, "tilelang")
    return {"tilelang"} | {name for name, target in modules.items() if target == "tilelang"}, set(
        members
    )


def _is_flag_key(key: cst.BaseExpression | None) -> bool:
    if isinstance(key, cst.SimpleString):
        return key.evaluated_value == FLAG
    return key is not None and dotted(key).endswith(FLAG_ATTR)


class _Finder(cst.CSTVisitor):
    def __init__(self, wrapper: MetadataWrapper) -> None:
        self.wrapper = wrapper
        self.modules, self.members = _tilelang_names(wrapper.module)
        self.manual_sync = False  # a pass_configs entry disables automatic sync injection
        self.sync_calls: list[cst.Call] = []  # T.set_flag(...), T.sync_block_wait(...), ...
        # the jit-decorated factory around each sync call (None: outside every one)
        self.sync_factory: dict[int, cst.FunctionDef | None] = {}
        self.factories: list[cst.FunctionDef] = []  # the jit-decorated functions around a visit
        self.decorated: dict[int, cst.FunctionDef] = {}  # id(pass_configs dict) -> its factory
        self.entries: list[cst.DictElement] = []
        self.config_dicts: list[cst.Dict] = []  # `pass_configs = {...}` / `pass_configs={...}`
        self.compile_calls: list[
            cst.Call
        ] = []  # tilelang.jit(...) / tilelang.compile(...) without pass_configs

    def visit_DictElement(self, node: cst.DictElement) -> None:
        if _is_flag_key(node.key):
            self.entries.append(node)
        key = node.key
        if (
            (isinstance(key, cst.SimpleString) and key.evaluated_value == MANUAL_SYNC)
            or (key is not None and dotted(key).endswith(MANUAL_SYNC_ATTR))
        ) and bool_value(node.value):
            self.manual_sync = True

    def _is_compile(self, name: str) -> bool:
        base, _, attr = name.rpartition(".")
        if attr not in ("jit", "compile"):
            return False
        return (
            base in self.modules
            or base.endswith(".jit")
            and base.split(".")[0] in self.modules
            or (not base and attr in self.members)
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Dict) and any(
            isinstance(t.target, cst.Name) and t.target.value == "pass_configs"
            for t in node.targets
        ):
            self.config_dicts.append(node.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        jit = False
        for d in node.decorators:
            call = d.decorator
            name = dotted(call.func if isinstance(call, cst.Call) else call)
            if not self._is_compile(name):
                continue
            jit = True
            for a in call.args if isinstance(call, cst.Call) else ():
                if a.keyword is not None and a.keyword.value == "pass_configs":
                    self.decorated[id(a.value)] = node
        if jit:
            self.factories.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if self.factories and self.factories[-1] is original_node:
            self.factories.pop()

    def visit_Call(self, node: cst.Call) -> None:
        name = dotted(node.func)
        if name.startswith("T.") and name.rsplit(".", 1)[-1] in MANUAL_SYNC_CALLS:
            self.sync_calls.append(node)
            self.sync_factory[id(node)] = self.factories[-1] if self.factories else None
        kw = next(
            (a for a in node.args if a.keyword is not None and a.keyword.value == "pass_configs"),
            None,
        )
        if kw is not None and isinstance(kw.value, cst.Dict):
            self.config_dicts.append(kw.value)
        elif kw is None and self._is_compile(name):
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
    return default_enabled()[0]


# a buffering scheme, not any buffer: "multi-buffer(ing)", "double buffer", "single-buffer",
# "ping-pong", "doubles (the) buffers" ("# output buffer" says nothing about this flag)
_BUFFERING = re.compile(
    r"\b(multi|double|single|triple)[\s_-]*buffer|\bping[\s_-]*pong\b|\bdoubl\w*\s+(the\s+)?buffers",
    re.IGNORECASE,
)


def stated_reason(source: str, line: int) -> str | None:
    """The comment attached to the flag entry at `line` (contiguous comment lines just above it,
    and a comment after it on its line) when it speaks of a buffering scheme (multi-, double-,
    single-buffering, ping-pong), the choice this flag makes; else None."""
    lines = source.splitlines()
    if not 1 <= line <= len(lines):
        return None
    above: list[str] = []
    i = line - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        above.insert(0, lines[i].strip().lstrip("#").strip())
        i -= 1
    _, hash_, trailing = lines[line - 1].partition("#")
    text = " ".join(above + ([trailing.strip()] if hash_ else []))
    return text if _BUFFERING.search(text) else None


def _expression(wrapper: MetadataWrapper, entry: cst.DictElement) -> str:
    return (
        f"{FLAG} at line {line_of(wrapper, entry)} is set by the expression "
        f"`{wrapper.module.code_for_node(entry.value)}`, not True/False: the values it reads "
        f"decide the flag per build, so there is no one current setting to flip"
    )


def undecided(source: str) -> str | None:
    """Why the flag has no one current value (set by an expression, or set more than once),
    or None when it has one (or the file does not parse)."""
    try:
        wrapper, f = _scan(source)
    except ParseFailure:
        return None
    if len(f.entries) > 1:
        lines = ", ".join(str(line_of(wrapper, e)) for e in f.entries)
        return f"{FLAG} is set {len(f.entries)} times (lines {lines}); one change cannot pick one"
    if f.entries and bool_value(f.entries[0].value) is None:
        return _expression(wrapper, f.entries[0])
    return None


@lru_cache(maxsize=1024)  # pure: the planner re-derives the same variants while it searches
def set_flag(source: str, enabled: bool, name: str = "kernel.py") -> Variant | Refusal:
    """Set `npuir.enable_auto_multi_buffer` to `enabled` (one entry, or one added)."""
    try:
        wrapper, f = _scan(source)
    except ParseFailure as exc:
        return Refusal((str(exc),), strategy=STRATEGY)
    module = wrapper.module
    if not f.entries and not npuir_kernel(source):
        return Refusal(
            (
                f'not a TileLang-NPUIR kernel (no target "npuir", npuir pass config or npuir_ op '
                f"in the file): {FLAG} exists only in the NPUIR compiler, and other Ascend "
                f"TileLang back ends reject a pass config they do not know",
            ),
            strategy=STRATEGY,
        )
    ignored = ignored_by_installed()
    if ignored is not None:
        return Refusal(
            (
                f"the installed TileLang-NPUIR ({ignored}) never reads {FLAG}: its compiler call "
                "fixes multi-buffering (upstream reads the flag since 2026-05-08, "
                "tilelang-mlir-ascend 1ba7c74), so setting it would change nothing",
            ),
            strategy=STRATEGY,
        )
    if enabled and f.manual_sync:
        return Refusal(
            (
                f"the kernel disables automatic sync injection ({MANUAL_SYNC_ATTR}: True) and "
                f"synchronises by hand; automatic multi-buffering would add buffers its manual flags "
                f"do not cover",
            ),
            strategy=STRATEGY,
        )
    if len(f.entries) > 1:
        lines = ", ".join(str(line_of(wrapper, e)) for e in f.entries)
        return Refusal(
            (f"{FLAG} is set {len(f.entries)} times (lines {lines}); one change cannot pick one",),
            strategy=STRATEGY,
        )
    if f.entries:
        entry = f.entries[0]
        old = bool_value(entry.value)
        if old is None:
            return Refusal((_expression(wrapper, entry),), strategy=STRATEGY)
        if old == enabled:
            return Refusal((f"{FLAG} is already {enabled}",), strategy=STRATEGY)
        owner = next(
            (f.decorated.get(id(d)) for d in f.config_dicts if any(e is entry for e in d.elements)),
            None,
        )
        synced = _syncs(f, owner) if enabled else []
        if synced:
            return _hand_synced(wrapper, synced)
        why = stated_reason(module.code, line_of(wrapper, entry)) if enabled else None
        if why is not None:
            return Refusal(
                (
                    f"{FLAG} at line {line_of(wrapper, entry)} is turned off on purpose, with the "
                    f'reason stated beside it: "{why}"; turning it on would undo that choice',
                ),
                strategy=STRATEGY,
            )
        new_source = replace_node(module, entry.value, literal_node(enabled))
        where = f"line {line_of(wrapper, entry)}"
    else:
        old, origin = default_enabled()
        if old == enabled:
            return Refusal(
                (f"{FLAG} is absent, which already means {enabled} ({origin})",), strategy=STRATEGY
            )
        if enabled and f.sync_calls:
            return _hand_synced(wrapper, f.sync_calls)
        element = cst.DictElement(key=cst.SimpleString(f'"{FLAG}"'), value=literal_node(enabled))
        if len(f.config_dicts) == 1:
            d = f.config_dicts[0]
            new_source = replace_node(module, d, _with_element(d, element))
            where = f"pass_configs at line {line_of(wrapper, d)}"
        elif not f.config_dicts and len(f.compile_calls) == 1:
            call = f.compile_calls[0]
            if any(a.star == "**" for a in call.args):
                return Refusal(
                    (
                        f"{dotted(call.func)}(...) at line {line_of(wrapper, call)} takes **options that "
                        f"may already hold pass_configs; adding the keyword could pass it twice "
                        f"(set {FLAG} where those options are built)",
                    ),
                    strategy=STRATEGY,
                )
            new_call = with_keyword(call, "pass_configs", cst.Dict([element]))
            new_source = replace_node(module, call, new_call)
            where = f"{dotted(call.func)}(...) at line {line_of(wrapper, call)}"
        else:
            return Refusal(
                (
                    f"{FLAG} is absent and there is no single pass_configs dict or tilelang jit/compile "
                    f"call to add it to ({len(f.config_dicts)} dicts, {len(f.compile_calls)} calls); "
                    f"one change cannot pick one",
                ),
                strategy=STRATEGY,
            )
    change = Change(
        strategy=STRATEGY,
        description=f"{FLAG}: {old} -> {enabled} ({where})",
        knob=FLAG,
        old=old,
        new=enabled,
    )
    return make_variant(source, new_source, change, name)


def _syncs(f: _Finder, owner: cst.FunctionDef | None) -> list[cst.Call]:
    """The hand-made sync calls of the kernels an entry configures: with `owner` (the factory
    whose jit decorator holds the entry) those not inside another jit-decorated factory; every
    one when the entry's owner is not known."""
    if owner is None:
        return f.sync_calls
    return [c for c in f.sync_calls if f.sync_factory[id(c)] in (None, owner)]


def _hand_synced(wrapper: MetadataWrapper, calls: list[cst.Call]) -> Refusal:
    first = calls[0]
    return Refusal(
        (
            f"the kernel synchronises by hand ({len(calls)} flag calls, the first "
            f"`{dotted(first.func)}` at line {line_of(wrapper, first)}): its flags pair the "
            f"buffers it rotates itself, and automatic multi-buffering would add copies "
            f"those flags do not pair",
        ),
        strategy=STRATEGY,
    )


def _with_element(d: cst.Dict, element: cst.DictElement) -> cst.Dict:
    return d.with_changes(elements=append_item(d.elements, element, d.lbrace.whitespace_after))
