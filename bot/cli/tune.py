"""CLI commands of the tuning loop on a local repository: tune, ops, proposals, approve, merge, cancel, demo.

Exit codes: 0 ok; 1 the run failed; 2 bad input (unknown op, malformed config,
bad flag); 3 refused by a gate (e.g. merge without approval); 130 interrupted
(re-run the same command to resume).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path

import click

from bot.cli.common import handle_errors, repo_option
from bot.cli.progress import Printer
from bot.cli.show import render_proposal
from bot.config import discovery
from bot.config.repo import load_repo_config
from bot.errors import TunebotError
from bot.forge.local import LocalForge
from bot.git import repository
from bot.model import cli as model_cli
from bot.run.cancel import cancel as cancel_target
from bot.run.errors import BadRequest
from bot.run.machine import run_tune
from bot.run.request import RunOutcome, TuneRequest
from bot.run.stops import stop_reason_text
from bot.run.target import resolve_request


def _strategies(value: str | None) -> tuple[str, ...] | None:
    return tuple(s.strip() for s in value.split(",") if s.strip()) if value else None


def _fmt_us(value: float | None) -> str:
    return f"{value:.2f} us" if value is not None else "-"


def _outcome_dict(outcome: RunOutcome) -> dict:
    data = dataclasses.asdict(outcome)
    data["results_path"] = str(outcome.results_path)
    return data


def _print_outcome(outcome: RunOutcome, repo: Path) -> None:
    click.echo("")
    click.echo(
        f"stop reason: {outcome.stop_text or stop_reason_text(outcome.stop_reason)}; "
        f"iterations: {outcome.iterations}; "
        f"baseline {_fmt_us(outcome.baseline_us)} -> best {_fmt_us(outcome.best_us)} "
        f"({outcome.improvement_pct:+.1f}%)"
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
    click.echo(f"verdict:   {outcome.verdict}")
    if outcome.proposal:
        click.echo(
            f"proposal:  #{outcome.proposal.id} {outcome.proposal.head} -> {outcome.proposal.base}"
            f"   (tunebot show {outcome.proposal.id}; tunebot approve {outcome.proposal.id}; "
            f"tunebot merge {outcome.proposal.id})"
        )
    else:
        click.echo(
            f"no proposal: {outcome.no_proposal_reason}. The branches and records stay; "
            "`tunebot tune --restart` tunes again."
        )
    click.echo("")
    click.echo(outcome.report)


@click.command()
@click.argument("op")
@repo_option("The git repository holding the op (any directory inside it).")
@click.option(
    "--base", "base_ref", metavar="REF", help="Commit or branch to tune at (default: HEAD)."
)
@click.option(
    "--into",
    "base_branch",
    metavar="BRANCH",
    help="Branch the proposal merges into (default: base_branch in .tunebot.yml, else the current branch).",
)
@click.option(
    "--max-iters", type=click.IntRange(min=1), help="Stop after N iterations (default 10)."
)
@click.option(
    "--patience",
    type=click.IntRange(min=1),
    help="Stop after N different things (knobs, strategies) were tried without a gain (default 3).",
)
@click.option(
    "--target-us",
    type=click.FloatRange(min=0, min_open=True),
    help="Stop once the best latency is at or under this many microseconds.",
)
@click.option(
    "--strategies",
    metavar="A,B",
    help="Only use these strategies (ids from references/strategies.md).",
)
@click.option("--restart", is_flag=True, help="Discard the recorded run of this op and start over.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the resolved op, settings and plan; run and write nothing.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine output: one JSON object per line.")
@handle_errors
def tune(
    op: str,
    repo: Path,
    base_ref: str | None,
    base_branch: str | None,
    max_iters: int | None,
    patience: int | None,
    target_us: float | None,
    strategies: str | None,
    restart: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Tune OP (`<op>` or `<project>/<op>`): baseline, one change per iteration, propose the best.

    Each iteration is a commit on branch tunebot/<op>/v<N>; the best variant lands on
    tunebot/<op>/best and is proposed on the local forge only if it beats what the base
    holds (a merged perf_opt/<op>.py is where a run starts). Results go to stdout,
    progress to stderr. Work happens in a git worktree:
    your checkout is never switched or modified. Killed or interrupted? Run the same
    command again: it resumes after the last recorded measurement.
    """
    request = TuneRequest(
        repo=repo.resolve(),
        op=op,
        base_ref=base_ref,
        base_branch=base_branch,
        max_iters=max_iters,
        target_us=target_us,
        strategies=_strategies(strategies),
        restart=restart,
        dry_run=dry_run,
        patience=patience,
    )
    forge = LocalForge(repo.resolve())
    resolved = resolve_request(request)  # the name is resolved once, for the whole run
    if resolved.model is not None:  # a model target: <project>/<model>/model.yaml (docs/model.md)
        model_cli.tune(request, forge, as_json, resolved)
        return
    printer = Printer(as_json=as_json)
    try:
        outcome = run_tune(request, forge, printer, resolved=resolved)
    finally:
        printer.progress.clear()  # an error or Ctrl-C then starts on a clean line
    if as_json:
        click.echo(json.dumps({"outcome": _outcome_dict(outcome)}, ensure_ascii=False, default=str))
    elif not dry_run:
        _print_outcome(outcome, repo.resolve())


