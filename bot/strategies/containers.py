"""Which written node a configuration a kernel file spells out holds under a name, index or key.

Kernel files keep their sizes in tuples, lists and dicts they write out: `cfg = {"block_M": 64}`,
`cfg = dict(block_M=64)`, `SIZES = (256, 64)`, `test_configs = [(2, 512, 64)]` walked by a
`for` loop. `Spelled` says which node `cfg`, `cfg["block_M"]`, `cfg[1]` or `configs[0]["M"]`
stands for, so bot/strategies/binding.py can edit that one literal; and when there is no one
node, why: a loop walks several entries, the container is changed after it is written
(`cfg["block_M"] = 32`, `cfg.update(...)`, `configs.append(...)`), or it is not spelled out
(`best_config = kernel.config`).
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from bot.strategies.evaluate import code_of
from bot.strategies.facts import Facts, Function, Loop, literal, names_in
from bot.strategies.signature import takes
from bot.strategies.writes import writes

MAX_HOPS = 8  # names followed to the container they stand for


_COUNT = cst.Name("__pass_count__")  # what `enumerate` pairs each entry with


def _enumerated(node: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The list `enumerate(cases)` / `enumerate(cases, 1)` walks, else None."""
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "enumerate"
        and 1 <= len(node.args) <= 2
        and node.args[0].keyword is None
        and not node.args[0].star
    ):
        return node.args[0].value
    return None


