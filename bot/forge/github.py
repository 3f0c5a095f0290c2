"""The GitHub forge (PyGithub): proposals are pull requests, status is one sticky comment.

- Built from the same variables as GitHub Actions (`GITHUB_API_URL`, `GITHUB_REPOSITORY`,
  `GITHUB_TOKEN`), so github.com, GitHub Enterprise Server and a local fake all work.
- PyGithub's own retry and throttling are off (`retry=None`, `seconds_between_*=None`): the
  forge retries whole idempotent steps itself, bounded, honouring Retry-After and
  x-ratelimit-reset (capped), so a retried write never duplicates a PR or comment.
- The merge gate: an approval on the current head SHA by a user with enough permission, no
  changes requested, checks green, mergeable; then merge with `sha=<head>`.
"""

from __future__ import annotations

import fnmatch
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import quote

import requests
from github import Auth, Github, GithubException

from bot import naming
from bot.config.schema import GithubSettings
from bot.errors import TunebotError
from bot.events import ROLE_RANK, PullInfo, role_allows
from bot.forge.base import Proposal

if TYPE_CHECKING:
    from bot.remote_runs import RemoteRuns

T = TypeVar("T")
STALE_LABEL = "tunebot-stale"
RETRYABLE_5XX = {500, 502, 503, 504}
DEFAULT_BOT_LOGIN = (
    "github-actions[bot]"  # who GITHUB_TOKEN comments as; an App token: "<app-slug>[bot]"
)
PINNED_MARKER = re.compile(r"<!-- tunebot:pinned:([0-9a-f]{40}) -->")
RUN_ID = re.compile(r"/actions/runs/(\d+)(?:/|$)")
NO_CI = (
    "no CI ran on the proposal head `{sha}` (pushes made with GITHUB_TOKEN start no workflows): push with a "
    "GitHub App token or set `github.required_checks`, or opt in with `github.allow_no_checks: true`"
)


class GithubError(TunebotError):
    """The GitHub API refused or kept failing; the message says which call and what to do."""


class GithubSetupError(GithubError):
    """The environment lacks what the GitHub flow needs (token, repository): bad input."""

    exit_code = 2


class GateRefused(TunebotError):
    """The merge gate is not satisfied; `missing` names each gate."""

    exit_code = 3

    def __init__(self, number: int, missing: list[str]) -> None:
        self.number, self.missing = number, missing
        super().__init__(f"not merging #{number}: " + "; ".join(missing))


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4  # total tries of one step
    backoff_s: float = 1.0  # first wait for a 5xx; doubles
    max_wait_s: float = 60.0  # cap on any single wait (Retry-After or rate-limit reset)


def status_marker(op: str) -> str:
    return f"<!-- tunebot:status:{op} -->"


def reply_marker(comment_id: int | str, index: int = 0) -> str:
    return (
        f"<!-- tunebot:reply:{comment_id} -->"
        if index == 0
        else f"<!-- tunebot:reply:{comment_id}:{index} -->"
    )


def client_from_env(env: dict[str, str] | None = None) -> tuple[Github, str]:
    """A PyGithub client and `owner/name` from the GitHub Actions environment."""
    env = dict(os.environ if env is None else env)
    token = env.get("GITHUB_TOKEN") or env.get("GH_TOKEN")
    repo = env.get("GITHUB_REPOSITORY", "")
    if not token:
        raise GithubSetupError(
            "GITHUB_TOKEN is not set: pass the workflow's token (or a GitHub App installation token) in env"
        )
    if "/" not in repo:
        raise GithubSetupError(
            "GITHUB_REPOSITORY is not set to owner/name (GitHub Actions sets it)"
        )
    return make_client(token, env.get("GITHUB_API_URL") or "https://api.github.com"), repo


def make_client(token: str, base_url: str) -> Github:
    return Github(
        auth=Auth.Token(token),
        base_url=base_url.rstrip("/"),
        retry=None,
        seconds_between_requests=None,
        seconds_between_writes=None,
    )


