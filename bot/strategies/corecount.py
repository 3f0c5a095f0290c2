"""A block-named knob that counts the cores a kernel launches, not the rows of a tile.

    block_size = 1
    with T.Kernel(block_size, is_npu=True) as (cid, _):
        for i in T.serial(T.ceildiv(m_num * n_num, block_size)):
            block_id = i * block_size + cid
            if block_id < m_num * n_num:
                ...

The name is the grid of the kernel (the first argument of `T.Kernel`) and the kernel reads
the core index that grid binds (`cid`): each core takes its own share of the work, so the
name is a core count. A count of 1 is one core walking every tile, not a per-row algorithm
(the reason a block of 1 is otherwise not grown): more cores split the same work. A grid
whose index the kernel never reads (`as (_, _)`, or `cid` unused) is not one: every core
would redo the whole work, and the name is left out as before. Nor is a grid whose count the
kernel body never reads, directly or through a local computed from it (`bx = (cid + i) *
block_M` over a fixed `m_num` trips): nothing splits the work by the number of cores, so each
added core would walk the whole count of tiles from its own index.

A core count is no tile either where the kernel divides work among the cores: `T.ceildiv(X,
cores)` is each core's share of X work items, and when every item is taken under `if item < X`
more cores than items leave the extra ones idle. So such a count asks nothing of the knob
(`guarded_share`); a tile-like rule read from it (no more cores than items, whole shares) would
be untrue. A floor share `X // cores` still leaves a remainder undone and keeps its rule. The
guard is on a work item only when what it bounds is computed from the core index (`item =
core * share + i`); a bound on the loop's own counter (`if i < X`) leaves the items of a core
past the end unguarded. The bound may be spelled `item < X`, `X > item`, `item <= X - 1`, be
one side of an `and`, and sit in `if`, `with T.If(...)` or `with T.If(...), T.Then():`.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Collection

import libcst as cst

from bot.strategies.branches import as_if
from bot.strategies.evaluate import code_of
from bot.strategies.facts import Function, flowing, names_in
from bot.strategies.signature import parameter_names
from bot.strategies.source import dotted, launch, top_level_imports


class _Grids(cst.CSTVisitor):
    def __init__(self, name: str | set[str]) -> None:
        self.names = {name} if isinstance(name, str) else name
        self.indices: list[tuple[str, cst.With]] = []  # (core index name, the with)

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            k = launch(item)
            if k is None or not k.grid or not k.names:
                continue
            grid, index = k.grid[0], k.names[0]
            if isinstance(grid, cst.Name) and grid.value in self.names and index not in ("", "_"):
                self.indices.append((index, node))


class _Assigns(cst.CSTVisitor):
    """`name = value` assignments of a prim_func, by name."""

    def __init__(self) -> None:
        self.found: dict[str, list[cst.BaseExpression]] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if isinstance(t.target, cst.Name):
                self.found.setdefault(t.target.value, []).append(node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.value is not None:
            self.found.setdefault(node.target.value, []).append(node.value)


def _derived(name: str, assigns: list[dict[str, list[cst.BaseExpression]]]) -> set[str]:
    """`name` and every local computed from it (`per_core = T.ceildiv(total, name)`)."""
    found = {name}
    grew = True
    while grew:
        grew = False
        for table in assigns:
            for local, values in table.items():
                if local not in found and any(names_in(v) & found for v in values):
                    found.add(local)
                    grew = True
    return found


def core_count(name: str, factories: list[Function]) -> str | None:
    """Where `name` is the grid of a kernel of `factories` whose core index the kernel reads
    (`T.Kernel(name) as (cid, ...)` with `cid` used) and whose body reads the count (or a local
    computed from it) to split the work, as `T.Kernel(name) as cid`; else None."""
    for factory in factories:
        for pf in factory.prim_funcs:
            v = _Grids(name)
            pf.visit(v)
            if not v.indices:
                continue
            locals_ = _Assigns()
            pf.visit(locals_)
            counts = _derived(name, [*(fn.assigns for fn in factory.chain), locals_.found])
            for index, with_ in v.indices:
                read = names_in(with_.body)
                if index in read and read & counts:
                    return f"T.Kernel({name}) as {index}"
    return None


def _spelled(node: cst.BaseExpression) -> str:
    """The code of `node` without its spacing: `m_num*n_num` is `m_num * n_num`."""
    return "".join(code_of(node).split())


class _Bounds(cst.CSTVisitor):
    """The extents an `if item < X` (or `T.If`) bounds work items by, where `item` reads one of
    `items` (the core index and the locals computed from it)."""

    def __init__(self, items: set[str]) -> None:
        self.items = items
        self.extents: set[str] = set()

    def _bound(self, item: cst.BaseExpression, extent: cst.BaseExpression) -> None:
        if names_in(item) & self.items:
            self.extents.add(_spelled(extent))

    def _test(self, test: cst.BaseExpression) -> None:
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            self._test(test.left)  # `item < X and ...`: the item is bounded either way
            self._test(test.right)
            return
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return
        op, right = test.comparisons[0].operator, test.comparisons[0].comparator
        if isinstance(op, cst.LessThan):
            self._bound(test.left, right)  # item < X
        elif isinstance(op, cst.GreaterThan):
            self._bound(right, test.left)  # X > item
        elif (
            isinstance(op, cst.LessThanEqual)
            and isinstance(right, cst.BinaryOperation)
            and isinstance(right.operator, cst.Subtract)
            and isinstance(right.right, cst.Integer)
            and right.right.value == "1"
        ):
            self._bound(test.left, right.left)  # item <= X - 1

    def visit_If(self, node: cst.If) -> None:
        self._test(node.test)

    def visit_With(self, node: cst.With) -> None:
        form = as_if(node)
        if form is not None:
            self._test(form.test)
            return
        for item in node.items:  # `with T.If(item < X), T.Then():` on one line
            call = item.item
            if (
                isinstance(call, cst.Call)
                and dotted(call.func).rsplit(".", 1)[-1] == "If"
                and call.args
            ):
                self._test(call.args[0].value)


def guarded_share(aliases: set[str], factory: Function, extent: cst.BaseExpression) -> bool:
    """True when `T.ceildiv(extent, knob)` is each core's share of `extent` work items: the knob
    (one of `aliases`) is the grid of a kernel of `factory` that reads its core index, and the
    kernel takes items only under `if item < extent`, `item` computed from the core index."""
    want = _spelled(extent)
    for pf in factory.prim_funcs:
        v = _Grids(aliases)
        pf.visit(v)
        if not v.indices:
            continue
        locals_ = _Assigns()
        pf.visit(locals_)
        for index, with_ in v.indices:
            if index not in names_in(with_.body):
                continue
            bounds = _Bounds(_derived(index, [locals_.found]))
            with_.body.visit(bounds)
            if want in bounds.extents:
                return True
    return False


# calls that give a kernel its core index without the name T.Kernel binds
_INDEX_CALL = ("block_id", "block_idx", "blockidx", "core_id", "coreid", "get_block")


class _NameLoads(cst.CSTVisitor):
    """Every `cst.Name` node that reads a value (not a target, an attribute's field, a keyword,
    a parameter's or a function's own name, an import, or text in an f-string)."""

    def __init__(self, names: set[str], skip: Collection[int] = ()) -> None:
        self.want = names
        self.skip = skip  # functions whose own binding of the name is another value
        self.found: list[cst.Name] = []

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.want:
            self.found.append(node)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        if node.value is not None:  # `n: int = 20`: a binding, as `n = 20` is
            node.value.visit(self)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        if node.annotation is not None:  # `A: T.Tensor((BLOCK, N), dtype)` reads BLOCK
            node.annotation.visit(self)
        if node.default is not None:
            node.default.visit(self)
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        for d in node.decorators:
            d.visit(self)
        if id(node) in self.skip:
            # its own binding hides the name in its body, but its defaults and annotations are
            # read where it is defined (`def rows(total, BLOCK_NUM=BLOCK_NUM)`)
            for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
                for part in (p.default, p.annotation):
                    if part is not None:
                        part.visit(self)
            return False
        node.params.visit(self)
        node.body.visit(self)
        return False

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_FormattedString(self, node: cst.FormattedString) -> bool:
        return False


class _UnreadGrids(cst.CSTVisitor):
    """Launches whose core index the body never reads: the names in their grids, and one
    launch spelled for a message."""

    def __init__(
        self, names: set[str], defined: set[str], language: set[str], skip: Collection[int]
    ) -> None:
        self.names = names
        self.skip = skip  # functions whose own binding of the name is another value
        self.defined = defined  # functions the file defines: a macro may read the index
        self.language = language  # names bound to tilelang: its operations do not
        self.grid_names: list[cst.Name] = []
        self.spelled = ""
        self.params: list[set[str]] = []  # the enclosing functions' parameters, innermost last

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.params.append(_tensor_names(node))
        return id(node) not in self.skip

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.params.pop()

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            k = launch(item)
            if k is None or not k.grid:
                continue
            index = {n for n in k.names if n not in ("", "_")}
            body = names_in(node.body)
            if _index_call(node.body, self.defined, self.language):
                continue
            # a body that reads the index but none of the kernel's tensors (it only waits on
            # flags, say) splits no data either: every core does the same nothing
            tensors = self.params[-1] if self.params else set()
            idle = bool(index & body) and bool(tensors) and not tensors & body
            if index & body and not idle:
                continue
            v = _NameLoads(self.names)
            for g in k.grid:
                g.visit(v)
            if v.found and not self.spelled:
                self.spelled = f"T.Kernel({code_of(k.grid[0])})" + _bound_as(k.names)
                self.spelled += (
                    f", whose body reads none of the kernel's tensors "
                    f"({', '.join(sorted(tensors))})"
                    if idle
                    else ", whose core index the kernel never reads"
                )
            self.grid_names += v.found


def _tensor_names(fn: cst.FunctionDef) -> set[str]:
    """The function's parameters and the names it binds from them (`rows = T.Tensor(shape,
    dtype, A.data)`, `A = T.match_buffer(a, ...)`): the tensors a kernel body may read."""
    names = {p.name.value for p in fn.params.params}
    assigns: list[tuple[set[str], set[str]]] = []

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

        def visit_Assign(self, node: cst.Assign) -> None:
            targets = set().union(*(names_in(t.target) for t in node.targets))
            assigns.append((targets, names_in(node.value)))

    fn.visit(V())
    return flowing(names, assigns)


def _bound_as(names: list[str]) -> str:
    """` as (cid, _)`, ` as cid`, or nothing for a launch that binds no name."""
    if not names or names == [""]:
        return ""
    if len(names) == 1:
        return f" as {names[0]}"
    return " as (" + ", ".join(n or "_" for n in names) + ")"


def _index_call(body: cst.CSTNode, defined: set[str], language: set[str]) -> bool:
    """Whether `body` may read the core index without the launch's names: a block-index
    intrinsic, a call of a function the file defines (a `T.macro` may call one), or a call
    whose body the file does not hold (an imported helper, a method): only the language's own
    operations and Python's builtins are known not to read it."""
    found = False

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            name = dotted(node.func)
            found = (
                found
                or any(w in name.lower() for w in _INDEX_CALL)
                or name.rsplit(".", 1)[-1] in defined
                or not _known_not_to_read_index(name, language)
            )

    body.visit(V())
    return found


def _known_not_to_read_index(name: str, language: set[str]) -> bool:
    """`T.copy`, `tl.language.gemm`, `copy` from tilelang.language, `math.sqrt`, `range`: a
    call of the language or the standard library (`language`: the names the file binds to
    them; "*" when it star-imports tilelang) or a builtin cannot read the core index unless its
    name says so (that is checked apart)."""
    head = name.split(".", 1)[0]
    bare = name == head
    return head in language or (bare and (name in dir(builtins) or "*" in language))


def _safe_names(module: cst.Module) -> set[str]:
    """Names the file's top-level imports bind to tilelang (any part) or the standard library;
    "*" for `from tilelang... import *`."""
    out = {"T", "tilelang"}
    for small in top_level_imports(module):
        if isinstance(small, cst.Import):
            for alias in small.names:
                root = dotted(alias.name).split(".", 1)[0]
                if root == "tilelang" or root in sys.stdlib_module_names:
                    out.add(alias.evaluated_alias or root)
            continue
        root = dotted(small.module).split(".", 1)[0] if small.module is not None else ""
        if root != "tilelang" and root not in sys.stdlib_module_names:
            continue
        if isinstance(small.names, cst.ImportStar):
            if root == "tilelang":
                out.add("*")
            continue
        for alias in small.names:
            out.add(alias.evaluated_alias or alias.evaluated_name)
    return out


class _LocalBindings(cst.CSTVisitor):
    """Names a function binds itself (its parameters, its assignment and loop targets), not
    those of functions or classes nested in it."""

    def __init__(self, fn: cst.FunctionDef) -> None:
        self.fn = fn
        self.names: set[str] = set(parameter_names(fn))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if node is not self.fn:
            self.names.add(node.name.value)
        return node is self.fn

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.names |= names_in(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.names |= names_in(node.target)

    def visit_For(self, node: cst.For) -> None:
        self.names |= names_in(node.target)


def _shadowing(module: cst.Module, names: set[str], owners: list[cst.FunctionDef]) -> set[int]:
    """Functions (other than `owners`) that bind one of `names` themselves: what they read under
    that name is their own binding, not the knob's."""
    found: set[int] = set()
    keep = {id(o) for o in owners}

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            if id(node) not in keep:
                b = _LocalBindings(node)
                node.visit(b)
                if b.names & names:
                    found.add(id(node))

    module.visit(V())
    return found


def unread_grid(
    module: cst.Module, names: set[str], owners: list[cst.FunctionDef | None] | None = None
) -> str | None:
    """The launch (`T.Kernel(BLOCK_SIZE) as (cid, _)`) and why its cores split nothing, when
    every read of `names` in the file is the grid of a kernel whose core index the body never
    reads, or whose body reads none of the kernel's tensors: each core then runs the whole
    kernel, and the count only repeats the same work. None otherwise. `owners`: the
    functions binding the knob (None for a module constant); with them, a same-named local of
    any other function (a helper's own `BLOCK_SIZE`) is a different value and not counted."""
    local = [o for o in owners or [] if o is not None]
    roots: list[cst.CSTNode] = list(local) if owners and None not in owners else [module]
    skip = _shadowing(module, names, local) if owners else set()
    loads = _NameLoads(names, skip)
    for root in roots:
        root.visit(loads)
    defined: set[str] = set()

    class Defs(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            defined.add(node.name.value)

    module.visit(Defs())
    grids = _UnreadGrids(names, defined, _safe_names(module), skip)
    for root in roots:
        root.visit(grids)
    if not grids.grid_names:
        return None
    in_grid = {id(n) for n in grids.grid_names}
    if any(id(n) not in in_grid for n in loads.found):
        return None
    return grids.spelled
