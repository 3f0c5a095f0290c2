"""The scheduled proposal: regenerate the features file, and when it changed, commit it on
one fixed branch and open (or update) one proposal through the Forge interface.

Nothing here touches the user's checkout: the commit is written with
commits.commit_files (a temporary index) on top of the base branch tip, and the
branch is tunebot's own. Running it twice changes nothing the second time.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from bot.errors import GitError
from bot.features import render
from bot.features.refresh import DEFAULT_OUTPUT, regenerate
from bot.forge.base import Forge, Proposal
from bot.git import branches, commits, refs, remotes, repository

BRANCH = "tunebot/refresh-features"
TITLE = "references: refresh mindiesd-features.md from the MindIE-SD docs"
LABELS = ["tunebot", "references"]


@dataclass
class ProposeResult:
    # "unchanged" (no commit, no proposal) | "proposed" (new commit) | "up-to-date" (branch already had it)
    # | "closed" (docs match the base again: the open proposal was closed)
    # | "declined" (a reviewer closed a proposal of this very table: not reopened)
    status: str
    commit: str | None
    proposal: Proposal | None
    diff: render.TableDiff
    warnings: list[str]


def _fetch_remote_branch(repo, remote: str) -> str | None:
    """The remote's tip of BRANCH (fetched into refs/remotes), or None when it has none."""
    return remotes.fetch_ref(
        repo, remote, f"refs/heads/{BRANCH}", f"refs/remotes/{remote}/{BRANCH}"
    )


def _parent(repo, sha: str) -> str | None:
    parents = repository.parents(repo, sha)
    return parents[0] if parents else None


_MARK = re.compile(r"<!-- tunebot-features-table: ([0-9a-f]{64}) -->")


def fingerprint(text: str) -> str:
    """The table's identity in a proposal body: its content without the sync-time line."""
    return hashlib.sha256(render.same_content_key(text).encode("utf-8")).hexdigest()


def body(
    result_diff: render.TableDiff,
    table_meta: dict[str, str],
    rows: int,
    warnings: list[str],
    mark: str = "",
) -> str:
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
    lines += [
        "",
        "Review the rows against the docs; merge to make the table the new reference for `tunebot advise`.",
    ]
    if mark:
        lines += ["", f"<!-- tunebot-features-table: {mark} -->"]
    return "\n".join(lines) + "\n"


def _declined(forge: Forge, mark: str) -> Proposal | None:
    """The latest proposal of this very table that a reviewer closed (not merged), if any."""
    closed = [p for p in forge.list_proposals("closed") if p.head == BRANCH and p.state == "closed"]
    closed.sort(key=lambda p: int(p.id) if str(p.id).isdigit() else 0)
    for proposal in reversed(closed):
        found = _MARK.search(proposal.body or "")
        if found:
            return proposal if found.group(1) == mark else None
    return None


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
    repo = repository.open_repo(repo_path)
    base = base or repository.current_branch(repo)
    if not base:
        raise GitError(
            "HEAD is detached: pass --base <branch> (the branch the proposal merges into)."
        )
    base_sha = repository.resolve(repo, base)
    previous = repository.read_file(repo, base_sha, output, missing_ok=True)
    result = regenerate(Path(docs_dir), previous, now)
    if not result.changed:
        stale = forge.find_proposal(BRANCH)
        if stale is not None:  # the docs match the base again: the open proposal is out of date
            return ProposeResult(
                "closed", None, forge.close(stale.id), result.diff, result.table.warnings
            )
        return ProposeResult("unchanged", None, None, result.diff, result.table.warnings)
    mark = fingerprint(result.text)
    if forge.find_proposal(BRANCH) is None:
        declined = _declined(forge, mark)
        if declined is not None:
            return ProposeResult("declined", None, declined, result.diff, result.table.warnings)
    tip = refs.branch_sha(repo, BRANCH)
    if remote:
        tip = _fetch_remote_branch(repo, remote) or tip
    status, commit = "proposed", None
    if tip is not None and _parent(repo, tip) == base_sha:
        on_branch = repository.read_file(repo, tip, output, missing_ok=True)
        if on_branch is not None and render.same_content(on_branch, result.text):
            status, commit = "up-to-date", tip  # same table already proposed: no new commit
    if commit is None:
        message = (
            f"references: refresh {Path(output).name} from the MindIE-SD docs\n\n"
            f"{render.summarize(result.diff)}\n"
        )
        commit = commits.commit_files(
            repo, base_sha, {output: result.text.encode("utf-8")}, message
        )
    branches.create_branch(repo, BRANCH, commit)  # ours: created, or moved onto the new commit
    if remote:
        remotes.push(repo, remote, [f"+refs/heads/{BRANCH}:refs/heads/{BRANCH}"])
    meta = {
        "source_commit": result.table.source_commit or "",
        "docs_version": result.table.docs_version or "",
    }
    text = body(result.diff, meta, len(result.table.rows), result.table.warnings, mark)
    proposal = forge.propose(head=BRANCH, base=base, title=TITLE, body=text, labels=list(LABELS))
    return ProposeResult(status, commit, proposal, result.diff, result.table.warnings)
