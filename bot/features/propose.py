"""The scheduled proposal: regenerate the features file, and when it changed, commit it on
one fixed branch and open (or update) one proposal through the Forge interface.

Nothing here touches the user's checkout: the commit is written with
gitops.commit_files (a temporary index) on top of the base branch tip, and the
branch is tunebot's own. Running it twice changes nothing the second time.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from bot import gitops
from bot.errors import GitError
from bot.features import render
from bot.features.refresh import DEFAULT_OUTPUT, regenerate
from bot.forge.base import Forge, Proposal

BRANCH = "tunebot/refresh-features"
TITLE = "references: refresh mindiesd-features.md from the MindIE-SD docs"
LABELS = ["tunebot", "references"]


@dataclass
class ProposeResult:
    status: str  # "unchanged" (no commit, no proposal) | "proposed" (new commit) | "up-to-date" (branch already had it)
    commit: str | None
    proposal: Proposal | None
    diff: render.TableDiff
    warnings: list[str]


def _fetch_remote_branch(repo_dir: Path, remote: str) -> str | None:
    """The remote's tip of BRANCH (fetched into refs/remotes), or None when it has none."""
    ref = f"refs/remotes/{remote}/{BRANCH}"
    proc = subprocess.run(["git", "fetch", "-q", remote, f"+refs/heads/{BRANCH}:{ref}"], cwd=repo_dir,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    out = subprocess.run(["git", "rev-parse", "--verify", "-q", ref], cwd=repo_dir, capture_output=True, text=True)
    return out.stdout.strip() or None


def _parent(repo, sha: str) -> str | None:
    parents = repo.commit(sha).parents
    return parents[0].hexsha if parents else None


def body(result_diff: render.TableDiff, table_meta: dict[str, str], rows: int, warnings: list[str]) -> str:
    lines = [
        "tunebot regenerated `references/mindiesd-features.md` from the MindIE-SD feature docs.",
        "",
        f"- 来源提交: {table_meta.get('source_commit') or '未声明'}",
        f"- 文档版本: {table_meta.get('docs_version') or '未声明'}",
        f"- 行数: {rows}",
        "",
        "## 变化",
        "",
        render.summarize(result_diff),
    ]
    if warnings:
        lines += ["", "## 警告", ""] + [f"- {w}" for w in warnings]
    lines += ["", "Review the rows against the docs; merge to make the table the new reference for `tunebot advise`."]
    return "\n".join(lines) + "\n"


def propose_refresh(
    repo_path: Path,
    docs_dir: Path,
    forge: Forge,
    base: str | None = None,
    output: str = DEFAULT_OUTPUT,
    remote: str | None = None,
    now: str | None = None,
) -> ProposeResult:
    """Regenerate `output` against the base branch; commit + propose only when it changed."""
    repo = gitops.open_repo(repo_path)
    base = base or gitops.current_branch(repo)
    if not base:
        raise GitError("HEAD is detached: pass --base <branch> (the branch the proposal merges into).")
    base_sha = gitops.resolve(repo, base)
    previous = gitops.read_file(repo, base_sha, output, missing_ok=True)
    result = regenerate(Path(docs_dir), previous, now)
    if not result.changed:
        return ProposeResult("unchanged", None, None, result.diff, result.table.warnings)
    tip = gitops.branch_sha(repo, BRANCH)
    if remote:
        tip = _fetch_remote_branch(Path(repo.working_tree_dir or repo.git_dir), remote) or tip
    status, commit = "proposed", None
    if tip is not None and _parent(repo, tip) == base_sha:
        on_branch = gitops.read_file(repo, tip, output, missing_ok=True)
        if on_branch is not None and render.same_content(on_branch, result.text):
            status, commit = "up-to-date", tip  # same table already proposed: no new commit
    if commit is None:
        message = f"references: refresh {Path(output).name} from the MindIE-SD docs\n\n{render.summarize(result.diff)}\n"
        commit = gitops.commit_files(repo, base_sha, {output: result.text.encode("utf-8")}, message)
    gitops.create_branch(repo, BRANCH, commit)  # ours: created, or moved onto the new commit
    if remote:
        gitops.push(repo, remote, [f"+refs/heads/{BRANCH}:refs/heads/{BRANCH}"])
    meta = {"source_commit": result.table.source_commit or "", "docs_version": result.table.docs_version or ""}
    text = body(result.diff, meta, len(result.table.rows), result.table.warnings)
    proposal = forge.propose(head=BRANCH, base=base, title=TITLE, body=text, labels=list(LABELS))
    return ProposeResult(status, commit, proposal, result.diff, result.table.warnings)
