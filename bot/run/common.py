"""What every kind of target (an op, a model) does the same way around its measurements.

One live run per target (an flock), where the records live, the start-over policy (archive,
never delete), the base branch, recreating refs a crash left unwritten, the delivery branch
that a person may have moved on, pushing, the cancel flag and the clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bot import fs
from bot.config.repo import load_repo_config
from bot.forge.base import Forge, ProposalNotFound
from bot.git import branches, refs, repository
from bot.model import run_records as model_records
from bot.run import records
from bot.run.errors import BadRequest, RunBusy
from bot.run.log import ResultsLog
from bot.run.request import TuneRequest

# record kinds that open and propose a run, for both target kinds (a model's carry a prefix)
_START_KINDS = (records.START, model_records.START)
_PROPOSAL_KINDS = (records.PROPOSAL, model_records.PROPOSAL)


def runs_dir(repo: Any) -> Path:
    return repository.state_dir(repo) / "runs"


def results_log(repo: Any, project: str, name: str) -> ResultsLog:
    """Where a target's records live: .git/tunebot/runs/<project>/<name>/results.jsonl."""
    return ResultsLog(runs_dir(repo) / project / name / "results.jsonl")


@contextmanager
def run_lock(state_dir: Path, name: str) -> Iterator[None]:
    """One live run per target (an flock: a killed run never leaves it stale)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as held:
        try:
            held.enter_context(fs.file_lock(state_dir / "run.lock", timeout_s=0))
        except fs.LockBusy:
            raise RunBusy(
                f"another tunebot process is tuning {name} right now; wait for it to finish, "
                f"or stop it with `tunebot cancel {name}`"
            ) from None
        yield


def proposal_closed(forge: Forge, proposal_id: object) -> bool:
    try:
        return forge.get(str(proposal_id)).state != "open"
    except ProposalNotFound:  # deleted; any other error (e.g. an API outage) must not wipe the run
        return True


def refuse_name_clash(repo: Any, project: str, name: str, forge: Forge) -> None:
    """Branches are named tunebot/<name>/..., without the project: two projects' targets of the
    same name would overwrite each other's branches and proposal, so only one may have a live
    run (a started run whose proposal is not closed)."""
    for other in sorted(runs_dir(repo).glob(f"*/{name}/results.jsonl")):
        owner = other.parent.parent.name
        if owner == project:
            continue
        records = ResultsLog(other).read()
        started = any(r.get("kind") in _START_KINDS for r in records)
        proposal = next((r for r in reversed(records) if r.get("kind") in _PROPOSAL_KINDS), None)
        if started and not (proposal and proposal_closed(forge, proposal.get("id"))):
            raise BadRequest(
                f"{owner}/{name} already has a tunebot run, and iteration branches are named "
                f"tunebot/{name}/v<N> for both; merge or close its proposal first, or rename one"
            )


def base_branch(repo: Any, request: TuneRequest, detached_fix: str) -> str:
    """The branch the proposal merges into: --into, the branch tuned, the config's, the current."""
    if request.base_branch:
        return request.base_branch
    if request.base_ref and refs.branch_sha(repo, request.base_ref) is not None:
        return request.base_ref  # tuning a branch proposes into that branch, not the current one
    configured = load_repo_config(Path(repo.working_tree_dir)).base_branch
    branch = configured or repository.current_branch(repo)
    if not branch:
        raise BadRequest(f"HEAD is detached and no base branch is configured; {detached_fix}")
    return branch


def archive(repo: Any, prefix: str, log: ResultsLog) -> None:
    """Start over: keep the old records and branches aside (refs/tunebot/archive/), never delete
    them. `prefix` is `<branch_prefix>/<name>`."""
    label = time.strftime("%Y%m%dT%H%M%S") + f"-{time.time_ns() % 1_000_000_000:09d}"
    names = [b for b in branches.owned_branches(repo, prefix) if b.startswith(prefix + "/")]
    branches.archive_branches(repo, names, label)
    if log.path.exists():
        log.path.rename(log.path.with_name(f"results.{label}.jsonl"))


def restore_refs(repo: Any, recorded: Iterable[tuple[str, str]]) -> None:
    """Recreate iteration refs a crash left unwritten (their commits are recorded): `recorded`
    holds (branch, sha) pairs."""
    for branch, sha in recorded:
        if refs.branch_sha(repo, branch) is None:
            branches.create_branch(repo, branch, sha)


def ensure_branch(repo: Any, name: str, sha: str, moved: Callable[[str], None] | None) -> None:
    """Create the delivery branch if it is missing; if someone moved it on, keep their commits
    (`moved` hears the sha it holds)."""
    current = refs.branch_sha(repo, name)
    if current is None:
        branches.create_branch(repo, name, sha)
    elif current != sha and moved is not None:
        moved(current)


def cancel_file(state_dir: Path) -> Path:
    """The flag `tunebot cancel` leaves beside the records of a live run."""
    return state_dir / "cancel"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
