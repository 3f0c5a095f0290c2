"""The merge gate: who may approve, what must hold before tunebot merges, and who reviews.

A proposal merges only with an approval on its current head SHA by a user with enough
permission, no changes requested, green checks, a bot branch of this repository tuned on the
base's current head, and GitHub saying it is mergeable; the merge names that exact SHA.
Reviewers come from `github.reviewers`, else from CODEOWNERS (users only).
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from github import GithubException
from github.PullRequest import PullRequest

from bot import naming
from bot.forge.base import MergeBlocked
from bot.forge.github.client import GithubClient, GithubError, explain
from bot.forge.github.settings import ForgeSettings
from bot.forge.github.types import ROLE_RANK, role_allows

STALE_LABEL = "tunebot-stale"
PINNED_MARKER = re.compile(r"<!-- tunebot:pinned:([0-9a-f]{40}) -->")
RUN_ID = re.compile(r"/actions/runs/(\d+)(?:/|$)")
NO_CI = (
    "no CI ran on the proposal head `{sha}` (pushes made with GITHUB_TOKEN start no workflows): push with a "
    "GitHub App token or set `github.required_checks`, or opt in with `github.allow_no_checks: true`"
)
CODEOWNERS_FILES = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")


class MergeGate:
    """The gate of one repository (settings from .tunebot.yml's `github:` section)."""

    def __init__(self, client: GithubClient, settings: ForgeSettings) -> None:
        self.client, self.settings = client, settings

    # -- who ---------------------------------------------------------------------
    def permission(self, login: str) -> str:
        """The user's role: admin | maintain | write | triage | read | none."""

        def step() -> str:
            try:
                data = self.client.api("GET", f"/collaborators/{login}/permission")
            except GithubException as exc:
                if exc.status == 404:
                    return "none"
                raise
            role = data.get("role_name") or ""
            return role if role in ROLE_RANK else str(data.get("permission") or "none")

        return self.client.call(f"read the permission of {login}", step)

    def reviewers(self, op: str | None) -> list[str]:
        """Reviewers from config, else the CODEOWNERS owners of the op's files (users only)."""
        if self.settings.github.reviewers:
            return list(self.settings.github.reviewers)
        checkout = self.settings.checkout
        if checkout is None:
            return []
        for rel in CODEOWNERS_FILES:
            path = checkout / rel
            if path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                return codeowners_for(text, self._op_paths(op))
        return []

    def _op_paths(self, op: str | None) -> list[str]:
        checkout = self.settings.checkout
        if not op or checkout is None:
            return []
        project, _, name = op.rpartition("/")
        candidates = sorted(checkout.glob(f"*/{project or '*'}/{name}"))
        return [p.relative_to(checkout).as_posix() + "/" for p in candidates] or [name + "/"]

    def approved_sha(self, number: int, head_sha: str) -> str | None:
        approvals, _ = self._review_summary(number)
        return head_sha if head_sha in approvals.values() else next(iter(approvals.values()), None)

    def _review_summary(self, number: int) -> tuple[dict[str, str], list[str]]:
        """Latest review per user: {login: sha} of approvals by permitted users, and who requested changes."""
        reviews = self.client.call(
            f"read the reviews of #{number}",
            lambda: list(self.client.repo.get_pull(number).get_reviews()),
        )
        latest: dict[str, tuple[str, str]] = {}
        for review in reviews:
            state = (review.state or "").upper()  # REST: APPROVED; tolerate lower-case spellings
            if state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED") and review.user is not None:
                latest[review.user.login] = (state, review.commit_id)
        approvals = {u: sha for u, (s, sha) in latest.items() if s == "APPROVED"}
        minimum = self.settings.github.min_permission
        approvals = {
            u: sha for u, sha in approvals.items() if role_allows(self.permission(u), minimum)
        }
        changes = [u for u, (s, _) in latest.items() if s == "CHANGES_REQUESTED"]
        return approvals, changes

    # -- checks ------------------------------------------------------------------
    def checks(self, sha: str, ignore_contexts: tuple[str, ...] = ()) -> list[str]:
        """Problems with the checks of `sha` (empty: green).

        Skipped: tunebot's own statuses and the check run of the job running this gate (it is in
        progress until the gate ends). No checks at all is a problem unless `allow_no_checks`.
        """

        def step() -> list[str]:
            results: dict[str, str | None] = {}  # name -> problem (None: green)
            for status in self.client.paged(f"/commits/{sha}/status", "statuses"):
                context = status["context"]
                if context in ignore_contexts or context.split("/")[0] == "tunebot":
                    continue
                results[context] = (
                    None
                    if status["state"] == "success"
                    else f"status `{context}` is {status['state']}"
                )
            for run in self.client.paged(f"/commits/{sha}/check-runs", "check_runs"):
                if self._is_own_run(run):
                    continue
                results[run["name"]] = _run_problem(run)
            return self._check_problems(sha, results)

        return self.client.call(f"read the checks of {sha[:10]}", step)

    def _check_problems(self, sha: str, results: dict[str, str | None]) -> list[str]:
        problems = [p for p in results.values() if p]
        required = self.settings.github.required_checks
        problems += [
            f"required check `{name}` did not run on `{sha[:10]}`"
            for name in required
            if name not in results
        ]
        if not results and not required and not self.settings.github.allow_no_checks:
            problems.append(NO_CI.format(sha=sha[:10]))
        return problems

    def _is_own_run(self, run: dict[str, Any]) -> bool:
        """The check run of the workflow run executing this code (matched by run id, else by job name)."""
        own_id = RUN_ID.search(self.settings.run_url or "")
        if own_id:
            for url in (run.get("details_url"), run.get("html_url")):
                found = RUN_ID.search(url or "")
                if found and found.group(1) == own_id.group(1):
                    return True
        return run["name"] in self.settings.own_checks and run["status"] != "completed"

    # -- the gate ----------------------------------------------------------------
    def missing(self, number: int) -> tuple[list[str], PullRequest]:
        """Missing gates of pull request `number` (empty: may merge) and the PR object."""
        pr = self.client.call(
            f"read pull request #{number}", lambda: self.client.repo.get_pull(number)
        )
        if pr.merged or pr.state != "open":
            return [f"#{number} is {'already merged' if pr.merged else pr.state}"], pr
        missing: list[str] = self._origin_problems(pr)
        head = pr.head.sha
        if STALE_LABEL in [label.name for label in pr.labels]:
            missing.append(
                f"its results are stale (label `{STALE_LABEL}`): re-run `/tune` on the new head"
            )
        approvals, changes = self._review_summary(number)
        if not any(sha == head for sha in approvals.values()):
            old = [f"@{u} on `{sha[:10]}`" for u, sha in approvals.items()]
            detail = (
                f" (approvals on older commits: {', '.join(old)}; re-approve the current head)"
                if old
                else ""
            )
            missing.append(
                f"no approval on the current head `{head[:10]}` by a user with "
                f"`{self.settings.github.min_permission}` permission{detail}"
            )
        if changes:
            missing.append("changes requested by " + ", ".join(f"@{u}" for u in changes))
        missing += self.checks(head)
        mergeable = pr.mergeable
        if mergeable is None:  # GitHub computes it in the background: ask once more
            self.client.sleep(min(2.0, self.client.retry.max_wait_s))
            pr = self.client.call(
                f"read pull request #{number}", lambda: self.client.repo.get_pull(number)
            )
            mergeable = pr.mergeable
        if mergeable is False:
            missing.append("it is not mergeable (conflicts with the base branch)")
        elif mergeable is None:
            missing.append(
                "GitHub has not computed mergeability yet; approve again or re-run the review workflow"
            )
        return missing, pr

    def _origin_problems(self, pr: PullRequest) -> list[str]:
        """A proposal comes from a bot branch of this repository, tuned on the base's current head."""
        problems = []
        prefix = self.settings.branch_prefix
        head_repo = pr.head.repo.full_name if pr.head.repo is not None else None
        if head_repo != pr.base.repo.full_name:
            problems.append(
                f"its head is in a fork ({head_repo or 'a deleted fork'}), "
                f"not a tunebot branch of {pr.base.repo.full_name}"
            )
        if not pr.head.ref.startswith(prefix + "/"):
            problems.append(f"its head branch `{pr.head.ref}` does not start with `{prefix}/`")
        pinned = PINNED_MARKER.search(pr.body or "")
        if pinned:
            current = self._branch_sha(pr.base.ref)
            if current != pinned.group(1):
                problems.append(
                    f"base moved: `{pr.base.ref}` is at `{(current or 'deleted')[:10]}`, the results are for "
                    f"`{pinned.group(1)[:10]}`; re-run `/tune` on the original pull request"
                )
        return problems

    def _branch_sha(self, branch: str) -> str | None:
        refs = self.client.call(
            f"read branch {branch}",
            lambda: self.client.api("GET", f"/git/matching-refs/heads/{branch}"),
        )
        return next((r["object"]["sha"] for r in refs if r["ref"] == f"refs/heads/{branch}"), None)

    def merge(self, number: int) -> None:
        """Merge only if every gate holds, at exactly the head SHA checked; then delete iteration branches."""
        missing, pr = self.missing(number)
        if missing:
            raise MergeBlocked.gates(number, missing)
        head = pr.head.sha
        try:
            pr.merge(
                sha=head,
                merge_method="merge",
                commit_title=f"tunebot: merge #{number} ({pr.head.ref})",
            )
        except GithubException as exc:
            if exc.status in (405, 409):
                said = exc.data.get("message") if isinstance(exc.data, dict) else exc.data
                refused = f"GitHub refused the merge at `{head[:10]}`: {said}"
                raise MergeBlocked.gates(number, [refused]) from None
            raise GithubError(explain(f"merge #{number}", exc)) from None
        self.delete_iteration_branches(pr.head.ref)

    def delete_iteration_branches(self, delivery_branch: str) -> list[str]:
        """Delete the run's `<prefix>/<op>/v<N>` branches (only names the bot gives; never others)."""
        if not delivery_branch.startswith(self.settings.branch_prefix + "/"):
            return []
        run_prefix = naming.run_of_delivery(delivery_branch)
        refs = self.client.call(
            "list iteration branches",
            lambda: list(
                self.client.repo.get_git_matching_refs(
                    f"heads/{naming.iteration_prefix(run_prefix)}"
                )
            ),
        )
        deleted = []
        for ref in refs:
            name = ref.ref.removeprefix("refs/heads/")
            if naming.is_iteration_of(name, run_prefix):
                self.client.call(
                    f"delete {name}",
                    lambda name=name: self.client.api("DELETE", f"/git/refs/heads/{name}"),  # type: ignore[misc]
                )
                deleted.append(name)
        return deleted


def _run_problem(run: dict[str, Any]) -> str | None:
    if run["status"] != "completed":
        return f"check `{run['name']}` is {run['status']}"
    if run["conclusion"] not in ("success", "neutral", "skipped"):
        return f"check `{run['name']}` concluded {run['conclusion']}"
    return None


def codeowners_for(text: str, paths: list[str]) -> list[str]:
    """Owners (users, without @) of the last CODEOWNERS rule matching any of `paths`; teams are skipped."""
    rules: list[tuple[str, list[str]]] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        pattern, *owners = line.split()
        rules.append((pattern, owners))
    found: list[str] = []
    for path in paths:
        last: list[str] = []
        for pattern, who in rules:
            if _codeowners_match(pattern, path):
                last = who
        found += [o[1:] for o in last if o.startswith("@") and "/" not in o]
    return list(dict.fromkeys(found))


def _codeowners_match(pattern: str, path: str) -> bool:
    anchored = pattern.startswith("/")
    pat = pattern.lstrip("/")
    if pat.endswith("/"):
        pat += "**"
    if pat == "*":
        return True
    candidates = (
        [path]
        if anchored or "/" in pat.rstrip("*")
        else [path] + [path.split("/", i)[-1] for i in range(1, path.count("/") + 1)]
    )
    for cand in candidates:
        if (
            fnmatch.fnmatch(cand, pat)
            or fnmatch.fnmatch(cand, pat + "/**")
            or (cand.startswith(pat.rstrip("*")) and pat.endswith("**"))
        ):
            return True
    return False
