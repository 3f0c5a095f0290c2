"""External proposer protocol: a configured command writes the variants no rule can make.

See docs/proposer.md. The command (an argv list from config, never run through
a shell) is called as

    <argv...> CONTEXT_JSON OUTPUT_PY

(also given as $TUNEBOT_CONTEXT and $TUNEBOT_OUTPUT), with the worktree as its
working directory and a timeout. It reads the JSON context, writes the complete
new kernel source to OUTPUT_PY and may write a one-line description of its
change to the context's `description_path`. Exit 0 = a proposal was written.
tunebot then checks the proposal; what fails a check is rejected with a reason
that is recorded, and never evaluated.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bot.config.schema import OpConfig
from bot.measure.sandbox import run_sandboxed, scrub_env
from bot.strategies import catalog
from bot.strategies.base import Attempt, Change, PlanContext, Refusal, Variant
from bot.strategies.source import make_variant, source_hash

PROTOCOL = 1
TAIL_CHARS = 2000


def _is_prim_func(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(ast.unparse(d).split("(")[0].endswith("prim_func") for d in node.decorator_list)


def _walk_functions(body: Sequence[ast.AST], prefix: str):
    """(qualified path, node) of every function, nested ones as `outer.inner`."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            path = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield path, node
            yield from _walk_functions(node.body, path + ".")
        else:
            # functions defined under if/with/for/try blocks keep the enclosing prefix
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    yield from _walk_functions([n for n in inner if isinstance(n, ast.AST)], prefix)


def signatures(source: str, entry: str | None = None) -> dict[str, str]:
    """Qualified name -> parameter list of every @T.prim_func function and of the module-level `entry`.

    Prim_funcs are keyed by their qualified path (`rms_norm.rmsNorm`) so two nested
    functions with the same name are both checked. Raises SyntaxError when the source does not parse.
    """
    tree = ast.parse(source)
    found: dict[str, str] = {}
    for path, node in _walk_functions(tree.body, ""):
        if _is_prim_func(node):
            found[f"@prim_func {path}"] = ast.unparse(node.args)
    if entry:
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry:
                found[f"entry {node.name}"] = ast.unparse(node.args)
    return found


