"""Terminal side of model targets: `tunebot tune <project>/<model>` and `tunebot demo --model`.

bot/cli/tune.py prints with these when the name it was given is a model target.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from bot.forge.base import Forge
from bot.run.machine import run_tune
from bot.run.request import ProgressEvent, RunOutcome, TuneRequest
from bot.run.target import Resolved

DEMO_MODEL = "demo/dit_tiny"


def _ms(us: float | None) -> str:
    return f"{us / 1000.0:.2f} ms" if us is not None else "-"


def print_event(event: ProgressEvent) -> None:
    if event.kind == "iteration":
        colour = {"better": "green", "not_better": None}.get(event.verdict or "", "red")
        gain = f"{event.gain_pct:+.1f}%" if event.gain_pct is not None else "-"
        click.echo(
            f"  iter {event.iteration:>2}  {event.change or '':<48} {event.accuracy or '-':<11} "
            f"{_ms(event.latency_us):>11} {gain:>7}  "
            + click.style(event.verdict or "", fg=colour)
            + f"  [{event.branch}]"
        )
        click.echo(f"           row: {event.data.get('citation', '-')}")
        click.echo(f"           why: {'; '.join(event.data.get('reasons') or []) or '-'}")
        if event.message:
            click.echo(f"           {event.message}")
    elif event.kind == "plan":
        click.echo(f"plan for {event.op} (nothing will be run or written):")
        for line in event.message.splitlines():
            click.echo(f"  - {line}")
    elif event.kind == "delivered":
        click.echo(f"delivered: branch {event.branch} ({(event.sha or '')[:10]})")
    else:
        click.echo(f"{event.kind}: {event.message}")


def _json_event(event: ProgressEvent) -> None:
    click.echo(json.dumps({"event": dataclasses.asdict(event)}, ensure_ascii=False))


def print_outcome(outcome: RunOutcome, repo: Path) -> None:
    click.echo("")
    click.echo(
        f"stop reason: {outcome.stop_reason}; iterations: {outcome.iterations}; baseline "
        f"{_ms(outcome.baseline_us)} -> best {_ms(outcome.best_us)} ({outcome.improvement_pct:+.1f}%)"
    )
    if outcome.drift_pct is not None:
        click.echo(f"baseline re-measured at the end: drift {outcome.drift_pct:+.1f}%")
    click.echo(
        f"branches:  git -C {repo} branch --list '{outcome.iteration_prefix}*' '{outcome.delivery_branch}'"
    )
    click.echo(
        f"log:       git -C {repo} show {outcome.delivery_branch}:{outcome.perf_dir}/opt_log.md"
    )
    click.echo(f"records:   {outcome.results_path}")
    if outcome.proposal:
        click.echo(
            f"proposal:  #{outcome.proposal.id} {outcome.proposal.head} -> {outcome.proposal.base}"
        )
    else:
        click.echo(f"proposal:  none ({outcome.verdict}: {outcome.no_proposal_reason})")
    click.echo("")
    click.echo(outcome.report)


def tune(
    request: TuneRequest, forge: Forge, as_json: bool, resolved: Resolved | None = None
) -> RunOutcome:
    """Tune a model target (`resolved` when the caller resolved the name already)."""
    outcome = run_tune(request, forge, _json_event if as_json else print_event, resolved=resolved)
    if as_json:
        data = dataclasses.asdict(outcome)
        data["results_path"] = str(outcome.results_path)
        click.echo(json.dumps({"outcome": data}, ensure_ascii=False, default=str))
    elif not request.dry_run:
        print_outcome(outcome, request.repo)
    return outcome
