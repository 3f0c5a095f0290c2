"""Kernel factories that the path a file runs never builds.

A file that runs its kernels itself (an `if __name__ == "__main__":` block that calls
something) builds them through calls. A factory whose name nothing in the file reads (not
called, not passed as a builder, not returned, not an attribute) and which no harness names
is never built by that run: a literal only it reads changes nothing measured (a legacy kernel
kept beside the live one). Its block names are dropped with that reason, and the live
factories' same-named parameters are bound without it. A file with no such block is a library
whose importer may build any factory: nothing is ruled out there, except a factory the file
itself reads only as the argument of a source-introspection call (`inspect.getsource(f)` fed
to `ast.parse`, an autotuner's parser probe): the file treats it as text, never calls it,
builds nothing from it, and no harness names it.
"""

from __future__ import annotations

import libcst as cst

from bot.strategies import dispatch
from bot.strategies.facts import Facts, Function
from bot.strategies.source import dotted, name_reads

ENVIRON = frozenset({"os.environ", "environ"})  # `os.environ[...]`, `environ.get(...)`


def _main_blocks(module: cst.Module) -> list[cst.If]:
    """The module's `if __name__ == "__main__":` blocks."""
    return [
        stmt
        for stmt in module.body
        if isinstance(stmt, cst.If)
        and isinstance(stmt.test, cst.Comparison)
        and "__name__" in {n.value for n in _names(stmt.test)}
    ]


def _runs_itself(module: cst.Module) -> bool:
    """True when the module has an `if __name__ == "__main__":` block that calls something."""
    return any(_calls_in(block.body) for block in _main_blocks(module))


def _calls_in(node: cst.CSTNode) -> bool:
    found: list[cst.Call] = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            found.append(n)

    node.visit(V())
    return bool(found)


def _names(node: cst.CSTNode) -> list[cst.Name]:
    out: list[cst.Name] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.append(n)

    node.visit(V())
    return out


def _reached_from_main(module: cst.Module) -> set[str]:
    """Names the `__main__` block reads, and through the module's functions it names, theirs."""
    defs = {stmt.name.value: stmt for stmt in module.body if isinstance(stmt, cst.FunctionDef)}
    todo = [n.value for block in _main_blocks(module) for n in _names(block.body)]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in defs:
            todo.extend(n.value for n in _names(defs[name].body))
    return seen


def _read_names(module: cst.Module) -> set[str]:
    """Every name the module reads or reaches as an attribute (a def's own name excluded)."""
    return set(name_reads(module))


def _reads(module: cst.Module, names: set[str]) -> dict[str, tuple[list[cst.Name], set[int]]]:
    """For each of `names`: every read of it in the module (a def's own name excluded), and
    the ids of those reads that sit inside the arguments of a source-introspection call.
    One walk serves every name: a walk of a large module is the expensive part."""
    found: dict[str, tuple[list[cst.Name], set[int]]] = {n: ([], set()) for n in names}
    depth = 0

    class V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            for part in (node.params, node.body, *node.decorators):
                part.visit(self)
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            for part in (node.body, *node.decorators):
                part.visit(self)
            return False

        def visit_Call(self, node: cst.Call) -> bool:
            nonlocal depth
            if dotted(node.func).rsplit(".", 1)[-1] not in _INTROSPECTION:
                return True
            node.func.visit(self)
            depth += 1
            for arg in node.args:
                arg.visit(self)
            depth -= 1
            return False

        def visit_Name(self, node: cst.Name) -> None:
            entry = found.get(node.value)
            if entry is not None:
                entry[0].append(node)
                if depth:
                    entry[1].add(id(node))

    module.visit(V())
    return found


def only_inspected(f: Facts, harness: tuple[str, ...]) -> list[Function]:
    """Factories the file reads, but only as the argument of a source-introspection call
    (`inspect.getsource(factory)`): it parses their text and never calls them. Kept on the
    parse: every knob and loop of the file asks the same question."""
    key = ("unbuilt.only_inspected", tuple(harness))
    return list(f.kept(key, lambda: _only_inspected(f, tuple(harness))))


