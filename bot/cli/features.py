"""CLI commands of the features area: refresh-features, advise (see bot/cli/__init__.py for exit codes)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import click

from bot.cli.common import handle_errors
from bot.features import advise as advise_mod
from bot.features import analysis as analysis_mod
from bot.features import render
from bot.features.refresh import DEFAULT_OUTPUT, refresh_file

FORGES = ("local", "github")


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        click.secho(f"warning: {warning}", fg="yellow", err=True)


def _make_forge(kind: str, repo: Path):
    if kind == "github":
        try:
            from bot.forge.github import GithubForge, client_from_env
        except ImportError:  # pragma: no cover - the github forge ships with tunebot
            raise click.UsageError(
                "the github forge is not available in this installation; use --forge local"
            )
        missing = [v for v in ("GITHUB_REPOSITORY", "GITHUB_TOKEN") if not os.environ.get(v)]
        if missing:
            raise click.UsageError(
                f"--forge github needs {' and '.join(missing)} in the environment "
                "(GitHub Actions sets them); or use --forge local"
            )
        gh, name = client_from_env()
        return GithubForge(gh, name)
    from bot.forge.local import LocalForge

    return LocalForge(repo)


@click.command("refresh-features")
@click.option(
    "--docs-dir",
    required=True,
    type=click.Path(path_type=Path),
    help="MindIE-SD feature docs folder (docs/zh/features of the MindIE-SD repo).",
)
@click.option(
    "--output",
    default=DEFAULT_OUTPUT,
    show_default=True,
    help="Features file to write (with --propose: its path inside the repo).",
)
@click.option(
    "--propose",
    is_flag=True,
    help="Commit a changed table on branch tunebot/refresh-features and open/update one proposal; "
    "the checkout is not touched.",
)
@click.option(
    "--repo",
    default=".",
    type=click.Path(path_type=Path),
    show_default=True,
    help="Repository to propose in (with --propose).",
)
@click.option(
    "--base", default=None, help="Branch the proposal merges into (default: the current branch)."
)
@click.option(
    "--forge",
    "forge_kind",
    type=click.Choice(FORGES),
    default="local",
    show_default=True,
    help="Where the proposal goes: local (kept in the repo) or github (needs GITHUB_REPOSITORY, GITHUB_TOKEN).",
)
@click.option(
    "--remote",
    default=None,
    help="Push the branch to this remote (default: origin with --forge github).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def refresh_features(
    docs_dir: Path,
    output: str,
    propose: bool,
    repo: Path,
    base: str | None,
    forge_kind: str,
    remote: str | None,
    as_json: bool,
) -> None:
    """Regenerate references/mindiesd-features.md from the MindIE-SD feature docs."""
    if not propose:
        result = refresh_file(docs_dir, Path(output))
        _warn(result.table.warnings)
        state = "updated" if result.changed else "unchanged"
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "status": state,
                        "output": output,
                        "rows": len(result.table.rows),
                        "added": len(result.diff.added),
                        "removed": len(result.diff.removed),
                        "changed": len(result.diff.changed),
                        "warnings": result.table.warnings,
                    },
                    ensure_ascii=False,
                    indent=2,
                )
            )
        else:
            click.echo(
                f"{output}: {state} ({len(result.table.rows)} rows; +{len(result.diff.added)} "
                f"-{len(result.diff.removed)} ~{len(result.diff.changed)})"
            )
        return
    from bot.features.propose import propose_refresh

    rel = _repo_relative(repo, output)
    if forge_kind == "github" and remote is None:
        remote = "origin"
    result = propose_refresh(
        repo, docs_dir, _make_forge(forge_kind, repo), base=base, output=rel, remote=remote
    )
    _warn(result.warnings)
    proposal = result.proposal
    if as_json:
        click.echo(
            json.dumps(
                {
                    "status": result.status,
                    "commit": result.commit,
                    "proposal": asdict(proposal) if proposal else None,
                    "added": len(result.diff.added),
                    "removed": len(result.diff.removed),
                    "changed": len(result.diff.changed),
                    "warnings": result.warnings,
                },
                ensure_ascii=False,
                indent=2,
            )
        )
    elif proposal is None:
        click.echo(f"{rel}: unchanged against the base branch; no commit, no proposal")
    elif result.status == "closed":
        click.echo(
            f"{rel}: the docs match the base branch again; closed stale proposal {proposal.id}"
        )
    elif result.status == "declined":
        click.echo(
            f"{rel}: proposal {proposal.id} with this same table was closed by a reviewer; not reopened "
            "(a changed table opens a new one)"
        )
    else:
        where = proposal.url or f"proposal {proposal.id}"
        click.echo(
            f"{rel}: {result.status} on {proposal.head} ({(result.commit or '')[:12]}); {where}: {proposal.title}"
        )


def _repo_relative(repo: Path, output: str) -> str:
    path = Path(output)
    if not path.is_absolute():
        return path.as_posix()
    from bot.git import repository

    top = Path(repository.open_repo(repo).working_tree_dir or ".").resolve()
    try:
        return path.resolve().relative_to(top).as_posix()
    except ValueError:
        raise click.BadParameter(
            f"{output} is outside the repository {top}; pass a path inside it.",
            param_hint="--output",
        ) from None


@click.command("advise")
@click.option(
    "--report",
    required=True,
    type=click.Path(path_type=Path),
    help="5-layer analysis JSON (docs/features.md) or a torch_npu kernel_details.csv.",
)
@click.option("--hardware", required=True, help='Hardware the model runs on, e.g. "Atlas 800I A2".')
@click.option("--model", required=True, help='Model name as in the support matrix, e.g. "Wan2.1".')
@click.option(
    "--features",
    "features_file",
    default=DEFAULT_OUTPUT,
    show_default=True,
    type=click.Path(path_type=Path),
    help="The features table to cite.",
)
@click.option(
    "--moe",
    is_flag=True,
    help="The model has mixture-of-experts layers (MoE features are offered only then).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the advice as JSON.")
@handle_errors
def advise(
    report: Path, hardware: str, model: str, features_file: Path, moe: bool, as_json: bool
) -> None:
    """Rank MindIE-SD optimizations (P0-P2) for a model from a performance analysis."""
    if not hardware.strip() or not model.strip():
        raise click.BadParameter("must not be empty", param_hint="--hardware/--model")
    if not features_file.is_file():
        raise analysis_mod.AnalysisError(
            f"features table {features_file} not found. Generate it with "
            "`tunebot refresh-features --docs-dir <MindIE-SD>/docs/zh/features`, or pass --features."
        )
    try:
        table = render.parse(features_file.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise analysis_mod.AnalysisError(
            f"features table {features_file} is not UTF-8 text, so it is not a table tunebot wrote. Regenerate it with "
            "`tunebot refresh-features`, or pass the right --features."
        ) from None
    if not table.rows:
        raise analysis_mod.AnalysisError(
            f"{features_file} has no feature rows; regenerate it with tunebot refresh-features."
        )
    analysis = analysis_mod.load(report)
    advice = advise_mod.advise(table, analysis, hardware, model, features_file.as_posix(), moe=moe)
    if as_json:
        click.echo(json.dumps(advice.to_dict(), ensure_ascii=False, indent=2))
        return
    _print_advice(advice)


def _print_advice(advice: advise_mod.Advice) -> None:
    click.echo(f"advise: {advice.model} on {advice.hardware} (report: {advice.report})")
    click.echo("decision tree:")
    for f in advice.findings:
        mark = {True: "fired", False: "no", None: "n/a"}[f.fired]
        click.echo(f"  [{mark:>5}] {f.branch}: {f.reason}")
    _warn(advice.warnings)
    if advice.nothing_applies:
        click.echo(f"no recommendation: {advice.nothing_applies}")
    else:
        click.echo("recommendations:")
        for r in advice.recommendations:
            click.echo(f"  {r.priority} #{r.rank} {r.name} [{r.direction}, {r.category}]")
            click.echo(f"      why: {'; '.join(r.reasons)}")
            if r.variants:
                click.echo(f"      options: {', '.join(r.variants)}")
            click.echo(f"      order: {r.ranked_by}")
            click.echo(
                f"      cite: {r.citation.file}#{r.citation.anchor} row '{r.citation.row}' "
                f"(docs: {', '.join(r.citation.sources)})"
            )
    for s in advice.skipped:
        click.echo(f"  skipped {s.name} [{s.direction}]: {s.reason}")


COMMANDS: list[click.Command] = [refresh_features, advise]
