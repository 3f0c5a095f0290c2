"""What every handler of the GitHub flow works with: the event's settings, its one forge, outcomes."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from github import Github

from bot.config.schema import RepoConfig
from bot.forge.github.client import GithubClient
from bot.forge.github.comments import DEFAULT_BOT_LOGIN
from bot.forge.github.forge import GithubForge
from bot.forge.github.settings import ForgeSettings
from bot.git.isolated import repo_url

if TYPE_CHECKING:
    from bot.forge.github.job_guard import JobGuard
    from bot.remote_runs import RemoteRuns
    from bot.run.request import RunOutcome

Phase = Literal["all", "gate", "tune", "report"]
SHA = re.compile(r"^[0-9a-f]{40}$")
TuneFn = Callable[..., "RunOutcome"]


@dataclass
class FlowConfig:
    """How this process handles the event (the CLI builds it from the workflow's environment)."""

    repo: str  # owner/name
    repo_cfg: RepoConfig = field(default_factory=RepoConfig)
    checkout: Path | None = None  # the PR checkout on the tune runner
    self_hosted: bool = True  # refuse fork heads (always true for the NPU runners)
    phase: Phase = "all"
    server_url: str = "https://github.com"  # GITHUB_SERVER_URL, for links
    run_url: str | None = None
    remote: str = "origin"
    authorized_sha: str | None = None  # tune phase: the SHA the gate pinned
    sleep: Callable[[float], None] = time.sleep  # back-off waits of the API retries
    bot_login: str = DEFAULT_BOT_LOGIN  # the login the token comments as; only its comments count
    own_checks: tuple[str, ...] = ("merge gate",)  # our own jobs' check names (review.yml)
    guard: JobGuard | None = None  # the CLI's: kills PR code's leftovers before git gets the token
    only_op: str | None = None  # a matrix job: tune this one op of the command

    @property
    def push_url(self) -> str:
        """Where tunebot pushes: GITHUB_SERVER_URL/GITHUB_REPOSITORY.git, never a git config value."""
        return repo_url(self.server_url, self.repo)

    def forge_settings(self) -> ForgeSettings:
        return ForgeSettings(
            github=self.repo_cfg.github,
            branch_prefix=self.repo_cfg.branch_prefix,
            checkout=self.checkout,
            run_url=self.run_url,
            bot_login=self.bot_login,
            own_checks=self.own_checks,
        )


@dataclass
class Outcome:
    action: str  # ignored | replied | refused | authorized | tuned | stale | failed | merged | gate-refused | reported
    message: str
    outputs: dict[str, str] = field(default_factory=dict)
    exit_code: int = 0


@dataclass
class Context:
    """One event's handling: the flow's settings, the one forge built for it, the tuning function."""

    flow: FlowConfig
    forge: GithubForge  # the repository's forge; each op's run derives its own with for_run()
    tune: TuneFn

    @classmethod
    def build(cls, gh: Github, flow: FlowConfig, tune: TuneFn) -> Context:
        client = GithubClient(gh, flow.repo, sleep=flow.sleep)
        return cls(flow, GithubForge(client, flow.forge_settings()), tune)

    @property
    def checkout(self) -> Path:
        if self.flow.checkout is None:
            raise AssertionError("this phase runs with a checkout")
        return self.flow.checkout

    def op_forge(self, op: str, pr: int | None, sha: str, **scope: Any) -> GithubForge:
        """The forge of `op`'s run on pull request `pr`, guarded at head `sha`."""
        return self.forge.for_run(op, pr_number=pr, guard_sha=sha, **scope)

    def remote_runs(self) -> RemoteRuns:
        """The run records and branches on the remote (isolated git; the token only there)."""
        from bot.remote_runs import RemoteRuns

        guard = self.flow.guard
        return RemoteRuns(
            self.flow.push_url,
            self.forge.client.token,
            self.checkout,
            self.flow.repo_cfg.branch_prefix,
            before_credential=guard.before_credential if guard is not None else (lambda: None),
        )
