"""The GitHub API client: one PyGithub connection to one repository, and the retry policy.

- Built from the same variables as GitHub Actions (`GITHUB_API_URL`, `GITHUB_REPOSITORY`,
  `GITHUB_TOKEN`), so github.com, GitHub Enterprise Server and a local fake all work.
- PyGithub's own retry and throttling are off (`retry=None`, `seconds_between_*=None`): the
  client retries whole idempotent steps itself, bounded, honouring Retry-After and
  x-ratelimit-reset (capped), so a retried write never duplicates a PR or comment.
- The repository is read once per client; every forge of one event shares the client.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
from github import Auth, Github, GithubException
from github.Repository import Repository

from bot.errors import TunebotError

T = TypeVar("T")
RETRYABLE_5XX = {500, 502, 503, 504}


class GithubError(TunebotError):
    """The GitHub API refused or kept failing; the message says which call and what to do."""


class GithubSetupError(GithubError):
    """The environment lacks what the GitHub flow needs (token, repository): bad input."""

    exit_code = 2


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4  # total tries of one step
    backoff_s: float = 1.0  # first wait for a 5xx; doubles
    max_wait_s: float = 60.0  # cap on any single wait (Retry-After or rate-limit reset)


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


def wait_for(
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


def explain(what: str, exc: GithubException) -> str:
    """A failed call as a user reads it: which step, GitHub's status and message, what it means."""
    message = exc.data.get("message") if isinstance(exc.data, dict) else exc.data
    hint = {
        401: "the token is invalid or expired",
        403: "the token lacks a permission (see docs/github.md) or the rate limit was hit",
        404: "not found, or the token cannot see it",
        422: "GitHub rejected the request",
    }.get(exc.status, "GitHub kept failing; try again later")
    return f"GitHub API: {what} failed with {exc.status} ({message}): {hint}"


class GithubClient:
    """One repository on one GitHub: `call` runs a step under the retry policy."""

    def __init__(
        self,
        gh: Github,
        repo: str,
        *,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.gh, self.repo_name = gh, repo
        self.retry, self.sleep, self.now = retry or RetryPolicy(), sleep, now
        self.waits: list[float] = []  # every back-off taken (tests and logs)
        self._repo: Repository | None = None

    def call(self, what: str, step: Callable[[], T]) -> T:
        """Run one idempotent step, retrying 5xx and rate limits (bounded, capped waits)."""
        for attempt in range(self.retry.attempts):
            try:
                return step()
            except GithubException as exc:
                wait = wait_for(exc, attempt, self.retry, self.now)
                if wait is None or attempt == self.retry.attempts - 1:
                    raise GithubError(explain(what, exc)) from None
            except requests.exceptions.RequestException as exc:  # connection reset, timeout
                if attempt == self.retry.attempts - 1:
                    raise GithubError(
                        f"GitHub API: {what} failed: cannot reach {self.gh.requester.base_url} ({exc})"
                    ) from None
                wait = min(self.retry.backoff_s * 2**attempt, self.retry.max_wait_s)
            self.waits.append(wait)
            self.sleep(wait)
        raise AssertionError("unreachable")

    @property
    def repo(self) -> Repository:
        if self._repo is None:
            self._repo = self.call("read the repository", lambda: self.gh.get_repo(self.repo_name))
        return self._repo

    @property
    def owner(self) -> str:
        return self.repo_name.split("/", 1)[0]

    @property
    def token(self) -> str | None:
        """The token the client authenticates with (handed only to the isolated push)."""
        return getattr(self.gh.requester.auth, "token", None)

    def api(self, verb: str, path: str, **kwargs: Any) -> Any:
        """One REST request under the repository's URL (`path` starts with /); the JSON answer."""
        _, data = self.gh.requester.requestJsonAndCheck(verb, f"{self.repo.url}{path}", **kwargs)
        return data

    def paged(self, path: str, key: str) -> list[dict[str, Any]]:
        """Every item of a paginated list endpoint (100 per page; stops at total_count or a short page)."""
        items: list[dict[str, Any]] = []
        page = 1
        while True:
            data = self.api("GET", path, parameters={"per_page": 100, "page": page})
            batch = data.get(key, [])
            items += batch
            if len(batch) < 100 or len(items) >= int(data.get("total_count", len(items))):
                return items
            page += 1
