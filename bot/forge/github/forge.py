"""The GitHub forge (PyGithub): proposals are pull requests, status is one sticky comment.

One `GithubForge` is built per event from a `GithubClient` and `ForgeSettings`; each op's run
gets its own with `for_run(...)`, sharing the client (the repository is read once).
Comments and statuses are in `comments`, the merge gate in `gate`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from github.PullRequest import PullRequest

from bot.errors import TunebotError
from bot.forge.base import Proposal
from bot.forge.github.client import GithubClient, GithubError
from bot.forge.github.comments import CANCEL_MARKER, Comments, status_marker
from bot.forge.github.gate import STALE_LABEL, MergeGate
from bot.forge.github.settings import ForgeSettings, RunScope
from bot.forge.github.types import PullInfo

if TYPE_CHECKING:
    from bot.remote_runs import RemoteRuns


class GithubForge:
    """The Forge protocol on GitHub for one run scope (an op on a pull request, or the repository)."""

    def __init__(
        self,
        client: GithubClient,
        settings: ForgeSettings | None = None,
        scope: RunScope | None = None,
    ) -> None:
        self.client = client
        self.settings = settings or ForgeSettings()
        self.scope = scope or RunScope()
        self.comments = Comments(client, self.settings.bot_login, self.settings.run_url)
        self.gate = MergeGate(client, self.settings)
        self.last_status: str | None = None
        self.status_aliases: tuple[str, ...] = ()  # markers of the same op under another name
        self.warnings: list[
            str
        ] = []  # what went wrong after delivery (reviewers, labels): never fatal
        self.cancelled = False  # a `/tune cancel` was seen (it stays seen)

    def for_run(
        self,
        op: str | None = None,
        *,
        pr_number: int | None = None,
        guard_sha: str | None = None,
        base_sha: str | None = None,
        remote_runs: RemoteRuns | None = None,
    ) -> GithubForge:
        """The forge of one op's run: same client and settings, its own comments and warnings."""
        scope = RunScope(op, pr_number, guard_sha, base_sha, remote_runs)
        return GithubForge(self.client, self.settings, scope)

    # -- what the flow reads ----------------------------------------------------
    @property
    def repo(self) -> Any:
        return self.client.repo

    @property
    def op(self) -> str | None:
        return self.scope.op

    @property
    def pr_number(self) -> int | None:
        return self.scope.pr_number

    @property
    def branch_prefix(self) -> str:
        return self.settings.branch_prefix

    @property
    def run_url(self) -> str | None:
        return self.settings.run_url

    def branch_url(self, name: str) -> str | None:
        """Web link to a branch, for the proposal body's iteration table (the repository's own html_url)."""
        base = getattr(self.repo, "html_url", None)
        return f"{base}/tree/{quote(name, safe='/')}" if base else None

    def permission(self, login: str) -> str:
        """The user's role (authorize() asks the forge: see events.PermissionSource)."""
        return self.gate.permission(login)

    def pull_info(self, number: int) -> PullInfo:
        def step() -> PullInfo:
            pr = self.repo.get_pull(number)
            head_repo = pr.head.repo.full_name if pr.head.repo is not None else None
            return PullInfo(
                pr.number,
                pr.state,
                pr.head.sha,
                pr.head.ref,
                head_repo,
                pr.base.ref,
                pr.base.repo.full_name,
                pr.user.login,
                bool(pr.merged),
            )

        return self.client.call(f"read pull request #{number}", step)

    # -- the Forge protocol -----------------------------------------------------
    def _proposal(self, pr: PullRequest) -> Proposal:
        state = "merged" if pr.merged else pr.state
        return Proposal(
            id=str(pr.number),
            title=pr.title,
            body=pr.body or "",
            head=pr.head.ref,
            base=pr.base.ref,
            head_sha=pr.head.sha,
            state=state,
            url=pr.html_url,
            labels=[label.name for label in pr.labels],
            approved_sha=self.gate.approved_sha(pr.number, pr.head.sha)
            if state == "open"
            else None,
        )

    def _read(self, proposal_id: str | int) -> PullRequest:
        return self.client.call(
            f"read pull request #{proposal_id}", lambda: self.repo.get_pull(int(proposal_id))
        )

    def _open_from(self, head: str) -> PullRequest | None:
        for pr in self.repo.get_pulls(state="open", head=f"{self.client.owner}:{head}"):
            return pr
        return None

    def find_proposal(self, head: str) -> Proposal | None:
        pr = self.client.call(
            f"look for the pull request from {head}", lambda: self._open_from(head)
        )
        return self._proposal(pr) if pr is not None else None

    def propose(
        self, head: str, base: str, title: str, body: str, labels: list[str] | None = None
    ) -> Proposal:
        if self.scope.remote_runs is not None:
            self.scope.remote_runs.push_branches(head, self.scope.push_base)
        stale = self.head_moved()
        if stale:
            title = f"[stale] {title}"
            body = self.stale_notice(stale) + "\n\n" + body
        body = body.rstrip() + "\n\n" + self.footer()

        def step() -> tuple[PullRequest, bool]:
            found = self._open_from(head)
            if found is not None:
                found.edit(title=title, body=body)
                return found, False
            created = self.repo.create_pull(
                base=base, head=head, title=title, body=body, draft=bool(stale)
            )
            return created, True

        pr, created = self.client.call(f"open the pull request from {head}", step)
        wanted = list(
            dict.fromkeys(
                [*self.settings.github.labels, *(labels or []), *([STALE_LABEL] if stale else [])]
            )
        )
        # The pull request exists from here on: labels and reviewers are extras whose failure is
        # reported with the delivery, never turned into a failed run.
        if wanted:
            try:
                self.add_labels(pr.number, wanted)
            except GithubError as exc:
                self.warnings.append(f"labels not set: {exc}")
        if created:
            self._request_reviewers(pr)
        return self._proposal(self._read(pr.number))

    def _request_reviewers(self, pr: PullRequest) -> None:
        author = pr.user.login.lower()
        reviewers = [r for r in self.gate.reviewers(self.op) if r.lower() != author]
        if not reviewers:
            return
        try:
            self.client.call(
                "request reviewers", lambda: pr.create_review_request(reviewers=reviewers)
            )
        except GithubError as exc:
            who = ", ".join("@" + r for r in reviewers)
            self.warnings.append(f"reviewers {who} not requested: {exc}")

    def add_labels(self, number: int, labels: list[str]) -> None:
        # The object form: the spec no longer lists the bare array PyGithub's add_to_labels sends.
        self.client.call(
            "label the pull request",
            lambda: self.client.api("POST", f"/issues/{number}/labels", input={"labels": labels}),
        )

    def list_proposals(self, state: str | None = "open") -> list[Proposal]:
        wanted = state or "all"
        api_state = "closed" if wanted == "merged" else wanted
        prs = self.client.call(
            "list pull requests", lambda: list(self.repo.get_pulls(state=api_state))
        )
        prefix = self.branch_prefix + "/"
        out = [self._proposal(pr) for pr in prs if pr.head.ref.startswith(prefix)]
        return [p for p in out if wanted in ("all", "open", "closed") or p.state == wanted]

    def close(self, proposal_id: str) -> Proposal:
        """Close an open pull request without merging (its branch stays)."""

        def step() -> PullRequest:
            self.repo.get_pull(int(proposal_id)).edit(state="closed")
            return self.repo.get_pull(int(proposal_id))

        return self._proposal(self.client.call(f"close pull request #{proposal_id}", step))

    def get(self, proposal_id: str) -> Proposal:
        return self._proposal(self._read(proposal_id))

    def approve(self, proposal_id: str, reviewer: str) -> Proposal:
        """Submit an approving review as the token's user on the current head SHA."""
        pr = self._read(proposal_id)
        review = {"commit_id": pr.head.sha, "event": "APPROVE", "body": f"Approved for {reviewer}"}
        self.client.call(
            "approve",
            lambda: self.client.api("POST", f"/pulls/{pr.number}/reviews", input=review),
        )
        return self.get(proposal_id)

    def merge(self, proposal_id: str) -> Proposal:
        """Merge only through the gate (MergeBlocked names every gate that does not hold)."""
        self.gate.merge(int(proposal_id))
        return self.get(proposal_id)

    def post_status(self, text: str) -> None:
        """Create or edit this op's one status comment on the pull request."""
        self.last_status = text
        if self.pr_number is None or self.op is None:
            return
        self.comments.upsert(
            self.pr_number, status_marker(self.op), text, aliases=self.status_aliases
        )

    def cancel_requested(self) -> bool:
        """A `/tune cancel` marked this op's status comment (or the one under the name as typed).

        Asked by the loop before each iteration; once seen it stays seen. A failed read counts as
        no cancel (asked again next time).
        """
        if self.cancelled:
            return True
        if self.pr_number is None or self.op is None:
            return False
        markers = (status_marker(self.op), *self.status_aliases)
        try:
            body = self.comments.find_any(self.pr_number, markers)
        except TunebotError:
            return False
        self.cancelled = bool(body and CANCEL_MARKER in body)
        return self.cancelled

    # -- the stale guard --------------------------------------------------------
    def head_moved(self) -> str | None:
        """The PR's current head when it moved away from the authorized SHA, else None."""
        guard = self.scope.guard_sha
        if self.pr_number is None or guard is None:
            return None
        current = self.pull_info(self.pr_number).head_sha
        return current if current != guard else None

    def stale_notice(self, current: str) -> str:
        guard = (self.scope.guard_sha or "")[:10]
        return (
            f"> [!WARNING]\n> **Stale results.** Pull request #{self.pr_number} moved from `{guard}` "
            f"to `{current[:10]}` during the run; these measurements are for `{guard}`. "
            "Nothing will be merged: comment `/tune <op>` again to tune the new head."
        )

    def mark_stale(self, proposal_id: str, moved: str) -> None:
        """The proposal already exists: say it is stale in its body and label it, so the gate refuses it."""
        number = int(proposal_id)
        notice = self.stale_notice(moved)

        def step() -> None:
            pr = self.repo.get_pull(number)
            if "Stale results" not in (pr.body or ""):
                pr.edit(body=f"{notice}\n\n{pr.body or ''}")

        self.client.call(f"mark #{number} stale", step)
        self.add_labels(number, [STALE_LABEL])

    def footer(self) -> str:
        lines = ["---"]
        guard = self.scope.guard_sha
        if self.pr_number is not None and guard:
            lines.append(f"Tuned for #{self.pr_number} at `{guard[:10]}`.")
            # The merge gate compares this with the original PR's head: results of an older head never merge.
            lines.append(f"<!-- tunebot:pinned:{guard} -->")
        lines.append(
            "Approve this pull request to merge it (tunebot merges an approved, green, mergeable head)."
        )
        if self.op:
            lines.append(
                "Commands on the original pull request: `/tune <op>` · `/tune status` · `/tune cancel` · `/tune help`"
            )
        if self.run_url:
            lines.append(f"Run: {self.run_url}")
        return "\n".join(lines)
