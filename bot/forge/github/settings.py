"""What one GitHub forge is built from: the event's settings, and the run it serves."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bot.config.schema import GithubSettings
from bot.forge.github.comments import DEFAULT_BOT_LOGIN

if TYPE_CHECKING:
    from bot.remote_runs import RemoteRuns


@dataclass(frozen=True)
class ForgeSettings:
    """The same for every forge of one event (the flow builds it once from its FlowConfig)."""

    github: GithubSettings = field(default_factory=GithubSettings)  # .tunebot.yml `github:`
    branch_prefix: str = "tunebot"
    checkout: Path | None = None  # the repository on this runner (CODEOWNERS, op folders)
    run_url: str | None = None  # this workflow run: links, and the gate skips its own check run
    bot_login: str = DEFAULT_BOT_LOGIN  # the login the token comments as; only its comments count
    own_checks: tuple[str, ...] = ()  # check names of our own jobs, never waited on


@dataclass(frozen=True)
class RunScope:
    """One op's run on one pull request (all None: the repository as a whole)."""

    op: str | None = None
    pr_number: int | None = None
    guard_sha: str | None = None  # the head SHA authorized; the stale guard compares with it
    base_sha: str | None = None  # what every pushed commit descends from (default: guard_sha)
    remote_runs: RemoteRuns | None = None  # set: propose() pushes the run's branches through it

    @property
    def push_base(self) -> str | None:
        return self.base_sha or self.guard_sha
