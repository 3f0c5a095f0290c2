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
import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from bot.config import OpConfig
from bot.strategies import catalog
from bot.strategies.base import Attempt, Change, PlanContext, Refusal, Variant
from bot.strategies.source import make_variant, source_hash

PROTOCOL = 1
TAIL_CHARS = 2000


def signatures(source: str, entry: str | None = None) -> dict[str, str]:
    """Name -> parameter list of every @T.prim_func function and of the module-level `entry`.

    Raises SyntaxError when the source does not parse.
    """
    tree = ast.parse(source)
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(ast.unparse(d).split("(")[0].endswith("prim_func") for d in node.decorator_list):
                found[f"@prim_func {node.name}"] = ast.unparse(node.args)
    if entry:
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry:
                found[f"entry {node.name}"] = ast.unparse(node.args)
    return found


def check_proposal(parent: str, proposal: str, seen: set[str], entry: str | None = None) -> str | None:
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
    digest = source_hash(proposal)
    if proposal == parent:
        return "identical to the best-so-far source"
    if digest in seen:
        return f"identical to an already evaluated source ({digest[:12]})"
    return None


def _attempt_json(a: Attempt) -> dict:
    return {"strategy": a.change.strategy, "description": a.change.description, "knob": a.change.knob,
            "old": _plain(a.change.old), "new": _plain(a.change.new), "verdict": a.verdict, "gain": a.gain,
            "source_hash": a.source_hash, "parent_hash": a.parent_hash}


def _plain(value: object) -> object:
    return value if isinstance(value, (int, float, str, bool, type(None), list)) else str(value)


class ExternalProposer:
    def __init__(self, argv: tuple[str, ...], cwd: Path | None = None, timeout_s: float = 600.0) -> None:
        if not argv or not all(isinstance(a, str) and a for a in argv):
            raise ValueError("proposer argv must be a non-empty list of strings")
        self.argv, self.cwd, self.timeout_s = tuple(argv), cwd, timeout_s

    @property
    def name(self) -> str:
        """The proposer's name for descriptions: the script, not the interpreter running it."""
        names = [Path(a).name for a in self.argv if not a.startswith("-")]
        scripts = [n for n in names[1:] if "." in n] if names and names[0].startswith("python") else []
        return scripts[0] if scripts else names[0] if names else self.argv[0]

    def context(self, op: OpConfig, strategy: str, ctx: PlanContext, best_path: Path, output_path: Path,
                description_path: Path) -> dict:
        s = catalog.get(strategy)
        return {
            "protocol": PROTOCOL,
            "op": {"project": op.project, "name": op.name, "qualified": op.qualified,
                   "kernel_kind": op.kernel_kind, "entry": op.entry, "source": op.source.as_posix()},
            "strategy": {"id": s.id, "title": s.title, "when": s.when,
                         "expected_gain": list(s.gain) if s.gain else None},
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
                "exit 0 when a proposal was written, non-zero to decline",
            ],
        }

    def propose(self, op: OpConfig, strategy: str, ctx: PlanContext, seen: set[str]) -> Variant | Refusal:
        """Run the command once; a Variant, or a Refusal carrying the rejected Attempt."""
        parent_hash = source_hash(ctx.best_source)

        def reject(reason: str, proposal: str | None = None) -> Refusal:
            digest = source_hash(proposal) if proposal is not None else ""
            change = Change(strategy=strategy, description=f"proposal rejected: {reason}")
            attempt = Attempt(change=change, source_hash=digest, parent_hash=parent_hash, verdict="rejected")
            return Refusal((f"{strategy}: {reason}",), strategy=strategy, attempt=attempt)

        tmp = Path(tempfile.mkdtemp(prefix="tunebot-proposal-"))
        try:
            best = tmp / "best" / f"{op.name}.py"
            best.parent.mkdir()
            best.write_text(ctx.best_source)
            out, desc, ctx_path = tmp / "variant.py", tmp / "description.txt", tmp / "context.json"
            ctx_path.write_text(json.dumps(self.context(op, strategy, ctx, best, out, desc), indent=2,
                                           sort_keys=True))
            ran = self._run(ctx_path, out)
            if ran is not None:
                return reject(ran)
            if not out.is_file():
                return reject(f"the proposer exited 0 but wrote nothing to {out.name}")
            proposal = out.read_text(encoding="utf-8", errors="replace")
            problem = check_proposal(ctx.best_source, proposal, seen, op.entry)
            if problem:
                return reject(problem, proposal)
            text = desc.read_text(errors="replace").strip().splitlines() if desc.is_file() else []
            summary = text[0][:200] if text else f"{strategy} proposal by {self.name}"
            change = Change(strategy=strategy, description=summary)
            return make_variant(ctx.best_source, proposal, change, f"{op.name}.py")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _run(self, ctx_path: Path, out: Path) -> str | None:
        """Run the command; None on exit 0, else why it failed."""
        env = dict(os.environ, TUNEBOT_CONTEXT=str(ctx_path), TUNEBOT_OUTPUT=str(out))
        try:
            proc = subprocess.Popen([*self.argv, str(ctx_path), str(out)], cwd=self.cwd, env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # own process group: a timeout kills its children too
        except FileNotFoundError:
            return f"proposer command not found: {self.argv[0]} (fix 'proposer' in .tunebot.yml or tune.yaml)"
        except PermissionError:
            return f"proposer command is not executable: {self.argv[0]}"
        try:
            output, _ = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return f"the proposer timed out after {self.timeout_s:g} s"
        if proc.returncode != 0:
            tail = output.decode(errors="replace")[-TAIL_CHARS:].strip()
            return f"the proposer exited {proc.returncode}" + (f": {tail.splitlines()[-1]}" if tail else "")
        return None
