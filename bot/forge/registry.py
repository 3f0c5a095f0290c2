"""Forges by name (`--forge local|github`): a new forge is one module plus one line here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bot.forge.base import Forge


def _local(repo: Path) -> Forge:
    from bot.forge.local import LocalForge

    return LocalForge(repo)


def _github(repo: Path) -> Forge:
    """The repository GitHub Actions names (GITHUB_REPOSITORY, GITHUB_TOKEN, GITHUB_API_URL)."""
    from bot.forge.github.client import GithubClient, client_from_env
    from bot.forge.github.forge import GithubForge

    gh, name = client_from_env()
    return GithubForge(GithubClient(gh, name))


FORGES: dict[str, Callable[[Path], Forge]] = {
    "local": _local,
    "github": _github,
}