def _is_main_block(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    names = [ast.unparse(node.test.left)] + [ast.unparse(c) for c in node.test.comparators]
    return "__name__" in names and any(n.strip("'\"") == "__main__" for n in names)


def protected_parts(
    source: str, inputs: str = "get_inputs", reference: str = "reference"
) -> dict[str, str]:
    """Part name -> ast.dump of what a proposal must leave alone: the functions the L0
    check trusts (reference, inputs) and the `__main__` block that runs it. A proposal
    that edits them could pass L0 by weakening the check instead of improving the kernel.
    """
    tree = ast.parse(source)
    parts: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in (
            inputs,
            reference,
        ):
            parts[f"function {node.name}"] = ast.dump(node)
        elif _is_main_block(node):
            key = 'the `if __name__ == "__main__":` block'
            parts[key] = parts.get(key, "") + ast.dump(node)
    return parts


def check_proposal(
    parent: str,
    proposal: str,
    seen: set[str],
    entry: str | None = None,
    inputs: str = "get_inputs",
    reference: str = "reference",
) -> str | None:
    """Why `proposal` must be rejected, or None when it may be evaluated."""
    try:
        new_sigs = signatures(proposal, entry)
    except SyntaxError as exc:
        return f"not valid Python: line {exc.lineno}: {exc.msg}"
    old_sigs = signatures(parent, entry)
    for name, sig in sorted(old_sigs.items()):
        if name not in new_sigs:
            return f"changes the kernel's signature: {name} is gone"
        if new_sigs[name] != sig:
            return f"changes the kernel's signature: {name}({sig}) became ({new_sigs[name]})"
    added = sorted(set(new_sigs) - set(old_sigs))
    if added:
        return f"changes the kernel's signature: adds {', '.join(added)}"
    old_parts, new_parts = (
        protected_parts(parent, inputs, reference),
        protected_parts(proposal, inputs, reference),
    )
    for name in sorted(set(old_parts) | set(new_parts)):
        if name not in new_parts:
            return f"changes the accuracy check: {name} is gone"
        if name not in old_parts:
            return f"changes the accuracy check: adds {name}"
        if old_parts[name] != new_parts[name]:
            return f"changes the accuracy check: {name} was edited"
    digest = source_hash(proposal)
    if proposal == parent:
        return "identical to the best-so-far source"
    if digest in seen:
        return f"identical to an already evaluated source ({digest[:12]})"
    return None


def _attempt_json(a: Attempt) -> dict:
    return {
        "strategy": a.change.strategy,
        "description": a.change.description,
        "knob": a.change.knob,
        "old": _plain(a.change.old),
        "new": _plain(a.change.new),
        "verdict": a.verdict,
        "gain": a.gain,
        "source_hash": a.source_hash,
        "parent_hash": a.parent_hash,
    }


def _plain(value: object) -> object:
    return value if isinstance(value, (int, float, str, bool, type(None), list)) else str(value)


class ExternalProposer:
    def __init__(
        self, argv: tuple[str, ...], cwd: Path | None = None, timeout_s: float = 600.0
    ) -> None:
        if not argv or not all(isinstance(a, str) and a for a in argv):
            raise ValueError("proposer argv must be a non-empty list of strings")
        self.argv, self.cwd, self.timeout_s = tuple(argv), cwd, timeout_s

    @property
    def name(self) -> str:
        """The proposer's name for descriptions: the script, not the interpreter running it."""
        names = [Path(a).name for a in self.argv if not a.startswith("-")]
        scripts = (
            [n for n in names[1:] if "." in n] if names and names[0].startswith("python") else []
        )
        return scripts[0] if scripts else names[0] if names else self.argv[0]

    def context(
        self,
        op: OpConfig,
        strategy: str,
        ctx: PlanContext,
        best_path: Path,
        output_path: Path,
        description_path: Path,
    ) -> dict:
        s = catalog.get(strategy)
        return {
            "protocol": PROTOCOL,
            "op": {
                "project": op.project,
                "name": op.name,
                "qualified": op.qualified,
                "kernel_kind": op.kernel_kind,
                "entry": op.entry,
                "source": op.source.as_posix(),
            },
            "strategy": {
                "id": s.id,
                "title": s.title,
                "when": s.when,
                "expected_gain": list(s.gain) if s.gain else None,
            },
            "best_source_path": str(best_path),
            "best_source_hash": source_hash(ctx.best_source),
            "output_path": str(output_path),
            "description_path": str(description_path),
            "profile_summary": ctx.profile_summary,
            "history": [_attempt_json(a) for a in ctx.history],
            "previous_failure": ctx.last_failure,
            "rules": [
                "write the complete new source of the kernel file to output_path",
                "make ONE logical change, of the requested strategy",
                "keep every @T.prim_func signature and the entry function's signature",
                "leave the reference function, the inputs function and the __main__ block unchanged",
                "exit 0 when a proposal was written, non-zero to decline",
            ],
        }

    def propose(
        self, op: OpConfig, strategy: str, ctx: PlanContext, seen: set[str]
    ) -> Variant | Refusal:
        """Run the command once; a Variant, or a Refusal carrying the rejected Attempt."""
        parent_hash = source_hash(ctx.best_source)

        def reject(reason: str, proposal: str | None = None) -> Refusal:
            digest = source_hash(proposal) if proposal is not None else ""
            change = Change(strategy=strategy, description=f"proposal rejected: {reason}")
            attempt = Attempt(
                change=change, source_hash=digest, parent_hash=parent_hash, verdict="rejected"
            )
            return Refusal((f"{strategy}: {reason}",), strategy=strategy, attempt=attempt)

        tmp = Path(tempfile.mkdtemp(prefix="tunebot-proposal-"))
        try:
            best = tmp / "best" / f"{op.name}.py"
            best.parent.mkdir()
            best.write_text(ctx.best_source)
            out, desc, ctx_path = tmp / "variant.py", tmp / "description.txt", tmp / "context.json"
            ctx_path.write_text(
                json.dumps(
                    self.context(op, strategy, ctx, best, out, desc), indent=2, sort_keys=True
                )
            )
            ran = self._run(ctx_path, out)
            if ran is not None:
                return reject(ran)
            if not out.is_file():
                return reject(f"the proposer exited 0 but wrote nothing to {out.name}")
            proposal = out.read_text(encoding="utf-8", errors="replace")
            problem = check_proposal(
                ctx.best_source, proposal, seen, op.entry, op.inputs, op.reference
            )
            if problem:
                return reject(problem, proposal)
            text = desc.read_text(errors="replace").strip().splitlines() if desc.is_file() else []
            summary = text[0][:200] if text else f"{strategy} proposal by {self.name}"
            change = Change(strategy=strategy, description=summary)
            return make_variant(ctx.best_source, proposal, change, f"{op.name}.py")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _run(self, ctx_path: Path, out: Path) -> str | None:
        """Run the command; None on exit 0, else why it failed.

        The sandbox writes output to a file (a background child left by the proposer
        cannot hold us on a pipe), keeps a capped tail, and kills the process group
        when the command returns or times out, so nothing it started outlives it.
        """
        env = dict(scrub_env(os.environ), TUNEBOT_CONTEXT=str(ctx_path), TUNEBOT_OUTPUT=str(out))
        run = run_sandboxed(
            [*self.argv, str(ctx_path), str(out)], self.cwd or Path.cwd(), self.timeout_s, env=env
        )
        if run.ok:
            return None
        if run.timed_out:
            return f"the proposer timed out after {self.timeout_s:g} s"
        if run.returncode is None:  # could not be started at all
            if run.extra.get("errno") == errno.EACCES:
                return f"proposer command is not executable: {self.argv[0]}"
            return f"proposer command not found: {self.argv[0]} (fix 'proposer' in .tunebot.yml or tune.yaml)"
        tail = run.output[-TAIL_CHARS:].strip()
        what = f"exited {run.returncode}" if run.returncode > 0 else f"was {run.reason}"
        return f"the proposer {what}" + (f": {tail.splitlines()[-1]}" if tail else "")
