"""The auto-scheduled Ascend dialect of TileLang and the memory limits its scheduler keeps.

Kernels written against `tilelang.ascend.language` (PTO-ISA/tilelang's A5 AutoSchedule,
targets "ascend"/"pto") are placed in memory by a scheduler with per-scope limits that the
dialect documents: 216 KB of UB (`shared`) and 512 KB of L1 (`shared.l1`)
(examples/ascend/example_annotate_unlimit_memory.py). Its GEMM examples keep a 256 x 256
fp32 accumulator, 256 KB of L0C. `T.annotate_unlimit_memory(scope)` lifts the limit of one
scope for the kernel that says so. A file is taken to be in this dialect when it imports
`tilelang.ascend.language` or annotates buffer versions (`T.annotate_buffer_versions`),
which only that scheduler reads, or when it compiles for target "ascend" or "pto" with
launches that never pass `is_npu` (TileLang's own Ascend backend, tile-ai/tilelang
examples/ascend, writes the same kernels with `tilelang.language`; tilelang-ascend's NPU
launches say `is_npu=True` on every target); all read from the parsed code (a comment or a
string that names the dialect is not an import).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import libcst as cst

from bot.strategies.facts import facts
from bot.strategies.source import ParseFailure, dotted

KB = 1024
LIMITS: dict[str, int] = {"UB": 216 * KB, "L1": 512 * KB, "L0C": 256 * KB}
SCOPES = {"shared": "UB", "shared.l1": "L1", "shared.l0c": "L0C"}  # unlimit scope -> memory
DIALECT = "tilelang.ascend.language"
SCHEDULED_TARGETS = ("ascend", "pto", "asc")


def _module(source: str | cst.Module) -> cst.Module | None:
    """The parsed module of `source` (None when it does not parse)."""
    if not isinstance(source, str):
        return source
    try:
        return facts(source).wrapper.module
    except ParseFailure:
        return None


def _per_module(fn: Callable[[cst.Module], bool]) -> Callable[[str | cst.Module], bool]:
    """`fn(module)` kept per parsed module: every knob of a file asks it again, and one walk
    of a large module costs a good part of a second. The module is kept beside its answer,
    so its id cannot be reused while the entry lives."""
    memo: OrderedDict[int, tuple[cst.Module, bool]] = OrderedDict()

    def cached(source: str | cst.Module) -> bool:
        module = _module(source)
        if module is None:
            return False
        hit = memo.get(id(module))
        if hit is not None and hit[0] is module:
            memo.move_to_end(id(module))
            return hit[1]
        answer = fn(module)
        memo[id(module)] = (module, answer)
        if len(memo) > 64:
            memo.popitem(last=False)
        return answer

    cached.__doc__ = fn.__doc__
    cached.__name__ = fn.__name__
    return cached


@_per_module
def auto_scheduled(module: cst.Module) -> bool:
    """True when the module imports `tilelang.ascend.language` (`import ... as T`, `from
    tilelang.ascend import language`, `from tilelang.ascend.language import ...`,
    `importlib.import_module("tilelang.ascend.language")`) or calls
    `annotate_buffer_versions`, or compiles for "ascend" / "pto" / "asc" (the target of a
    `compile` / `jit` / `lower` call, by keyword, at its positional place or in a splatted
    dict, given as a literal, a parameter's default, a name assigned one, or an argparse
    option defaulting to one; a `target="ascend"` parameter default, `target = "pto"` or
    `TARGET = "pto"` assigned, an argparse `--target` defaulting to one) with no launch
    passing `is_npu`: read from the code, never from a comment or a docstring that merely
    names the dialect."""
    found = False

    class _V(cst.CSTVisitor):
        npu_launch = False  # a `T.Kernel(..., is_npu=...)`: tilelang-ascend
        scheduled_target = False  # compiled for "ascend" / "pto" / "asc"

        def __init__(self) -> None:
            super().__init__()
            # the enclosing functions' parameter defaults, innermost last
            self.defaults: list[dict[str, cst.BaseExpression | None]] = []
            self.assigned: set[str] = set()  # names assigned such a target (`BACKEND = "asc"`)
            self.target_names: set[str] = set()  # names passed as a compile's `target=`
            self.by_param: list[bool] = []  # `target=backend` where backend is a parameter
            # `target=args.backend`: (the object, the option's dest)
            self.target_attrs: set[tuple[str, str]] = set()
            self.parsed: set[str] = set()  # names assigned a `parser.parse_args()` result
            self.tilelang_names = {"tilelang"}  # `import tilelang as tl`
            self.from_tilelang: set[str] = set()  # `from tilelang import compile`
            self.counts: dict[str, int] = {}  # name -> assignments (`opts = ...` twice)
            self.item_set: set[str] = set()  # names with an item assigned (`opts["k"] = ...`)
            self.option_dests: set[str] = set()  # argparse options defaulting to such a target
            # `opts = dict(target="asc")` / `{"target": "asc"}` ... `compile(f, **opts)`
            self.option_dicts: set[str] = set()
            self.splatted: set[str] = set()

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            self.defaults.append({p.name.value: p.default for p in node.params.params})

        def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
            self.defaults.pop()

        def visit_Import(self, node: cst.Import) -> None:
            nonlocal found
            if any(_dotted_name(a.name) == DIALECT for a in node.names):
                found = True
            for a in node.names:
                if _dotted_name(a.name) == "tilelang" and a.asname is not None:
                    self.tilelang_names.add(_dotted_name(a.asname.name))

        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            nonlocal found
            base = _dotted_name(node.module) if node.module is not None else ""
            if (base == "tilelang" or base.startswith("tilelang.")) and not isinstance(
                node.names, cst.ImportStar
            ):
                for a in node.names:
                    bound = a.asname.name if a.asname is not None else a.name
                    self.from_tilelang.add(_dotted_name(bound))
            names = (
                [_dotted_name(a.name) for a in node.names]
                if not isinstance(node.names, cst.ImportStar)
                else ["*"]
            )
            if (
                base == DIALECT
                or base.startswith(DIALECT + ".")
                or (base == "tilelang.ascend" and "language" in names)
            ):
                found = True

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = dotted(node.func)
            versions = func.rsplit(".", 1)[-1] == "annotate_buffer_versions"
            imported = func.endswith("import_module") and any(
                isinstance(a.value, cst.SimpleString) and a.value.evaluated_value == DIALECT
                for a in node.args
            )
            found = found or versions or imported
            short = func.rsplit(".", 1)[-1]
            if short == "Kernel" and any(
                a.keyword is not None and a.keyword.value == "is_npu" for a in node.args
            ):
                self.npu_launch = True
            if short in TARGET_AT:
                # the place and the splat are TileLang's signature: only for its own calls
                # (`tilelang.compile`, `tl.lower`, a `compile` imported from tilelang), not
                # `re.compile` or `torch.compile`
                own = func.split(".", 1)[0] in self.tilelang_names or (
                    func == short and short in self.from_tilelang
                )
                for value in self._target_args(node, TARGET_AT[short], own):
                    self._target(value)
            if short == "add_argument":
                self._option(node)

        def _target_args(
            self, node: cst.Call, at: int | None, own: bool
        ) -> list[cst.BaseExpression]:
            """What `node` passes as its target: `target=`, and for TileLang's own calls
            (`own`) the positional place the call takes it at (`compile(func, out_idx,
            backend, target)`, `lower(func, target)`) or a `target` key of a dict splatted
            into it (`**{"target": ...}`, `**opts`)."""
            found: list[cst.BaseExpression] = []
            positional = 0
            if not own:
                at = None
            for a in node.args:
                if a.star == "**" and not own:
                    continue
                if a.star == "**":
                    found += _target_entry(a.value)
                    if isinstance(a.value, cst.Name):
                        self.splatted.add(a.value.value)
                elif a.star == "*":
                    at = None  # positions past a `*args` are unknown
                elif a.keyword is None:
                    if positional == at:
                        found.append(a.value)
                    positional += 1
                elif a.keyword.value == "target":
                    found.append(a.value)
            return found

        def _target(self, value: cst.BaseExpression) -> None:
            """One expression a compile / jit / lower call takes as its target."""
            if _scheduled(value):
                self.scheduled_target = True
            elif isinstance(value, cst.Name):  # `target=backend`
                name = value.value
                owner = next((d for d in reversed(self.defaults) if name in d), None)
                if owner is not None:  # that function's own default
                    self.by_param.append(_scheduled(owner[name]))
                else:
                    self.target_names.add(name)
            elif isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name):
                self.target_attrs.add((value.value.value, value.attr.value))  # `args.backend`

        def _option(self, node: cst.Call) -> None:
            """`parser.add_argument("--target", default="ascend")`: an option named target, or
            one whose value a compile takes as its target (`target=args.backend`)."""
            args = [a.value for a in node.args if a.keyword is None]
            if not any(
                a.keyword is not None and a.keyword.value == "default" and _scheduled(a.value)
                for a in node.args
            ):
                return
            names = [str(a.evaluated_value) for a in args if isinstance(a, cst.SimpleString)]
            dest = next(
                (
                    a.value.evaluated_value
                    for a in node.args
                    if a.keyword is not None
                    and a.keyword.value == "dest"
                    and isinstance(a.value, cst.SimpleString)
                ),
                None,
            )
            long = [n for n in names if n.startswith("--")] or names
            if dest is None and long:
                dest = long[0].lstrip("-").replace("-", "_")
            if dest is None:
                return
            if str(dest).lower() == "target":
                self.scheduled_target = True
            self.option_dests.add(str(dest))

        def visit_Param(self, node: cst.Param) -> None:
            # `def run(..., target="ascend")`: the target the file compiles with by default
            if node.name.value.lower() == "target" and _scheduled(node.default):
                self.scheduled_target = True

        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    self.counts[t.target.value] = self.counts.get(t.target.value, 0) + 1
                    if isinstance(node.value, cst.Call) and dotted(node.value.func).rsplit(".", 1)[
                        -1
                    ] in ("parse_args", "parse_known_args"):
                        self.parsed.add(t.target.value)
                elif isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Name):
                    self.item_set.add(t.target.value.value)
            if _scheduled(node.value) and any(
                isinstance(t.target, cst.Name) and t.target.value.lower() == "target"
                for t in node.targets
            ):
                self.scheduled_target = True
            if any(_scheduled(v) for v in _target_entry(node.value)):  # `opts = dict(target=...)`
                self.option_dicts |= {
                    t.target.value for t in node.targets if isinstance(t.target, cst.Name)
                }
            if _scheduled(node.value):  # `BACKEND = "asc"` ... `target=BACKEND`
                self.assigned |= {
                    t.target.value for t in node.targets if isinstance(t.target, cst.Name)
                }

    v = _V()
    module.visit(v)
    # TileLang's own Ascend backend (tile-ai/tilelang examples/ascend) writes the same
    # auto-scheduled kernels with `tilelang.language`: compiled for "ascend"/"pto", launched
    # without `is_npu` (tilelang-ascend's NPU launches, on those targets too, always say it)
    scheduled = (
        v.scheduled_target
        or any(v.by_param)
        or bool(v.assigned & v.target_names)
        or any(base in v.parsed and dest in v.option_dests for base, dest in v.target_attrs)
        or any(v.counts.get(n) == 1 and n not in v.item_set for n in v.option_dicts & v.splatted)
    )
    return found or (scheduled and not v.npu_launch)


# where a call takes its target positionally: tilelang.compile(func, out_idx,
# execution_backend, target, ...) and lower(func_or_mod, target, ...); jit's is keyword-only
TARGET_AT: dict[str, int | None] = {"compile": 3, "jit": None, "lower": 1}


def _target_entry(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The `target` entry of a dict display (`{"target": "asc"}`) or `dict(target="asc")`."""
    if isinstance(node, cst.Dict):
        return [
            e.value
            for e in node.elements
            if isinstance(e, cst.DictElement)
            and isinstance(e.key, cst.SimpleString)
            and e.key.evaluated_value == "target"
        ]
    if isinstance(node, cst.Call) and dotted(node.func) == "dict":
        return [a.value for a in node.args if a.keyword is not None and a.keyword.value == "target"]
    return []