def _only_inspected(f: Facts, harness: tuple[str, ...]) -> list[Function]:
    module = f.wrapper.module
    if _looks_up_by_name(module):
        return []
    candidates = [fac for fac in f.factories if fac.chain[0].name not in harness]
    if not candidates:
        return []
    reads = _reads(module, {fac.chain[0].name for fac in candidates})
    out = []
    for fac in candidates:
        named, inspected = reads[fac.chain[0].name]
        if named and all(id(r) in inspected for r in named):
            out.append(fac)
    return out


def unbuilt(f: Facts, harness: tuple[str, ...]) -> list[Function]:
    """The factories (outermost function of each chain) the file's run path never builds.
    Kept on the parse, as `only_inspected` is."""
    return list(f.kept(("unbuilt.unbuilt", tuple(harness)), lambda: _unbuilt(f, tuple(harness))))


def _unbuilt(f: Facts, harness: tuple[str, ...]) -> list[Function]:
    module = f.wrapper.module
    inspected = only_inspected(f, harness)
    if not _runs_itself(module):
        return inspected
    read = _read_names(module) | set(harness)
    if _looks_up_by_name(module):
        return []  # factories may be reached through a string: none can be ruled out
    reached = _reached_from_main(module)
    if not any(fac.chain[0].name in reached for fac in f.factories):
        return inspected  # the run path builds no factory by name: it says nothing else
    dead = [fac for fac in f.factories if fac.chain[0].name not in read]
    skipped = never_taken(module)
    if skipped:  # read only inside a branch on a mode the file never sets
        names = {fac.chain[0].name for fac in f.factories} - set(harness)
        reads = _reads(module, names)
        dead += [
            fac
            for fac in f.factories
            if fac not in dead
            and fac.chain[0].name in names
            and reads[fac.chain[0].name][0]
            and all(id(r) in skipped for r in reads[fac.chain[0].name][0])
        ]
    dead += [fac for fac in inspected if fac not in dead]
    away = dispatch.dispatched(f, harness)  # called only on branches the run never takes
    return dead + [fac for fac in f.factories if id(fac) in away and fac not in dead]


def _environ_key(node: cst.BaseExpression) -> str | None:
    """K of `os.environ["K"]`, `os.environ.get("K")` or `os.getenv("K")`, else None."""
    key = _environ_key_node(node)
    return str(key.evaluated_value) if key is not None else None


def _environ_key_node(node: cst.BaseExpression) -> cst.SimpleString | None:
    """The "K" of `os.environ["K"]`, `os.environ.get("K")` or `os.getenv("K")`, else None."""
    key: cst.BaseExpression | None = None
    if isinstance(node, cst.Subscript) and dotted(node.value) in ENVIRON and len(node.slice) == 1:
        index = node.slice[0].slice
        key = index.value if isinstance(index, cst.Index) else None
    elif isinstance(node, cst.Call) and node.args and node.args[0].keyword is None:
        func = dotted(node.func)
        if func in ("os.getenv", "getenv") or func.removesuffix(".get") in ENVIRON:
            key = node.args[0].value
    if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
        return key
    return None