@click.command("ops")
@repo_option()
@handle_errors
def list_ops(repo: Path) -> None:
    """List the ops tunebot can tune in this repository (`<project>/<op>`)."""
    root = Path(str(repository.open_repo(repo).working_tree_dir))
    cfg = load_repo_config(root)
    names = discovery.list_ops(root, cfg)
    if not names:
        click.echo(
            f"no ops found under {cfg.ops_root}/ (an op is {cfg.ops_root}/<project>/<op>/<op>.py; "
            "ops_root is set in .tunebot.yml)"
        )
    for name in names:
        click.echo(name)


@click.command()
@repo_option()
@click.option("--all", "show_all", is_flag=True, help="Include merged and closed proposals.")
@click.option("--json", "as_json", is_flag=True, help="Machine output.")
@handle_errors
def proposals(repo: Path, show_all: bool, as_json: bool) -> None:
    """List proposals on the local forge (open ones unless --all)."""
    items = LocalForge(repo.resolve()).list_proposals(None if show_all else "open")
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(p) for p in items], ensure_ascii=False))
        return
    if not items:
        click.echo("no proposals" + ("" if show_all else " open (use --all to see merged ones)"))
    for p in items:
        approved = (
            "approved" if p.approved_sha and p.approved_sha == p.head_sha else "needs approval"
        )
        click.echo(f"#{p.id:<4} {p.state:<7} {p.head} -> {p.base}  {approved}  {p.title}")


@click.command()
@click.argument("proposal_id")
@repo_option()
@click.option("--reviewer", default=None, help="Who approves (default: git user.name).")
@handle_errors
def approve(proposal_id: str, repo: Path, reviewer: str | None) -> None:
    """Approve proposal PROPOSAL_ID on its current head commit."""
    forge = LocalForge(repo.resolve())
    name = reviewer or _git_user(repo)
    p = forge.approve(proposal_id, name)
    click.echo(f"#{p.id} approved by {name} at {p.approved_sha[:10] if p.approved_sha else '?'}")


@click.command()
@click.argument("proposal_id")
@repo_option()
@handle_errors
def merge(proposal_id: str, repo: Path) -> None:
    """Merge proposal PROPOSAL_ID into its base branch (only once approved on its current head)."""
    p = LocalForge(repo.resolve()).merge(proposal_id)
    click.echo(f"#{p.id} merged {p.head} into {p.base}")