def _scheduled(node: cst.BaseExpression | None) -> bool:
    """A string literal naming one of the auto-scheduled targets."""
    return isinstance(node, cst.SimpleString) and node.evaluated_value in SCHEDULED_TARGETS


def _dotted_name(node: cst.BaseExpression) -> str:
    return dotted(node) if isinstance(node, (cst.Name, cst.Attribute)) else ""


def unlimited(prim_func: cst.CSTNode) -> set[str]:
    """The memories `T.annotate_unlimit_memory(...)` lifts the limit of in `prim_func`."""
    found: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if dotted(node.func).rsplit(".", 1)[-1] != "annotate_unlimit_memory":
                return
            for a in node.args:
                if isinstance(a.value, cst.SimpleString) and a.value.evaluated_value in SCOPES:
                    found.add(SCOPES[str(a.value.evaluated_value)])

    prim_func.visit(_V())
    return found


NPUIR_TARGET = "npuir"


@_per_module
def npuir_target(module: cst.Module) -> bool:
    """True when the file compiles its kernel for target "npuir" (TileLang-NPUIR): a
    `target="npuir"` keyword, a `target="npuir"` parameter default, or `target = "npuir"`
    assigned, read from the code (a comment or docstring naming it is not a target). A file in
    the auto-scheduled ascend dialect (`auto_scheduled`) is never taken to be one."""
    if auto_scheduled(module):
        return False
    found = False

    def _is_npuir(node: cst.BaseExpression | None) -> bool:
        return isinstance(node, cst.SimpleString) and node.evaluated_value == NPUIR_TARGET

    class _V(cst.CSTVisitor):
        def visit_Arg(self, node: cst.Arg) -> None:
            nonlocal found
            if node.keyword is not None and node.keyword.value == "target":
                found = found or _is_npuir(node.value)

        def visit_Param(self, node: cst.Param) -> None:
            nonlocal found
            if node.name.value == "target" and node.default is not None:
                found = found or _is_npuir(node.default)

        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal found
            named = any(
                isinstance(t.target, cst.Name) and t.target.value == "target" for t in node.targets
            )
            found = found or (named and _is_npuir(node.value))

    module.visit(_V())
    return found