def environment_set(module: cst.Module) -> dict[str, set[str]]:
    """K -> every string `os.environ["K"]` can hold when the file reads it, for the keys the file
    decides itself: each assignment to it is a string literal, made at module level or directly
    in the `if __name__ == "__main__":` block (not under another condition), and the first comes
    before the first statement there that calls one of the file's own functions (before it, a
    read would see the shell's value). A read with a default (`os.environ.get("K", "Dev")`)
    adds the default. A key the file names anywhere else (`os.environ.setdefault("K", ...)`,
    `monkeypatch.setenv("K", ...)`, a dict of settings) may be set there too, and is left out."""
    values: dict[str, set[str]] = {}
    unknown: set[str] = set()
    seen: set[int] = set()  # the key strings of the reads and assignments understood
    top: set[int] = set()  # the assignments at the top level of the run
    first_set: dict[str, int] = {}  # key -> index of the top-level statement first setting it
    defs = {st.name.value for st in module.body if isinstance(st, cst.FunctionDef)}
    first_call = None
    run = [*module.body, *(st for block in _main_blocks(module) for st in block.body.body)]
    for i, stmt in enumerate(run):
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                top.add(id(small))
                for t in small.targets:
                    key = _environ_key(t.target) if isinstance(t.target, cst.Subscript) else None
                    if key is not None:
                        first_set.setdefault(key, i)
        if first_call is None and _calls_own(stmt, defs):
            first_call = i

    class V(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> None:
            key = _environ_key_node(node)
            if key is not None:
                seen.add(id(key))

        def visit_Call(self, node: cst.Call) -> None:
            key = _environ_key_node(node)
            if key is None:
                return
            seen.add(id(key))
            given = [a.value for a in node.args if a.keyword is None]
            if len(given) > 1:  # a default: what the read gives while the key is unset
                default = given[1]
                k = str(key.evaluated_value)
                if isinstance(default, cst.SimpleString) and isinstance(
                    default.evaluated_value, str
                ):
                    values.setdefault(k, set()).add(default.evaluated_value)
                else:
                    unknown.add(k)

        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                key = _environ_key(t.target) if isinstance(t.target, cst.Subscript) else None
                if key is None:
                    continue
                value = node.value
                if id(node) not in top:
                    unknown.add(key)  # set under a condition, in a loop or in a function
                elif isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
                    values.setdefault(key, set()).add(value.evaluated_value)
                else:
                    unknown.add(key)

    module.visit(V())

    class Elsewhere(cst.CSTVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            if id(node) not in seen and node.evaluated_value in values:
                unknown.add(str(node.evaluated_value))

    module.visit(Elsewhere())
    for key, at in first_set.items():
        if first_call is not None and first_call < at:
            unknown.add(key)
    return {k: v for k, v in values.items() if k not in unknown and k in first_set}


def _calls_own(stmt: cst.CSTNode, defs: set[str]) -> bool:
    """Whether `stmt` calls a function the module defines (`run_test(args)`)."""
    found = False

    class V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            found = found or (isinstance(node.func, cst.Name) and node.func.value in defs)

    stmt.visit(V())
    return found


def never_taken(module: cst.Module) -> set[int]:
    """ids of the names inside the branches of `if os.environ["K"] == "v":` that never run
    because the file sets K only to other strings ('dev' and 'Expert', never 'Dev'), or the
    `else` of one whose every value matches. Comparisons are exact, as Python's are."""
    env = environment_set(module)
    if not env:
        return set()
    out: set[int] = set()

    class Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            out.add(id(node))

    class V(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            test = node.test
            if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
                return
            op, right = test.comparisons[0].operator, test.comparisons[0].comparator
            key = _environ_key(test.left)
            if (
                key not in env
                or not isinstance(op, (cst.Equal, cst.NotEqual))
                or not isinstance(right, cst.SimpleString)
                or not isinstance(right.evaluated_value, str)
            ):
                return
            matches = {v == right.evaluated_value for v in env[key]}
            if isinstance(op, cst.NotEqual):
                matches = {not m for m in matches}
            if matches == {False}:
                node.body.visit(Names())
            elif matches == {True} and node.orelse is not None:
                node.orelse.visit(Names())

    module.visit(V())
    return out


# calls that reach module attributes by a name held in a string (`globals()[name]`,
# `getattr(module, name)`, `fire.Fire()` exposing every function on the command line)
_BY_NAME_AT_RUN_TIME = frozenset(
    {"globals", "locals", "vars", "getattr", "Fire", "eval", "exec", "getmembers", "modules"}
)
# calls that read a function's source text or signature without calling it
_INTROSPECTION = frozenset({"getsource", "getsourcelines", "getsourcefile", "signature"})


def _looks_up_by_name(module: cst.Module) -> bool:
    """Whether the module may reach its own functions through a name held in a string:
    `fire.Fire()`, `globals()[name]` / `vars()` / `locals()` with a key that is not a string
    literal naming something else, or `getattr(obj, name)` with a runtime name on anything but
    a module the file imports. `getattr(torch, dtype_str)` reads torch's attributes and
    `getattr(p, "dtype")` or `globals()["_raw_stream"] = None` one named attribute, never one
    of the file's functions."""
    defs = {stmt.name.value for stmt in module.body if isinstance(stmt, cst.FunctionDef)}
    imported = _imported_modules(module)
    safe: set[int] = set()  # ids of the Name nodes of lookups that cannot reach a def

    def named(node: cst.BaseExpression) -> bool:
        """A string literal naming no function of the module."""
        return isinstance(node, cst.SimpleString) and str(node.evaluated_value) not in defs

    class Safe(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> None:
            call = node.value
            if (
                isinstance(call, cst.Call)
                and isinstance(call.func, cst.Name)
                and call.func.value in ("globals", "vars", "locals")
                and not call.args
                and len(node.slice) == 1
                and isinstance(node.slice[0].slice, cst.Index)
                and named(node.slice[0].slice.value)
            ):
                safe.add(id(call.func))

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "eval" and node.args:
                if _module_prefix(node.args[0].value) in imported:
                    safe.add(id(node.func))  # `eval("torch." + dtype)`: torch's attribute
                return
            if not (isinstance(node.func, cst.Name) and node.func.value == "getattr"):
                return
            args = [a.value for a in node.args]
            if len(args) >= 2 and (named(args[1]) or dotted(args[0]).split(".", 1)[0] in imported):
                safe.add(id(node.func))

    module.visit(Safe())
    found = False

    class Unsafe(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            nonlocal found
            found = found or (node.value in _BY_NAME_AT_RUN_TIME and id(node) not in safe)

    module.visit(Unsafe())
    return found


def _module_prefix(node: cst.BaseExpression) -> str:
    """`torch` of `"torch." + dtype` or `f"torch.{dtype}"`: the module an evaluated text names
    first, '' when it does not start with a literal `name.`."""
    while isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        node = node.left
    text = ""
    if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
        text = node.evaluated_value
    elif isinstance(node, cst.FormattedString) and node.parts:
        first = node.parts[0]
        text = first.value if isinstance(first, cst.FormattedStringText) else ""
    head, dot, _ = text.partition(".")
    return head if dot and head.isidentifier() else ""


def _imported_modules(module: cst.Module) -> set[str]:
    """Names `import x` / `import x.y` / `import x as y` bind to other modules (`import
    __main__` excepted: that is the running file itself)."""
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> None:
            for alias in node.names:
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    out.add(alias.asname.name.value)
                else:
                    out.add(dotted(alias.name).split(".", 1)[0])

    module.visit(V())
    return out - {"__main__"}  # `import __main__`: the running file itself


def reason(names: list[str], inspected: bool = False) -> str:
    return "read only by " + never_built(names, inspected)


def reason_for(f: Facts, harness: tuple[str, ...], facs: list[Function]) -> str:
    """Why the unbuilt factories `facs` (outermost functions of their chains) are never
    built: the branch that dispatches the run elsewhere, or the plain reasons above."""
    away = dispatch.dispatched(f, harness)
    dispatched = list(dict.fromkeys(away[id(fac)] for fac in facs if id(fac) in away))
    rest = [fac for fac in facs if id(fac) not in away]
    if not rest:
        return "; ".join(dispatched)
    inspected = {id(fac) for fac in only_inspected(f, harness)}
    names = sorted({fac.chain[0].name for fac in rest})
    plain = reason(names, all(id(fac) in inspected for fac in rest))
    return "; ".join([plain, *dispatched])


def never_built(names: list[str], inspected: bool = False) -> str:
    """`f(), which ... never builds it ...`: why the factories `names` are never built."""
    where = ", ".join(f"{n}()" for n in names)
    if inspected:
        return (
            f"{where}, which the file reads only as the argument of a source-introspection "
            f"call (inspect.getsource): it parses the text and never builds the kernel, so "
            f"tuning it cannot change anything measured"
        )
    return (
        f"{where}, which nothing in the file calls or passes on while its "
        f'`if __name__ == "__main__":` block runs other kernels: the run never builds it, so '
        f"tuning it cannot change anything measured"
    )
