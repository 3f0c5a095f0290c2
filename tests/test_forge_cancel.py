"""A cancel through the forge reaches the loop directly: the loop asks `forge.cancel_requested()`.

Real loop, real repo, real kernels (the sleepy test op); the forge is the local one with its
answer to `cancel_requested` switched on after a given number of questions, as `/tune cancel`
does on GitHub between two iterations.
"""

from __future__ import annotations

from pathlib import Path

from test_loop import add_sleepy_op, records

from bot.forge.local import LocalForge
from bot.run.machine import run_tune
from bot.run.request import TuneRequest
from bot.run.stops import CANCELLED


class CancelAfter(LocalForge):
    """The local forge, whose user cancels once the loop has asked `after` times."""

    def __init__(self, repo: Path, after: int) -> None:
        super().__init__(repo)
        self.after, self.asked = after, 0

    def cancel_requested(self) -> bool:
        self.asked += 1
        return self.asked > self.after


def test_a_forge_cancel_stops_the_loop_before_its_next_iteration(git_repo):
    add_sleepy_op(git_repo)
    forge = CancelAfter(git_repo.path, after=2)
    outcome = run_tune(TuneRequest(repo=git_repo.path, op="sleepy", max_iters=6), forge)
    assert outcome.stop_reason == CANCELLED
    assert outcome.iterations == 2 and forge.asked == 3
    assert outcome.proposal is None  # a cancelled run proposes nothing
    stops = [r for r in records(git_repo.path) if r["kind"] == "stop"]
    assert [s["reason"] for s in stops] == [CANCELLED]


def test_the_local_forge_never_cancels_by_itself(git_repo):
    add_sleepy_op(git_repo)
    outcome = run_tune(
        TuneRequest(repo=git_repo.path, op="sleepy", max_iters=2), LocalForge(git_repo.path)
    )
    assert outcome.stop_reason != CANCELLED and outcome.iterations == 2
