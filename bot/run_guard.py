"""What keeps a run intact against kernels that meddle and people who move things by hand.

- `GuardedLog`: results.jsonl as this run last wrote it. Deleted, truncated or edited while the
  run holds its lock (by a kernel, or by hand), it is put back from memory before the next read
  or append, and the repair is reported.
- `GuardedEvaluator`: around every kernel run, checks that tunebot's worktree exists (recreated
  if a person removed it; the call is then repeated) and that the kernel changed nothing it must
  not: the records, tunebot's worktree, and, where the file-system confinement of
  bot.measure.confine is not enforced, the user's checkout and the repository's refs, config and
  hooks. A kernel that did is an error result, never adopted or delivered, and the worktree is
  reset.
- `housekeeping`: at the start of a run (lock held), kills kernel processes a killed run left
  behind and removes the temporary index files, stale git `.lock` files and temporary folders
  a SIGKILL left.
- `restart_reason` / `check_branches` / `check_base_branch`: state moved by hand, noticed before
  anything is measured, either repaired or explained with the one command that fixes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from bot import fs, naming
from bot.errors import EXIT_BAD_INPUT
from bot.git import branches, refs, repository, worktrees
from bot.measure import confine, reaper, sandbox
from bot.measure.types import AccuracyResult, Decision, LatencyResult
from bot.run.errors import RunError
from bot.run.log import ResultsLog

Notify = Callable[[str], None]
STALE_LOCK_S = 2.0  # a git .lock this old under tunebot's own refs is left by a killed process
MAX_WALK = 200_000  # files; a checkout larger than this is not fingerprinted


class StateProblem(RunError):
    """State a person changed by hand that tunebot cannot repair on its own: exit 2 and the fix."""

    exit_code = EXIT_BAD_INPUT


# ---------------------------------------------------------------- the records


class GuardedLog(ResultsLog):
    """A ResultsLog that notices when its file changed behind the run's back and puts it back."""

    def __init__(self, path: Path | str, notify: Notify = lambda message: None) -> None:
        super().__init__(path)
        self.notify = notify
        self._expected = self._bytes()

    def _bytes(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    def verify(self) -> str | None:
        """None when the file is as this run left it; else restore it and say what had happened."""
        current = self._bytes()
        if current == self._expected:
            return None
        if current is None:
            what = "was deleted"
        elif self._expected is None:
            what = "was created by someone else"
        else:
            what = "was changed by someone else"
        if self._expected is None:
            self.path.unlink(missing_ok=True)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fs.write_atomic(self.path, self._expected)
        return f"{self.path} {what} while this run held it; restored from the run's own copy"

    def _check(self) -> None:
        problem = self.verify()
        if problem:
            self.notify(problem)

    def read(self) -> list[dict]:
        self._check()
        records = super().read()
        self._expected = self._bytes()  # read() may cut a torn last line (a crash of ours)
        return records

    def append(self, record: dict) -> None:
        self._check()
        try:
            super().append(record)
        finally:
            self._expected = self._bytes()


# ---------------------------------------------------------------- fingerprints


def _walk(root: Path, skip: Callable[[str], bool]) -> dict[str, tuple] | None:
    """relative path -> (size, mtime_ns, mode) of every file below `root`; None if too many."""
    found: dict[str, tuple] = {}
    root_s = str(root)
    for folder, dirs, files in os.walk(root_s):
        rel_dir = os.path.relpath(folder, root_s)
        dirs[:] = [d for d in dirs if not skip(os.path.normpath(os.path.join(rel_dir, d)))]
        for name in files:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if skip(rel):
                continue
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            found[rel] = (st.st_size, st.st_mtime_ns, st.st_mode)
            if len(found) > MAX_WALK:
                return None
    return found


def _diff(before: dict | None, after: dict | None) -> list[str]:
    if before is None or after is None:
        return []
    changed = [f"{p} (changed)" for p in before if p in after and before[p] != after[p]]
    changed += [f"{p} (deleted)" for p in before if p not in after]
    changed += [f"{p} (created)" for p in after if p not in before]
    return sorted(changed)


# what interpreters and toolchains write next to the sources they run; never a source itself
TOOL_OUTPUTS = frozenset({"__pycache__", "kernel_meta", "fusion_result.json"})


def _skip_cache(rel: str) -> bool:
    return not TOOL_OUTPUTS.isdisjoint(rel.split(os.sep))


def _git_meta(common: Path) -> dict[str, str]:
    """What in the git dir could change a later push, merge or hook: config, hooks, HEAD, refs."""
    out: dict[str, str] = {}
    for name in ("config", "HEAD", "packed-refs", "tunebot/branches.json"):
        try:
            out[name] = hashlib.sha256((common / name).read_bytes()).hexdigest()
        except OSError:
            out[name] = "-"
    for sub in ("hooks", "refs"):
        walked = _walk(common / sub, lambda rel: rel.endswith(".lock"))
        for rel, meta in (walked or {}).items():
            out[f"{sub}/{rel}"] = repr(meta)
    return out


# ---------------------------------------------------------------- around kernel runs


class GuardedEvaluator:
    """An Evaluator whose every kernel run is bracketed by the checks in the module docstring."""

    def __init__(self, inner, run, notify: Notify) -> None:
        self.inner = inner
        self.repo = run.repo
        self.worktree = Path(run.worktree)
        self.worktree_name = self.worktree.name
        self.perf_dir = self.worktree / run.op.perf_dir  # the variants tunebot wrote there
        self.base_sha = run.base_sha
        self.log = run.log
        self.checkout = Path(run.repo.working_tree_dir)
        self.common = Path(run.repo.common_dir).resolve()
        self.notify = notify
        limits = getattr(inner, "limits", None)
        timeout = run.op.accuracy.timeout_s
        self.confined = bool(
            limits and limits(timeout).writable is not None and confine.landlock_abi()
        )

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    # -- the checked calls -------------------------------------------------
    def accuracy(self, source: Path, *args, **kwargs) -> AccuracyResult:
        result, problem = self._guarded(
            [source], lambda: self.inner.accuracy(source, *args, **kwargs)
        )
        if problem:
            return dataclasses.replace(
                result, status="error", reason=problem, details={**result.details, "tampered": True}
            )
        return result

    def latency(self, source: Path) -> LatencyResult:
        result, problem = self._guarded([source], lambda: self.inner.latency(source))
        return _tampered(result, problem) if problem else result

    def latency_pair(self, a: Path, b: Path) -> tuple[LatencyResult, LatencyResult]:
        (ra, rb), problem = self._guarded([a, b], lambda: self.inner.latency_pair(a, b))
        if problem:
            return _tampered(ra, problem), _tampered(rb, problem)
        return ra, rb

    def decide(
        self, best_source: Path, best, candidate_source: Path, candidate, noise_floor: float
    ) -> Decision:
        result, problem = self._guarded(
            [best_source, candidate_source],
            lambda: self.inner.decide(best_source, best, candidate_source, candidate, noise_floor),
        )
        if problem:
            return dataclasses.replace(
                result, better=False, reason=problem, details={**result.details, "tampered": True}
            )
        return result

    def compare(self, best_source: Path, best, candidate_source: Path, noise_floor: float):
        # the run learns a decision's pair spread only as recorded: a repeated or tampered
        # kernel run takes back what the inner compare learned (a resumed run relearns
        # exactly the recorded decisions, bot.run.machine.learn_pair_spread)
        spread = getattr(self.inner, "pair_spread", None)
        learned = spread.state() if spread is not None else None

        def call():
            if spread is not None:
                spread.restore(learned)
            return self.inner.compare(best_source, best, candidate_source, noise_floor)

        (latency, decision), problem = self._guarded([best_source, candidate_source], call)
        if problem:
            if spread is not None:
                spread.restore(learned)
            latency = _tampered(latency, problem)
            self.inner.paired_best = None  # timed beside a run that tampered: not a baseline
            return latency, None
        return latency, decision

    # -- the bracket --------------------------------------------------------
    def _abs(self, source: Path) -> Path:
        source = Path(source)
        return source if source.is_absolute() else self.worktree / source

    def _guarded(self, sources: list[Path], call: Callable):
        saved = {p: p.read_bytes() for p in map(self._abs, sources) if p.is_file()}
        self._ensure_worktree(saved)
        for attempt in (1, 2):
            before = self._fingerprint()
            result = call()
            if self._worktree_ok():
                break
            self.notify(
                f"tunebot's worktree {self.worktree} was removed during a kernel run; "
                "recreated it and measuring again"
            )
            self._ensure_worktree(saved)
            if attempt == 2:
                return result, "tunebot's worktree was removed during this kernel's run, twice"
        problems = []
        log_problem = self.log.verify() if hasattr(self.log, "verify") else None
        if log_problem:
            problems.append(log_problem)
        after = self._fingerprint()
        changed = _diff(before["worktree"], after["worktree"])
        if changed:
            problems.append(f"changed tunebot's worktree: {', '.join(changed[:10])}")
        fatal = bool(problems)  # tunebot's own state: the run is an error
        if (
            not self.confined
        ):  # outside it: reported; a person may have done it (nothing confines them)
            outside = _diff(before.get("checkout"), after.get("checkout"))
            if outside:
                problems.append(f"changed your checkout {self.checkout}: {', '.join(outside[:10])}")
            meta = sorted(
                k
                for k in set(before["git"]) | set(after["git"])
                if before["git"].get(k) != after["git"].get(k)
            )
            if meta:
                problems.append(f"changed the repository's git data: {', '.join(meta[:10])}")
        if not problems:
            return result, None
        if changed:
            worktrees.ensure_worktree(self.repo, self.worktree_name, self.base_sha)
            self._restore(saved)
        message = ("the kernel run " if fatal else "during a kernel run, something ") + "; ".join(
            problems
        )
        self.notify(message)
        return result, (message[:2000] if fatal else None)

    def _fingerprint(self) -> dict:
        print_: dict[str, object] = {
            "worktree": _walk(self.worktree, lambda rel: _skip_cache(rel) or rel == ".git")
        }
        if not self.confined:
            checkout_skip = {".git"}
            print_["checkout"] = _walk(
                self.checkout, lambda rel: _skip_cache(rel) or rel in checkout_skip
            )
            print_["git"] = _git_meta(self.common)
        return print_

    def _worktree_ok(self) -> bool:
        return (self.worktree / ".git").is_file()

    def _ensure_worktree(self, saved: dict[Path, bytes]) -> None:
        if self._worktree_ok():
            return
        # what tunebot wrote (variants) may still be on disk in a plain folder: keep it
        kept = (
            {p: p.read_bytes() for p in self.perf_dir.glob("*.py") if p.is_file()}
            if self.perf_dir.is_dir()
            else {}
        )
        worktrees.ensure_worktree(self.repo, self.worktree_name, self.base_sha)
        self._restore({**kept, **saved})

    def _restore(self, saved: dict[Path, bytes]) -> None:
        for path, data in saved.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


# ---------------------------------------------------------------- at the start of a run


def kernel_tag(state_dir: Path) -> str:
    """The op part of its kernels' tag (`<this>.<tunebot pid>`): the same for every run of the op, so
    the next run finds what a killed one left."""
    return hashlib.sha256(str(Path(state_dir).resolve()).encode()).hexdigest()[:16]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# temporary index files of commit_files (and git's .lock beside them), write_atomic's temp files;
# run.lock / branches.lock are flock files, kept on purpose (an flock never goes stale)
_TEMP_INDEX = re.compile(r"^index\.(\d+)\.\d+(?:\.lock)?$|^\..+\.(\d+)\.tmp$")


def housekeeping(repo, state_dir: Path, branch_prefix: str, worktree: Path) -> list[str]:
    """Clean what a killed run of this op left behind (the caller holds the op's run lock)."""
    done: list[str] = []
    tag = kernel_tag(state_dir)
    killed = reaper.sweep_tagged(tag + ".")
    sandbox.use_kernel_tag(
        f"{tag}.{os.getpid()}"
    )  # per process: this run's watchdog spares a later run
    if killed:
        done.append(f"stopped {killed} kernel process(es) an earlier, killed run left running")
    root = repository.state_dir(repo)
    for entry in list(root.iterdir()) + list(
        Path(state_dir).iterdir() if Path(state_dir).is_dir() else []
    ):
        m = _TEMP_INDEX.match(entry.name)
        if m and entry.is_file() and not _pid_alive(int(m.group(1) or m.group(2))):
            entry.unlink(missing_ok=True)
            done.append(f"removed {entry.name} (temporary file of a killed run)")
    common = Path(repo.common_dir).resolve()
    now = time.time()
    candidates = list((common / "refs/heads" / branch_prefix).rglob("*.lock"))
    candidates += list((common / naming.TUNEBOT_REFS).rglob("*.lock"))
    for gitdir in (common / "worktrees").glob("*/gitdir"):
        try:
            target = Path(gitdir.read_text().strip()).parent.resolve()
        except OSError:
            continue
        if target == Path(worktree).resolve():
            candidates += list(gitdir.parent.glob("*.lock"))
    for lock in candidates:
        try:
            if now - lock.stat().st_mtime > STALE_LOCK_S:
                lock.unlink()
                done.append(f"removed stale git lock {lock.relative_to(common)}")
        except OSError:
            continue
    removed = reaper.sweep_temp()
    if removed:
        done.append(f"removed {len(removed)} temporary folder(s) of killed tunebot processes")
    return done


def superseded_baseline(repo, previous, op, request) -> str | None:
    """Why a recorded run whose baseline never passed L0 starts over at a new commit of the op
    (None: it resumes as recorded). An explicit --base pins the commit and is never overridden."""
    if previous.start is None or previous.baseline is not None or request.base_ref is not None:
        return None
    recorded = previous.start.base_sha
    head = repository.resolve(repo, "HEAD")
    if head == recorded:
        return None
    path = op.source.as_posix()
    old = repository.read_bytes(repo, recorded, path, missing_ok=True)
    new = repository.read_bytes(repo, head, path, missing_ok=True)
    if new is None or old == new:
        return None
    return (
        f"the baseline recorded at {recorded[:10]} never passed L0 or was never timed, and {path} "
        f"has a new commit at HEAD "
        f"{head[:10]}: starting over there (the old records are kept as results.<time>.jsonl)"
    )


def orphan_branches(repo, log: ResultsLog, previous, prefix: str, command: str) -> str | None:
    """Records without a start, or branches of a run whose records are gone.

    Branches without records are archived and the run starts over (returns why); records that lost
    their start record are the person's to decide about (StateProblem with the command).
    """
    if previous.start is not None:
        return None
    if log.path.exists() and log.read():
        raise StateProblem(
            f"{log.path} has records but not the run's start record (it was edited or replaced by hand); "
            f"nothing can be resumed from it. Start over, keeping it as results.<time>.jsonl: `{command} --restart`"
        )
    left = branches.owned_branches(repo, prefix + "/")
    if not left:
        return None
    return (
        f"the records of the earlier run ({log.path}) are gone, but its branches "
        f"{', '.join(left[:5])}{' ...' if len(left) > 5 else ''} remain: they are moved to "
        "refs/tunebot/archive/ (nothing is deleted) and the run starts over"
    )


def check_branches(repo, prefix: str, state) -> None:
    """Refuse to run while an iteration branch name is held by a branch that is not tunebot's."""
    recorded = {it.branch: it.sha for it in state.iterations}
    for name, sha in refs.list_refs(repo, f"refs/heads/{prefix}/").items():
        branch = name.removeprefix("refs/heads/")
        if not naming.ends_as_iteration(branch) or branches.is_owned(repo, branch):
            continue
        if recorded.get(branch) == sha:
            continue
        raise StateProblem(
            f"branch {branch} (at {sha[:10]}) is not tunebot's: it was created or moved by someone else, "
            f"and tunebot names its iteration branches that way. Keep it under another name: "
            f"`git branch -m {branch} {branch.replace('/', '-')}-mine`, then run tunebot again"
        )


def check_base_branch(repo, branch: str, what: str) -> None:
    """The branch a proposal will merge into must exist before anything is measured."""
    if refs.branch_sha(repo, branch) is not None:
        return
    remote = [r for r in refs.list_refs(repo, "refs/remotes/") if r.endswith("/" + branch)]
    if remote:
        return
    raise StateProblem(
        f"{what} {branch}: there is no branch {branch} in this repository, so no proposal "
        f"could be made into it. Create it first (`git branch {branch}`) or name an existing "
        "branch"
    )


def _tampered(result: LatencyResult, problem: str) -> LatencyResult:
    """A measurement voided because the measured code touched what it must not."""
    return LatencyResult(
        status="error",
        backend=result.backend,
        command=result.command,
        tail=result.tail,
        notes=[problem],
        extra={"tampered": True},
    )