def _zipped(node: cst.BaseExpression | None) -> list[cst.BaseExpression] | None:
    """The lists `zip(Ms, Ns)` walks in step (positional, unstarred; `strict=` allowed)."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name)):
        return None
    if node.func.value != "zip" or not node.args:
        return None
    lists = [a.value for a in node.args if a.keyword is None]
    if any(a.star for a in node.args) or any(
        a.keyword is not None and a.keyword.value != "strict" for a in node.args
    ):
        return None
    return lists or None


def element(
    target: cst.BaseExpression, entry: cst.BaseExpression, name: str
) -> cst.BaseExpression | None:
    """The part of one list entry a loop target binds to `name` (`(M, block_M)` over
    `(64, 32)`: block_M -> 32), or None when the shapes do not match."""
    if isinstance(target, cst.Name):
        return entry if target.value == name else None
    if not (
        isinstance(target, (cst.Tuple, cst.List))
        and isinstance(entry, (cst.Tuple, cst.List))
        and len(target.elements) == len(entry.elements)
    ):
        return None
    for t, e in zip(target.elements, entry.elements, strict=True):
        if isinstance(t, cst.StarredElement) or isinstance(e, cst.StarredElement):
            return None
        found = element(t.value, e.value, name)
        if found is not None:
            return found
    return None


def dict_items(node: cst.BaseExpression | None) -> dict[str, cst.BaseExpression] | None:
    """The entries of `{"block_M": 64, ...}` (string keys, no `**`) or `dict(block_M=64, ...)`
    (keywords only), key -> value node; None for anything else."""
    out: dict[str, cst.BaseExpression] = {}
    if isinstance(node, cst.Dict):
        for e in node.elements:
            if not isinstance(e, cst.DictElement) or not isinstance(e.key, cst.SimpleString):
                return None
            out[str(e.key.evaluated_value)] = e.value
        return out
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "dict":
        for a in node.args:
            if a.keyword is None or a.star:
                return None
            out[a.keyword.value] = a.value
        return out
    return None


class Spelled:
    """Spelled-out configurations of one source's facts, read scope-correctly."""

    def __init__(self, f: Facts) -> None:
        self.f = f
        self._changes = writes(f.wrapper).changed
        # (function, parameter) -> the one configuration its calls pass for it, and the scope
        # of the call; None when they pass none or several. Set by the Resolver that owns this
        # (it finds the calls); unset, a parameter's configuration is not followed.
        self.passed: (
            Callable[[Function, str], tuple[cst.BaseExpression, tuple[Function, ...]] | None] | None
        ) = None

    def changed(self, var: str, chain: tuple[Function, ...]) -> cst.CSTNode | None:
        """The first statement that changes the container `var` names where `chain` reads it:
        in the scope that binds `var`, or in a function inside it that does not bind its own
        `var`; None when nothing does."""
        owner = next(
            (
                fn
                for fn in reversed(chain)
                if var in fn.assigns or takes(fn, var) or var in fn.loop_targets
            ),
            None,
        )
        hit = self._changes.get(id(owner.node) if owner else 0, {}).get(var)
        if hit is not None:
            return hit
        for g in self.f.functions:
            inside = owner is None or any(p is owner for p in g.parents)
            own = var in g.assigns or takes(g, var) or var in g.loop_targets
            if inside and not own and var in self._changes.get(id(g.node), {}):
                return self._changes[id(g.node)][var]
        return None

    def entries(self, loop: Loop, chain: tuple[Function, ...]) -> list[cst.BaseExpression] | None:
        """The entries of the list a loop walks, when the file spells them out and never
        changes the list (`test_configs = [...]` assigned once, no `.append`)."""
        node: cst.BaseExpression | None = loop.iter
        counted = _enumerated(node)
        if counted is not None:  # `for i, (M, N) in enumerate(cases)`: each pass is (i, entry)
            node = counted
        zipped = _zipped(node)
        if zipped is not None:  # `for M, N in zip(Ms, Ns)`: each pass is one of each, in step
            lists = [self._spelled_list(z, chain) for z in zipped]
            if not lists or any(x is None for x in lists):
                return None
            passes: list[cst.BaseExpression] = [
                cst.Tuple([cst.Element(v) for v in row])
                for row in zip(*[x for x in lists if x is not None], strict=False)
            ]
        else:
            found = self._spelled_list(node, chain)
            if found is None:
                return None
            passes = found
        if counted is not None:
            # the count is no literal of the file: a name nothing binds stands for it
            counts: list[cst.BaseExpression] = [
                cst.Tuple([cst.Element(_COUNT), cst.Element(e)]) for e in passes
            ]
            return counts
        return passes

    def _spelled_list(
        self, node: cst.BaseExpression | None, chain: tuple[Function, ...]
    ) -> list[cst.BaseExpression] | None:
        """The elements of a list or tuple written out, or of the name assigned one once and
        never changed; None for anything else (a starred element included)."""
        if isinstance(node, cst.Name):
            if self.changed(node.value, chain) is not None:
                return None
            node = self.assigned(node.value, chain)
        if not isinstance(node, (cst.List, cst.Tuple)) or any(
            isinstance(e, cst.StarredElement) for e in node.elements
        ):
            return None
        return [e.value for e in node.elements]

    def assigned(self, var: str, chain: tuple[Function, ...]) -> cst.BaseExpression | None:
        """The one assignment of `var` in the nearest scope that binds it (None when that scope
        assigns it more than once or takes it as a parameter)."""
        for fn in reversed(chain):
            if var in fn.assigns:
                values = fn.assigns[var]
                return values[0] if len(values) == 1 else None
            if takes(fn, var):
                return None
        values = self.f.module_assigns.get(var, [])
        return values[0] if len(values) == 1 else None

    def one_entry(
        self, name: str, loop: Loop, chain: tuple[Function, ...]
    ) -> cst.BaseExpression | None:
        entries = self.entries(loop, chain)
        return element(loop.target, entries[0], name) if entries and len(entries) == 1 else None

    def loop_values(self, loop: Loop, chain: tuple[Function, ...]) -> dict[str, list[int]]:
        """name -> the integer literal each entry of the loop's list gives it (every pass)."""
        out: dict[str, list[int]] = {}
        for entry in self.entries(loop, chain) or []:
            for name in names_in(loop.target):
                value = literal(element(loop.target, entry, name))
                if isinstance(value, int) and not isinstance(value, bool):
                    out.setdefault(name, []).append(value)
        return out

    def node(
        self, node: cst.BaseExpression, chain: tuple[Function, ...], hops: int = 0
    ) -> cst.BaseExpression | None:
        """What a name (or `cfg[k]`) passed as a configuration stands for: the one assignment in
        the nearest scope that assigns it, or the element of a one-entry list a loop walks into
        it, followed through further names and subscripts; None when the file does not spell
        it out as one node, or changes it after writing it."""
        found = self.scoped(node, chain, hops)
        return None if found is None else found[0]

    def scoped(
        self, node: cst.BaseExpression, chain: tuple[Function, ...], hops: int = 0
    ) -> tuple[cst.BaseExpression, tuple[Function, ...]] | None:
        """`node(...)` and the scope it is written in: the names inside it (`{"M": M}` passed
        by a caller) are that scope's, not the reader's."""
        if hops > MAX_HOPS:
            return None
        if isinstance(node, cst.Subscript):
            found = self.item(node, chain, hops)
            return None if isinstance(found, str) else self.scoped(found[0], found[2], hops + 1)
        if not isinstance(node, cst.Name):
            return node, chain
        var = node.value
        if self.changed(var, chain) is not None:
            return None
        for fn in reversed(chain):
            if var in fn.assigns:
                values = fn.assigns[var]
                if len(values) != 1 or var in fn.unpacked:
                    return None
                return self.scoped(values[0], fn.chain, hops + 1)
            if takes(fn, var):
                # `def test(config)` run as `test(config)` in `for config in [{...}]`: the one
                # configuration its one call passes, in the caller's scope
                passed = self.passed(fn, var) if self.passed is not None else None
                return None if passed is None else self.scoped(passed[0], passed[1], hops + 1)
            if var in fn.loop_targets:
                one = self.one_entry(var, fn.loop_targets[var], fn.chain)
                return None if one is None else self.scoped(one, fn.chain, hops + 1)
        module_values = self.f.module_assigns.get(var)
        if module_values:
            values = module_values
            if len(values) != 1 or var in self.f.module_unpacked:
                return None
            return self.scoped(values[0], (), hops + 1)
        if var in self.f.module_loops:
            one = self.one_entry(var, self.f.module_loops[var], ())
            return None if one is None else self.scoped(one, (), hops + 1)
        return None

    def where(self, node: cst.BaseExpression, chain: tuple[Function, ...]) -> str | None:
        """The site kind of what a spelled-out name is bound to (`entry` for a loop's entry)."""
        while isinstance(node, cst.Subscript):
            node = node.value
        if not isinstance(node, cst.Name):
            return None
        for fn in reversed(chain):
            if node.value in fn.assigns:
                return "local"
            if node.value in fn.loop_targets:
                return "entry"
        if node.value in self.f.module_assigns:
            return "constant"
        return "entry" if node.value in self.f.module_loops else None

    def item(
        self, sub: cst.Subscript, chain: tuple[Function, ...], hops: int = 0
    ) -> tuple[cst.BaseExpression, str, tuple[Function, ...]] | str:
        """The written node `cfg["block_M"]` / `cfg[1]` reads, its site kind (`dict` for a key,
        else where the container is written) and the scope the container is written in, or the
        sentence saying why there is none."""
        at = f"`{code_of(sub)}` at line {self.f.line(sub)}"
        key: object = None
        if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index):
            index = sub.slice[0].slice.value
            key = index.evaluated_value if isinstance(index, cst.SimpleString) else literal(index)
        if not isinstance(key, (str, int)) or isinstance(key, bool):
            return f"{at}: the entry is chosen by a value that is not a literal"
        found = self.scoped(sub.value, chain, hops + 1)
        if found is None:
            return f"{at}: {self._unspelled(sub.value, chain)}"
        container, scope = found
        if isinstance(key, str):
            items = dict_items(container)
            if items is None:
                return f"{at}: `{code_of(container)}` is not a dict the file spells out"
            if key not in items:
                return f"{at}: the dict written at line {self.f.line(container)} has no key {key!r}"
            return items[key], "dict", scope
        if not isinstance(container, (cst.Tuple, cst.List)) or any(
            isinstance(e, cst.StarredElement) for e in container.elements
        ):
            return f"{at}: `{code_of(container)}` is not a tuple the file spells out"
        if not -len(container.elements) <= key < len(container.elements):
            return f"{at}: the tuple written at line {self.f.line(container)} has no entry {key}"
        kind = self.where(sub.value, chain) or "entry"
        return container.elements[key].value, kind, scope

    def _unspelled(self, node: cst.BaseExpression, chain: tuple[Function, ...]) -> str:
        """Why `node` (the container a subscript reads) is not one spelled-out node."""
        while isinstance(node, cst.Subscript):
            node = node.value
        if not isinstance(node, cst.Name):
            return f"`{code_of(node)}` is not a configuration the file spells out"
        var = node.value
        stmt = self.changed(var, chain)
        if stmt is not None:
            return (
                f"'{var}' is changed at line {self.f.line(stmt)} (`{code_of(stmt)}`) after it "
                f"is written"
            )
        for fn in reversed(chain):
            if var in fn.assigns:
                values = fn.assigns[var]
                if len(values) != 1:
                    return f"'{var}' is assigned {len(values)} times in {fn.name}()"
                return (
                    f"'{var}' is set by `{code_of(values[0])}` at line "
                    f"{self.f.line(values[0])}, not a configuration the file spells out"
                )
            if takes(fn, var):
                return (
                    f"'{var}' is a parameter of {fn.name}(): the configuration comes from its "
                    f"callers, and its calls do not pass one configuration the file spells out and "
                    f"leaves unchanged"
                )
            if var in fn.loop_targets:
                return self.several(var, fn.loop_targets[var])
        module_values = self.f.module_assigns.get(var)
        if module_values:
            values = module_values
            if len(values) != 1:
                return f"module name '{var}' is assigned {len(values)} times"
            return (
                f"'{var}' is set by `{code_of(values[0])}` at line {self.f.line(values[0])}, "
                f"not a configuration the file spells out"
            )
        if var in self.f.module_loops:
            return self.several(var, self.f.module_loops[var])
        return self.unbound(var)

    def unbound(self, name: str) -> str:
        """Why a name no assignment, parameter or `for` statement binds has no literal."""
        node = writes(self.f.wrapper).other.get(name)
        if node is None:
            return f"'{name}' is not bound in this module"
        what = {
            cst.Lambda: "a lambda's parameter",
            cst.CompFor: "a comprehension's variable",
            cst.WithItem: "`with ... as`",
            cst.ExceptHandler: "`except ... as`",
            cst.NamedExpr: "`:=`",
            cst.ImportAlias: "an import",
        }.get(type(node), "a construct")
        return (
            f"'{name}' is bound by {what} at line {self.f.line(node)}, not by an assignment or "
            f"a call tunebot can follow to one literal"
        )

    @staticmethod
    def several(name: str, loop: Loop) -> str:
        return (
            f"'{name}' is set by the for loop at line {loop.line} (one value per "
            f"pass, e.g. a list of test configurations); tunebot edits a name bound to "
            f"one integer literal, not the entries of the list a loop walks"
        )
