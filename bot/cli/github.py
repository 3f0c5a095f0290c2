"""CLI commands of the github area (see bot/cli/__init__.py for exit codes).

`tunebot github handle` is what the workflows run: it reads the event the way GitHub
Actions provides it (GITHUB_EVENT_NAME, GITHUB_EVENT_PATH, GITHUB_API_URL,
GITHUB_REPOSITORY, GITHUB_TOKEN) and writes step outputs to GITHUB_OUTPUT.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from bot.cli.common import handle_errors


def _write_outputs(outputs: dict[str, str], target: str | None) -> None:
    if not target or not outputs:
        return
    with open(target, "a", encoding="utf-8") as fh:
        for key, value in outputs.items():
            # Values come from validated fields (sha, numbers, op names, JSON of those); never multi-line.
            fh.write(f"{key}={str(value).splitlines()[0] if value else ''}\n")


def _load_event(event_name: str | None, event_path: str | None) -> tuple[str, dict]:
    name = event_name or os.environ.get("GITHUB_EVENT_NAME")
    path = event_path or os.environ.get("GITHUB_EVENT_PATH")
    if not name or not path:
        raise click.UsageError(
            "no event: pass --event-name and --event-path (GitHub Actions sets GITHUB_EVENT_NAME/GITHUB_EVENT_PATH)"
        )
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise click.UsageError(f"cannot read the event payload {path}: {exc}") from None
    if not isinstance(payload, dict):
        raise click.UsageError(f"the event payload {path} is not a JSON object")
    return name, payload


@click.group("github")
def github() -> None:
    """Run tunebot from GitHub events (used by .github/workflows; see docs/github.md)."""


@github.command("handle")
@click.option("--event-name", help="Event name (default: $GITHUB_EVENT_NAME).")
@click.option(
    "--event-path",
    type=click.Path(dir_okay=False),
    help="Event payload JSON (default: $GITHUB_EVENT_PATH).",
)
@click.option(
    "--phase",
    type=click.Choice(["all", "gate", "tune", "report"]),
    default="all",
    show_default=True,
    help="gate: react, authorize, pin the SHA, plan the matrix (hosted runner); tune: run on the pinned SHA "
    "(self-hosted runner, one job per op with --op); report: one summary and the combined status.",
)
@click.option(
    "--checkout",
    type=click.Path(file_okay=False, path_type=Path),
    help="The repository checkout (tune phase).",
)
@click.option("--sha", "authorized_sha", help="Tune phase: the head SHA the gate authorized.")
@click.option(
    "--hosted",
    is_flag=True,
    help="Running on a GitHub-hosted runner: fork heads may be handled (never on self-hosted).",
)
@click.option(
    "--bot-login",
    envvar="TUNEBOT_BOT_LOGIN",
    default="github-actions[bot]",
    show_default=True,
    help="The login the token comments as (a GitHub App: '<app-slug>[bot]'); only its comments are trusted.",
)
@click.option(
    "--op", "only_op", help="A matrix job: tune only this op of the command (one job per op)."
)
@handle_errors
def handle(
    event_name: str | None,
    event_path: str | None,
    phase: str,
    checkout: Path | None,
    authorized_sha: str | None,
    hosted: bool,
    bot_login: str,
    only_op: str | None,
) -> None:
    """Handle one GitHub event: /tune comments, review approvals, schedule and dispatch."""
    from bot.config.repo import load_repo_config
    from bot.config.schema import RepoConfig
    from bot.forge.github import client_from_env
    from bot.github_flow import FlowConfig, handle_event
    from bot.job_guard import JobGuard, is_real_cli, seal

    # First of all: secrets and the step's file commands leave the environment (the process
    # re-executes itself so that not even /proc/<pid>/environ keeps them); PR code never sees them.
    sealed = seal()
    # Killing leftovers (and becoming their subreaper) only in a real tunebot process, never in a
    # test runner that imported the CLI.
    guard = JobGuard(
        sealed, reap=phase in ("all", "tune") and (sealed.reexecuted or is_real_cli())
    ).start()
    name, payload = _load_event(event_name, event_path)
    gh, repo = client_from_env({**os.environ, **sealed.values})
    repo_cfg = load_repo_config(checkout) if checkout else RepoConfig()
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
    run_id = os.environ.get("GITHUB_RUN_ID")
    run_url = f"{server}/{repo}/actions/runs/{run_id}" if run_id else None
    flow = FlowConfig(
        repo=repo,
        repo_cfg=repo_cfg,
        checkout=checkout,
        self_hosted=not hosted,
        phase=phase,  # type: ignore[arg-type]
        server_url=server,
        run_url=run_url,
        authorized_sha=authorized_sha,
        bot_login=bot_login,
        guard=guard,
        only_op=only_op,
    )
    try:
        outcomes = handle_event(name, payload, gh, flow)
    finally:
        tampered = (
            guard.finish()
        )  # PR code's leftovers die; its writes to GITHUB_ENV & co. are undone
    for channel in tampered:
        click.echo(
            f"warning: the tuned code wrote to ${channel}; that was undone, later steps never see it",
            err=True,
        )
    outputs: dict[str, str] = {"authorized": "false"}
    code = 0
    for outcome in outcomes:
        click.echo(f"{outcome.action}: {outcome.message}")
        outputs.update(outcome.outputs)
        code = max(code, outcome.exit_code)
    _write_outputs(outputs, sealed.get("GITHUB_OUTPUT"))
    sys.exit(code)


@github.command("propose")
@click.option(
    "--head",
    required=True,
    help="Branch to propose (already pushed), e.g. tunebot/features-refresh.",
)
@click.option("--base", help="Branch to merge into (default: the repository's default branch).")
@click.option("--title", required=True)
@click.option(
    "--body-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True
)
@handle_errors
def propose(head: str, base: str | None, title: str, body_file: Path) -> None:
    """Open the pull request from HEAD, or update the open one (never a second)."""
    from bot.forge.github import GithubForge, client_from_env

    gh, repo = client_from_env()
    forge = GithubForge(gh, repo)  # no PR code runs here
    proposal = forge.propose(
        head, base or forge.repo.default_branch, title, body_file.read_text(encoding="utf-8")
    )
    click.echo(f"#{proposal.id} {proposal.url}")


COMMANDS: list[click.Command] = [github]