def _wait_for(
    exc: GithubException, attempt: int, policy: RetryPolicy, now: Callable[[], float]
) -> float | None:
    """Seconds to wait before retrying after `exc`, or None when it must not be retried."""
    headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
    limited = exc.status == 429 or (
        exc.status == 403
        and (headers.get("x-ratelimit-remaining") == "0" or "retry-after" in headers)
    )
    if limited:
        if "retry-after" in headers and str(headers["retry-after"]).isdigit():
            wait = float(headers["retry-after"])
        elif str(headers.get("x-ratelimit-reset", "")).isdigit():
            wait = max(0.0, float(headers["x-ratelimit-reset"]) - now()) + 1
        else:
            wait = 60.0  # GitHub's advice for secondary limits without headers
        return min(wait, policy.max_wait_s)
    if exc.status in RETRYABLE_5XX:
        return min(policy.backoff_s * 2**attempt, policy.max_wait_s)
    return None


class GithubForge:
    """Forge protocol on GitHub, plus the helpers the GitHub flow needs."""

    def __init__(
        self,
        gh: Github,
        repo: str,
        *,
        settings: GithubSettings | None = None,
        op: str | None = None,
        pr_number: int | None = None,
        guard_sha: str | None = None,
        checkout: Path | None = None,
        branch_prefix: str = "tunebot",
        run_url: str | None = None,
        bot_login: str = DEFAULT_BOT_LOGIN,
        own_checks: tuple[str, ...] = (),
        remote_runs: RemoteRuns | None = None,
        base_sha: str | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.gh, self.repo_name = gh, repo
        self.settings = settings or GithubSettings()
        self.op, self.pr_number, self.guard_sha = op, pr_number, guard_sha
        self.checkout, self.branch_prefix, self.run_url = checkout, branch_prefix, run_url
        self.retry, self.sleep, self.now = retry or RetryPolicy(), sleep, now
        self.waits: list[float] = []  # every back-off taken (tests and logs)
        self.last_status: str | None = None
        self.status_aliases: tuple[str, ...] = ()  # markers of the same op under another name
        self.bot_login = (
            bot_login  # only comments by this login are the bot's (never trust a marker alone)
        )
        self.own_checks = (
            own_checks  # check names of the running job: in progress while it runs, never waited on
        )
        self.remote_runs = (
            remote_runs  # set: propose() pushes the run's branches through it (isolated git)
        )
        self.base_sha = base_sha or guard_sha  # what every pushed commit must descend from
        self.warnings: list[
            str
        ] = []  # what went wrong after delivery (reviewers, labels): said, never fatal
        self._comment_ids: dict[str, int] = {}  # marker -> id of the bot's comment holding it
        self._comment_bodies: dict[int, str] = {}  # id -> the body as last written or read
        self._repo = None

    # -- plumbing --------------------------------------------------------------
    def call(self, what: str, step: Callable[[], T]) -> T:
        """Run one idempotent step, retrying 5xx and rate limits (bounded, capped waits)."""
        for attempt in range(self.retry.attempts):
            try:
                return step()
            except GithubException as exc:
                wait = _wait_for(exc, attempt, self.retry, self.now)
                if wait is None or attempt == self.retry.attempts - 1:
                    raise GithubError(self._explain(what, exc)) from None
            except requests.exceptions.RequestException as exc:  # connection reset, timeout
                if attempt == self.retry.attempts - 1:
                    raise GithubError(
                        f"GitHub API: {what} failed: cannot reach {self.gh.requester.base_url} ({exc})"
                    ) from None
                wait = min(self.retry.backoff_s * 2**attempt, self.retry.max_wait_s)
            self.waits.append(wait)
            self.sleep(wait)
        raise AssertionError("unreachable")

    @staticmethod
    def _explain(what: str, exc: GithubException) -> str:
        message = exc.data.get("message") if isinstance(exc.data, dict) else exc.data
        hint = {
            401: "the token is invalid or expired",
            403: "the token lacks a permission (see docs/github.md) or the rate limit was hit",
            404: "not found, or the token cannot see it",
            422: "GitHub rejected the request",
        }.get(exc.status, "GitHub kept failing; try again later")
        return f"GitHub API: {what} failed with {exc.status} ({message}): {hint}"

    @property
    def repo(self):
        if self._repo is None:
            self._repo = self.call("read the repository", lambda: self.gh.get_repo(self.repo_name))
        return self._repo

    def branch_url(self, name: str) -> str | None:
        """Web link to a branch, for the proposal body's iteration table (the repository's own html_url)."""
        base = getattr(self.repo, "html_url", None)
        return f"{base}/tree/{quote(name, safe='/')}" if base else None

    @property
    def owner(self) -> str:
        return self.repo_name.split("/", 1)[0]

    def _api(self, verb: str, path: str, **kwargs: object) -> object:
        _, data = self.gh.requester.requestJsonAndCheck(verb, f"{self.repo.url}{path}", **kwargs)
        return data

    # -- pull requests ---------------------------------------------------------
    def _proposal(self, pr) -> Proposal:
        labels = [label.name for label in pr.labels]
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
            labels=labels,
            approved_sha=self._approved_sha(pr.number, pr.head.sha) if state == "open" else None,
        )

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

        return self.call(f"read pull request #{number}", step)

    def find_proposal(self, head: str) -> Proposal | None:
        def step():
            for pr in self.repo.get_pulls(state="open", head=f"{self.owner}:{head}"):
                return pr
            return None

        pr = self.call(f"look for the pull request from {head}", step)
        return self._proposal(pr) if pr is not None else None

    def propose(
        self, head: str, base: str, title: str, body: str, labels: list[str] | None = None
    ) -> Proposal:
        if self.remote_runs is not None:
            self.remote_runs.push_branches(head, self.base_sha)
        stale = self.head_moved()
        if stale:
            title = f"[stale] {title}"
            body = self.stale_notice(stale) + "\n\n" + body
        body = body.rstrip() + "\n\n" + self.footer()

        def step():
            for pr in self.repo.get_pulls(state="open", head=f"{self.owner}:{head}"):
                pr.edit(title=title, body=body)
                return pr, False
            return self.repo.create_pull(
                base=base, head=head, title=title, body=body, draft=bool(stale)
            ), True

        pr, created = self.call(f"open the pull request from {head}", step)
        wanted = list(
            dict.fromkeys(
                [*self.settings.labels, *(labels or []), *([STALE_LABEL] if stale else [])]
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
            reviewers = [r for r in self.reviewers(head) if r.lower() != pr.user.login.lower()]
            if reviewers:
                try:
                    self.call(
                        "request reviewers", lambda: pr.create_review_request(reviewers=reviewers)
                    )
                except GithubError as exc:
                    self.warnings.append(
                        f"reviewers {', '.join('@' + r for r in reviewers)} not requested: {exc}"
                    )
        return self._proposal(
            self.call("re-read the pull request", lambda: self.repo.get_pull(pr.number))
        )

    def add_labels(self, number: int, labels: list[str]) -> None:
        # The object form: the spec no longer lists the bare array PyGithub's add_to_labels sends.
        self.call(
            "label the pull request",
            lambda: self._api("POST", f"/issues/{number}/labels", input={"labels": labels}),
        )

    def list_proposals(self, state: str | None = "open") -> list[Proposal]:
        wanted = state or "all"
        api_state = "closed" if wanted == "merged" else wanted
        prs = self.call("list pull requests", lambda: list(self.repo.get_pulls(state=api_state)))
        out = [self._proposal(pr) for pr in prs if pr.head.ref.startswith(self.branch_prefix + "/")]
        return [p for p in out if wanted in ("all", "open", "closed") or p.state == wanted]

    def close(self, proposal_id: str) -> Proposal:
        """Close an open pull request without merging (its branch stays)."""

        def step():
            self.repo.get_pull(int(proposal_id)).edit(state="closed")
            return self.repo.get_pull(int(proposal_id))

        return self._proposal(self.call(f"close pull request #{proposal_id}", step))

    def get(self, proposal_id: str) -> Proposal:
        return self._proposal(
            self.call(
                f"read pull request #{proposal_id}", lambda: self.repo.get_pull(int(proposal_id))
            )
        )

    def approve(self, proposal_id: str, reviewer: str) -> Proposal:
        """Submit an approving review as the token's user on the current head SHA."""
        pr = self.call(
            f"read pull request #{proposal_id}", lambda: self.repo.get_pull(int(proposal_id))
        )
        review = {"commit_id": pr.head.sha, "event": "APPROVE", "body": f"Approved for {reviewer}"}
        self.call("approve", lambda: self._api("POST", f"/pulls/{pr.number}/reviews", input=review))
        return self.get(proposal_id)

    # -- reviewers -------------------------------------------------------------
    def reviewers(self, head: str) -> list[str]:
        """Reviewers from config, else the CODEOWNERS owners of the op's files (users only)."""
        if self.settings.reviewers:
            return list(self.settings.reviewers)
        if self.checkout is None:
            return []
        for rel in (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"):
            path = self.checkout / rel
            if path.is_file():
                return codeowners_for(
                    path.read_text(encoding="utf-8", errors="replace"), self._op_paths()
                )
        return []

    def _op_paths(self) -> list[str]:
        if not self.op or self.checkout is None:
            return []
        project, _, name = self.op.rpartition("/")
        candidates = sorted(self.checkout.glob(f"*/{project or '*'}/{name}"))
        return [p.relative_to(self.checkout).as_posix() + "/" for p in candidates] or [name + "/"]

    # -- sticky status comment, replies, reactions ----------------------------
    def post_status(self, text: str) -> None:
        """Create or edit this op's one status comment on the pull request."""
        self.last_status = text
        if self.pr_number is None or self.op is None:
            return
        self.upsert_comment(
            self.pr_number, status_marker(self.op), text, aliases=self.status_aliases
        )

    def upsert_comment(
        self, number: int, marker: str, text: str, aliases: tuple[str, ...] = ()
    ) -> int:
        """The bot's comment holding `marker` (or an alias, e.g. the op as typed), edited in place, or created once.

        Once found, the comment's id is kept: later edits are one API call, not a search of the thread.
        """
        body = f"{marker}\n{text}"
        known = self._comment_ids.get(marker)
        if known is not None:
            if self._comment_bodies.get(known) == body:
                return known  # unchanged: no call
            try:
                self.call(
                    f"update comment {known}",
                    lambda: self._api("PATCH", f"/issues/comments/{known}", input={"body": body}),
                )
                self._comment_bodies[known] = body
                return known
            except GithubError:
                self._comment_ids.pop(marker, None)  # deleted or unreachable: search again

        def step() -> int:
            issue_pr = self.repo.get_pull(number)
            for comment in issue_pr.get_issue_comments():
                current = comment.body or ""
                if self._mine(comment) and any(m in current for m in (marker, *aliases)):
                    if current != body:
                        comment.edit(body)
                    return comment.id
            return issue_pr.create_issue_comment(body).id

        found = self.call(f"update the comment on #{number}", step)
        self._comment_ids[marker], self._comment_bodies[found] = found, body
        return found

    def find_comment(self, number: int, marker: str) -> str | None:
        known = self._comment_ids.get(marker)
        if known is not None:
            try:
                data = self.call(
                    f"read comment {known}", lambda: self._api("GET", f"/issues/comments/{known}")
                )
            except GithubError:
                data = None
            login = (
                ((data or {}).get("user") or {}).get("login", "") if isinstance(data, dict) else ""
            )
            if (
                data
                and login.lower() == self.bot_login.lower()
                and marker in (data.get("body") or "")
            ):
                self._comment_bodies[known] = data["body"]
                return data["body"]

        def step() -> str | None:
            for comment in self.repo.get_pull(number).get_issue_comments():
                if marker in (comment.body or "") and self._mine(comment):
                    return comment.body
            return None

        return self.call(f"read comments of #{number}", step)

    def status_comments(self, number: int) -> dict[str, str]:
        """op -> body of every status comment of the bot on the pull request."""

        def step() -> dict[str, str]:
            out = {}
            for comment in self.repo.get_pull(number).get_issue_comments():
                body = comment.body or ""
                if self._mine(comment) and body.startswith("<!-- tunebot:status:"):
                    out[body.split(":", 2)[2].split(" -->", 1)[0]] = body
            return out

        return self.call(f"read comments of #{number}", step)

    def _mine(self, comment) -> bool:
        # Any bot (or user) can write a marker; only the bot's own login makes a comment the bot's.
        return comment.user is not None and comment.user.login.lower() == self.bot_login.lower()

    def find_comment_any(self, number: int, markers: tuple[str, ...]) -> str | None:
        """The body of the bot's first comment holding any of `markers`."""
        for marker in markers:
            body = self.find_comment(number, marker)
            if body is not None:
                return body
        return None

    def reply(self, number: int, comment_id: int | None, text: str, index: int = 0) -> int:
        """Answer a command once (re-delivered events edit the same reply)."""
        return self.upsert_comment(
            number, reply_marker(comment_id if comment_id is not None else "none", index), text
        )

    def react(self, comment_id: int, content: str = "eyes") -> None:
        self.call(
            "react to the comment",
            lambda: self._api(
                "POST", f"/issues/comments/{comment_id}/reactions", input={"content": content}
            ),
        )

    # -- permissions, statuses, checks ----------------------------------------
    def permission(self, login: str) -> str:
        """The user's role: admin | maintain | write | triage | read | none."""

        def step() -> str:
            try:
                data = self._api("GET", f"/collaborators/{login}/permission")
            except GithubException as exc:
                if exc.status == 404:
                    return "none"
                raise
            role = data.get("role_name") or ""
            return role if role in ROLE_RANK else str(data.get("permission") or "none")

        return self.call(f"read the permission of {login}", step)

    def set_status(
        self, sha: str, state: str, description: str, context: str | None = None
    ) -> None:
        """A commit status on `sha` (state: pending | success | failure | error)."""
        payload = {
            "state": state,
            "description": description[:140],
            "context": context or f"tunebot/{self.op or 'run'}",
        }
        if self.run_url:
            payload["target_url"] = self.run_url
        self.call(
            "set the commit status", lambda: self._api("POST", f"/statuses/{sha}", input=payload)
        )

    def commit_statuses(self, sha: str) -> dict[str, str]:
        """context -> latest state of the commit statuses on `sha`."""
        return self.call(
            f"read the statuses of {sha[:10]}",
            lambda: {
                st["context"]: st["state"]
                for st in self._paged(f"/commits/{sha}/status", "statuses")
            },
        )

    def checks(self, sha: str, ignore_contexts: tuple[str, ...] = ()) -> list[str]:
        """Problems with the checks of `sha` (empty: green).

        Skipped: tunebot's own statuses and the check run of the job running this gate (it is in
        progress until the gate ends). No checks at all is a problem unless `allow_no_checks`.
        """

        def step() -> list[str]:
            results: dict[str, str | None] = {}  # name -> problem (None: green)
            for status in self._paged(f"/commits/{sha}/status", "statuses"):
                if (
                    status["context"] in ignore_contexts
                    or status["context"].split("/")[0] == "tunebot"
                ):
                    continue
                results[status["context"]] = (
                    None
                    if status["state"] == "success"
                    else f"status `{status['context']}` is {status['state']}"
                )
            for run in self._paged(f"/commits/{sha}/check-runs", "check_runs"):
                if self._is_own_run(run):
                    continue
                results[run["name"]] = _run_problem(run)
            return self._check_problems(sha, results)

        return self.call(f"read the checks of {sha[:10]}", step)

    def _check_problems(self, sha: str, results: dict[str, str | None]) -> list[str]:
        problems = [p for p in results.values() if p]
        required = self.settings.required_checks
        problems += [
            f"required check `{name}` did not run on `{sha[:10]}`"
            for name in required
            if name not in results
        ]
        if not results and not required and not self.settings.allow_no_checks:
            problems.append(NO_CI.format(sha=sha[:10]))
        return problems

    def _paged(self, path: str, key: str) -> list[dict]:
        """Every item of a paginated list endpoint (100 per page; stops at total_count or a short page)."""
        items: list[dict] = []
        page = 1
        while True:
            data = self._api("GET", path, parameters={"per_page": 100, "page": page})
            batch = data.get(key, [])
            items += batch
            if len(batch) < 100 or len(items) >= int(data.get("total_count", len(items))):
                return items
            page += 1

    def _is_own_run(self, run: dict) -> bool:
        """The check run of the workflow run executing this code (matched by run id, else by job name)."""
        own_id = RUN_ID.search(self.run_url or "")
        if own_id:
            for url in (run.get("details_url"), run.get("html_url")):
                found = RUN_ID.search(url or "")
                if found and found.group(1) == own_id.group(1):
                    return True
        return run["name"] in self.own_checks and run["status"] != "completed"

    # -- stale guard -----------------------------------------------------------
    def head_moved(self) -> str | None:
        """The PR's current head when it moved away from the authorized SHA, else None."""
        if self.pr_number is None or self.guard_sha is None:
            return None
        current = self.pull_info(self.pr_number).head_sha
        return current if current != self.guard_sha else None

    def stale_notice(self, current: str) -> str:
        return (
            f"> [!WARNING]\n> **Stale results.** Pull request #{self.pr_number} moved from `{(self.guard_sha or '')[:10]}` "
            f"to `{current[:10]}` during the run; these measurements are for `{(self.guard_sha or '')[:10]}`. "
            "Nothing will be merged: comment `/tune <op>` again to tune the new head."
        )

    def footer(self) -> str:
        lines = ["---"]
        if self.pr_number is not None and self.guard_sha:
            lines.append(f"Tuned for #{self.pr_number} at `{self.guard_sha[:10]}`.")
            # The merge gate compares this with the original PR's head: results of an older head never merge.
            lines.append(f"<!-- tunebot:pinned:{self.guard_sha} -->")
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

    # -- merge gate ------------------------------------------------------------
    def _approved_sha(self, number: int, head_sha: str) -> str | None:
        approvals, _ = self._review_summary(number)
        return head_sha if head_sha in approvals.values() else next(iter(approvals.values()), None)

    def _review_summary(self, number: int) -> tuple[dict[str, str], list[str]]:
        """Latest review per user: {login: sha} of approvals by permitted users, and who requested changes."""
        reviews = self.call(
            f"read the reviews of #{number}", lambda: list(self.repo.get_pull(number).get_reviews())
        )
        latest: dict[str, tuple[str, str]] = {}
        for review in reviews:
            state = (
                review.state or ""
            ).upper()  # REST: APPROVED; tolerate lower-case spellings too
            if state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED") and review.user is not None:
                latest[review.user.login] = (state, review.commit_id)
        approvals = {u: sha for u, (s, sha) in latest.items() if s == "APPROVED"}
        approvals = {
            u: sha
            for u, sha in approvals.items()
            if role_allows(self.permission(u), self.settings.min_permission)
        }
        changes = [u for u, (s, _) in latest.items() if s == "CHANGES_REQUESTED"]
        return approvals, changes

    def gate(self, number: int) -> tuple[list[str], object]:
        """Missing gates of pull request `number` (empty: may merge) and the PR object."""
        pr = self.call(f"read pull request #{number}", lambda: self.repo.get_pull(number))
        if pr.merged or pr.state != "open":
            return [f"#{number} is {'already merged' if pr.merged else pr.state}"], pr
        missing: list[str] = self._origin_problems(pr)
        head = pr.head.sha
        if STALE_LABEL in [label.name for label in pr.labels]:
            missing.append(
                f"its results are stale (label `{STALE_LABEL}`): re-run `/tune` on the new head"
            )
        approvals, changes = self._review_summary(number)
        on_head = [u for u, sha in approvals.items() if sha == head]
        if not on_head:
            old = [f"@{u} on `{sha[:10]}`" for u, sha in approvals.items()]
            detail = (
                f" (approvals on older commits: {', '.join(old)}; re-approve the current head)"
                if old
                else ""
            )
            missing.append(
                f"no approval on the current head `{head[:10]}` by a user with `{self.settings.min_permission}` permission{detail}"
            )
        if changes:
            missing.append("changes requested by " + ", ".join(f"@{u}" for u in changes))
        missing += self.checks(head)
        mergeable = pr.mergeable
        if mergeable is None:  # GitHub computes it in the background: ask once more
            self.sleep(min(2.0, self.retry.max_wait_s))
            pr = self.call(f"read pull request #{number}", lambda: self.repo.get_pull(number))
            mergeable = pr.mergeable
        if mergeable is False:
            missing.append("it is not mergeable (conflicts with the base branch)")
        elif mergeable is None:
            missing.append(
                "GitHub has not computed mergeability yet; approve again or re-run the review workflow"
            )
        return missing, pr

    def _origin_problems(self, pr) -> list[str]:
        """A proposal comes from a bot branch of this repository, tuned on the base's current head."""
        problems = []
        head_repo = pr.head.repo.full_name if pr.head.repo is not None else None
        if head_repo != pr.base.repo.full_name:
            problems.append(
                f"its head is in a fork ({head_repo or 'a deleted fork'}), not a tunebot branch of {pr.base.repo.full_name}"
            )
        if not pr.head.ref.startswith(self.branch_prefix + "/"):
            problems.append(
                f"its head branch `{pr.head.ref}` does not start with `{self.branch_prefix}/`"
            )
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
        refs = self.call(
            f"read branch {branch}", lambda: self._api("GET", f"/git/matching-refs/heads/{branch}")
        )
        return next((r["object"]["sha"] for r in refs if r["ref"] == f"refs/heads/{branch}"), None)

    def merge(self, proposal_id: str) -> Proposal:
        """Merge only if every gate holds, at exactly the head SHA checked; then delete iteration branches."""
        number = int(proposal_id)
        missing, pr = self.gate(number)
        if missing:
            raise GateRefused(number, missing)
        head = pr.head.sha
        try:
            pr.merge(
                sha=head,
                merge_method="merge",
                commit_title=f"tunebot: merge #{number} ({pr.head.ref})",
            )
        except GithubException as exc:
            if exc.status in (405, 409):
                raise GateRefused(
                    number,
                    [
                        f"GitHub refused the merge at `{head[:10]}`: {exc.data.get('message') if isinstance(exc.data, dict) else exc.data}"
                    ],
                ) from None
            raise GithubError(self._explain(f"merge #{number}", exc)) from None
        self.delete_iteration_branches(pr.head.ref)
        return self.get(proposal_id)

    def delete_iteration_branches(self, delivery_branch: str) -> list[str]:
        """Delete the run's `<prefix>/<op>/v<N>` branches (only names the bot gives; never others)."""
        if not delivery_branch.startswith(self.branch_prefix + "/"):
            return []
        run_prefix = naming.run_of_delivery(delivery_branch)
        refs = self.call(
            "list iteration branches",
            lambda: list(
                self.repo.get_git_matching_refs(f"heads/{naming.iteration_prefix(run_prefix)}")
            ),
        )
        deleted = []
        for ref in refs:
            name = ref.ref.removeprefix("refs/heads/")
            if naming.is_iteration_of(name, run_prefix):
                self.call(
                    f"delete {name}",
                    lambda name=name: self._api("DELETE", f"/git/refs/heads/{name}"),
                )
                deleted.append(name)
        return deleted


def _run_problem(run: dict) -> str | None:
    if run["status"] != "completed":
        return f"check `{run['name']}` is {run['status']}"
    if run["conclusion"] not in ("success", "neutral", "skipped"):
        return f"check `{run['name']}` concluded {run['conclusion']}"
    return None


def codeowners_for(text: str, paths: list[str]) -> list[str]:
    """Owners (users, without @) of the last CODEOWNERS rule matching any of `paths`; teams are skipped."""
    rules: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        pattern, *owners = line.split()
        rules.append((pattern, owners))
    found: list[str] = []
    for path in paths:
        owners: list[str] = []
        for pattern, who in rules:
            if _codeowners_match(pattern, path):
                owners = who
        found += [o[1:] for o in owners if o.startswith("@") and "/" not in o]
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
            or cand.startswith(pat.rstrip("*"))
            and pat.endswith("**")
        ):
            return True
    return False
