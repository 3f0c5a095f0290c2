"""The Forge protocol (bot/forge/base.py), the same assertions on every forge in the registry.

`local` keeps proposals in a real git repository; `github` is GithubForge over PyGithub and
HTTP against the fake GitHub in tests/fakegithub (a real bare repo behind it). Each case says
how to make a branch on the forge's remote, how to make a head green for the gate (GitHub
wants CI and an approver with permission; the local forge has no CI), and where `main` is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import init_repo
from fakegithub.harness import make_world

from bot.errors import TunebotError
from bot.forge.base import Forge, MergeBlocked, Proposal
from bot.forge.github.client import GithubClient, make_client
from bot.forge.github.forge import GithubForge
from bot.forge.local import LocalForge
from bot.forge.registry import FORGES
from bot.git import branches, commits, refs

OP_BRANCH = "tunebot/op"


@dataclass
class Case:
    forge: Forge
    branch: Callable[[str, dict[str, str], str], str]  # (name, files, start) -> sha
    green: Callable[
        [str], None
    ]  # make the checks of a head pass (the gate's part besides approval)
    main: Callable[[], str]  # sha of main on the forge's side
    branches: Callable[[], set[str]]


def _local(tmp: Path) -> Iterator[Case]:
    git_repo = init_repo(tmp)
    repo = git_repo.repo

    def branch(name: str, files: dict[str, str], start: str) -> str:
        parent = refs.branch_sha(repo, name) or refs.branch_sha(repo, start)
        blobs = {rel: text.encode() for rel, text in files.items()}
        sha = commits.commit_files(repo, parent, blobs, f"commit on {name}")
        if refs.branch_sha(repo, name) is None:
            branches.create_branch(repo, name, sha)
        else:
            branches.update_branch(repo, name, sha, parent)
        return sha

    yield Case(
        LocalForge(git_repo.path, keep_branches=False, branch_prefix="tunebot"),
        branch,
        lambda sha: None,
        lambda: refs.branch_sha(repo, "main") or "",
        lambda: {h.name for h in repo.heads},
    )


def _github(tmp: Path) -> Iterator[Case]:
    world = make_world(tmp)
    world.fake.set_permission(world.fake.token_login, "write")  # its own approvals count
    client = GithubClient(
        make_client("t0ken", world.fake.base_url), world.fake.full_name, sleep=lambda s: None
    )
    try:
        yield Case(
            GithubForge(client),
            lambda name, files, start: world.push_branch(name, files, f"on {name}", start=start),
            lambda sha: world.fake.add_check_run(sha, "ci", "success"),
            lambda: world.fake.git("rev-parse", "main"),
            lambda: set(world.fake.branches()),
        )
        world.fake.assert_no_violations()
    finally:
        world.fake.stop()


CASES: dict[str, Callable[[Path], Iterator[Case]]] = {"local": _local, "github": _github}


def test_every_registered_forge_has_a_contract_case() -> None:
    assert set(CASES) == set(FORGES)


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    yield from CASES[request.param](tmp_path)


def _tuned(case: Case, iterations: int = 2) -> str:
    """Iteration branches tunebot/op/v1..vN and the delivery branch tunebot/op/best on top."""
    start = "main"
    for n in range(1, iterations + 1):
        case.branch(f"{OP_BRANCH}/v{n}", {f"perf_opt/op_opt_v{n}.py": f"v{n}\n"}, start)
        start = f"{OP_BRANCH}/v{n}"
    return case.branch(f"{OP_BRANCH}/best", {"perf_opt/op.py": "best\n"}, start)


def test_propose_is_idempotent_and_found_by_its_head(case: Case) -> None:
    head_sha = _tuned(case)
    assert case.forge.find_proposal(f"{OP_BRANCH}/best") is None
    first = case.forge.propose(f"{OP_BRANCH}/best", "main", "tune op -10%", "report v1")
    assert (first.head, first.base, first.head_sha, first.state) == (
        f"{OP_BRANCH}/best",
        "main",
        head_sha,
        "open",
    )
    second = case.forge.propose(f"{OP_BRANCH}/best", "main", "tune op -12%", "report v2")
    assert second.id == first.id and second.title == "tune op -12%"
    assert second.body.startswith("report v2")
    found = case.forge.find_proposal(f"{OP_BRANCH}/best")
    assert isinstance(found, Proposal) and found.id == first.id
    assert [p.id for p in case.forge.list_proposals("open")] == [first.id]
    assert case.forge.get(first.id).title == "tune op -12%"


def test_merge_waits_for_an_approval_on_the_current_head(case: Case) -> None:
    head_sha = _tuned(case)
    case.green(head_sha)
    proposal = case.forge.propose(f"{OP_BRANCH}/best", "main", "tune op", "body")
    before = case.main()
    with pytest.raises(MergeBlocked) as refused:
        case.forge.merge(proposal.id)
    assert refused.value.exit_code == 3 and refused.value.missing
    assert case.main() == before and case.forge.get(proposal.id).state == "open"

    approved = case.forge.approve(proposal.id, "alice")
    assert approved.approved_sha == head_sha
    # A new commit on the head after the approval: the approval no longer covers it.
    newer = case.branch(f"{OP_BRANCH}/best", {"perf_opt/op.py": "better\n"}, "main")
    case.green(newer)
    assert case.forge.get(proposal.id).head_sha == newer
    with pytest.raises(MergeBlocked):
        case.forge.merge(proposal.id)
    assert case.main() == before

    case.forge.approve(proposal.id, "bob")
    merged = case.forge.merge(proposal.id)
    assert merged.state == "merged" and case.main() != before
    # The iteration branches go with the merge; the delivery branch stays.
    left = case.branches()
    assert f"{OP_BRANCH}/v1" not in left and f"{OP_BRANCH}/v2" not in left
    assert f"{OP_BRANCH}/best" in left
    assert case.forge.find_proposal(f"{OP_BRANCH}/best") is None
    assert [p.id for p in case.forge.list_proposals("merged")] == [proposal.id]
    with pytest.raises(MergeBlocked):
        case.forge.merge(proposal.id)


def test_close_keeps_the_branch_and_ends_the_proposal(case: Case) -> None:
    _tuned(case, iterations=1)
    proposal = case.forge.propose(f"{OP_BRANCH}/best", "main", "tune op", "body")
    closed = case.forge.close(proposal.id)
    assert closed.id == proposal.id and closed.state == "closed"
    assert case.forge.find_proposal(f"{OP_BRANCH}/best") is None
    assert case.forge.list_proposals("open") == []
    assert f"{OP_BRANCH}/best" in case.branches()
    reopened = case.forge.propose(f"{OP_BRANCH}/best", "main", "tune op again", "body")
    assert reopened.id != proposal.id and reopened.state == "open"


def test_status_and_cancel_of_a_run_outside_any_pull_request(case: Case) -> None:
    case.forge.post_status("iterating")  # never fails, whatever the forge does with it
    assert case.forge.cancel_requested() is False


def test_an_unknown_proposal_is_an_error_not_a_crash(case: Case) -> None:
    with pytest.raises(TunebotError):
        case.forge.get("999")