@click.command("cancel")
@click.argument("op")
@repo_option()
@handle_errors
def cancel_run(op: str, repo: Path) -> None:
    """Ask a running tune of OP to stop after its current iteration.

    A cancelled run proposes nothing; its branches, records and the delivery branch stay."""
    flag = cancel_target(repo.resolve(), op)  # a model or an op
    click.echo(f"cancel requested ({flag})")


def _git_user(repo: Path) -> str:
    try:
        name = repository.config_value(repository.open_repo(repo), "user", "name")
    except Exception:  # not a repository: still a usable name
        return "local-reviewer"
    return name or "local-reviewer"  # no identity configured


DEMO_PATHS = (".tunebot.yml", "examples/demo", "references")


@click.command()
@click.option("--op", default="demo/rms_norm", show_default=True, help="Demo op to tune.")
@click.option(
    "--dir",
    "target",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to create the demo repository (default: a new temporary directory).",
)
@click.option(
    "--max-iters", type=click.IntRange(min=1), default=None, help="Override the iteration budget."
)
@click.option(
    "--model",
    "model",
    is_flag=True,
    help=f"Tune the demo model {model_cli.DEMO_MODEL} instead (docs/model.md).",
)
@handle_errors
def demo(op: str, target: Path | None, max_iters: int | None, model: bool) -> None:
    """Create a scratch git repo with the demo ops and tune one of them on the CPU.

    Shows the whole loop on the embedded default: local repository, CPU backend,
    local forge: several iterations (kept and rejected changes), the stop reason,
    then the proposal. The op's DESIGN.md target is ignored, since a fast machine
    meets it at once. Your own repositories are not touched.
    """
    source = _project_root()
    discovery.resolve_op(
        source, load_repo_config(source), op
    )  # an unknown op: exit 2, nothing created
    if target is not None and target.exists() and any(target.iterdir()):
        raise BadRequest(f"{target} is not empty; pass --dir with a new or empty directory")
    made = target is None or not target.exists()
    target = target or Path(tempfile.mkdtemp(prefix="tunebot-demo-"))
    try:
        target.mkdir(parents=True, exist_ok=True)
        for rel in DEMO_PATHS:
            src = source / rel
            if src.is_dir():
                shutil.copytree(
                    src, target / rel, ignore=shutil.ignore_patterns("__pycache__", "perf_opt")
                )
            elif src.exists():
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target / rel)
        repository.init_repo(target, message="demo: tunebot example ops")
    except BaseException:
        if made:
            shutil.rmtree(target, ignore_errors=True)
        raise
    click.echo(f"demo repository: {target}")
    click.echo(
        "demo: tuning without the op's DESIGN.md target, so the loop runs until the patience "
        "or the iteration limit stops it"
    )
    forge = LocalForge(target)
    if model:
        model_cli.tune(
            TuneRequest(repo=target, op=model_cli.DEMO_MODEL, max_iters=max_iters), forge, False
        )
        click.echo(f"next: cd {target} && tunebot proposals")
        return
    printer = Printer()
    try:
        outcome = run_tune(
            TuneRequest(repo=target, op=op, max_iters=max_iters, no_target=True), forge, printer
        )
    finally:
        printer.progress.clear()
    _print_outcome(outcome, target)
    if outcome.proposal:
        click.echo("")
        click.echo(
            f"---- proposal #{outcome.proposal.id} (tunebot show {outcome.proposal.id}) ----"
        )
        click.echo(render_proposal(forge.get(outcome.proposal.id)))
        click.echo(
            f"next: cd {target} && tunebot approve {outcome.proposal.id} && tunebot merge {outcome.proposal.id}"
        )


def _project_root() -> Path:
    """The checkout holding the demo ops: the current directory, else the installed source tree."""
    for candidate in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (candidate / "examples" / "demo").is_dir():
            return candidate
    raise TunebotError(
        "cannot find examples/demo; run `tunebot demo` from a clone of the tunebot repository"
    )


COMMANDS: list[click.Command] = [tune, list_ops, proposals, approve, merge, cancel_run, demo]
