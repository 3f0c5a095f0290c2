"""A run resolves the name it was given once: `.tunebot.yml` read, the ops folder listed and
the op found once at the base commit, whether the CLI or the GitHub flow starts it."""

from __future__ import annotations

from click.testing import CliRunner
from test_loop import add_sleepy_op

from bot.cli import main
from bot.forge.local import LocalForge
from bot.git import repository
from bot.run import target
from bot.run.machine import run_tune
from bot.run.request import TuneRequest


def _count(monkeypatch, module, name: str, only=lambda *args: True) -> list[int]:
    calls = [0]
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls[0] += only(*args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_cli_dry_run_resolves_the_op_once(git_repo, monkeypatch):
    add_sleepy_op(git_repo)
    resolved = _count(monkeypatch, target, "find_op")
    configs = _count(monkeypatch, target, "load_repo_config")
    # listings of the ops folder (the evidence folder is listed once for the plan, not counted)
    listed = _count(
        monkeypatch, repository, "list_files", lambda repo, sha, path: path == "examples"
    )

    result = CliRunner().invoke(main, ["tune", "sleepy", "--repo", str(git_repo.path), "--dry-run"])

    assert result.exit_code == 0, result.output
    assert resolved == [1] and configs == [1] and listed == [1]


def test_run_tune_without_a_resolved_target_resolves_it_once(git_repo, monkeypatch):
    add_sleepy_op(git_repo)
    resolved = _count(monkeypatch, target, "find_op")
    configs = _count(monkeypatch, target, "load_repo_config")

    request = TuneRequest(repo=git_repo.path, op="sleepy", dry_run=True)
    outcome = run_tune(request, LocalForge(git_repo.path))

    assert outcome.op == "testproj/sleepy" and outcome.plan
    assert resolved == [1] and configs == [1]
