"""One op's run on this runner, the same for a `/tune` command and a schedule.

The records of earlier runners are restored before any PR code runs; a run that is already
complete at this SHA is recognised and not repeated; whatever the loop does, its records are
pushed for the next runner.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.errors import TunebotError
from bot.forge.github.forge import GithubForge
from bot.remote_runs import Finished, RemoteRuns, finished, recorded_base
from bot.run.request import TuneRequest

if TYPE_CHECKING:
    from bot.forge.github.context import Context
    from bot.forge.github.grammar import TuneCommand
    from bot.run.request import ProgressCallback, RunOutcome


@dataclass
class OpRun:
    """Op `op` tuned at `sha` (the authorized PR head, or the default branch's head)."""

    ctx: Context
    op: str
    sha: str
    base_branch: str  # where the proposal merges
    trigger: str  # what started it: `comment:<id>` or `run:<url>` (a re-delivery is the same)
    remote: RemoteRuns
    forge: GithubForge

    def __post_init__(self) -> None:
        self.done: Finished | None = finished(self.ctx.checkout, self.op, self.sha)

    def already_finished(self) -> str:
        """What to say when the recorded run at this SHA is complete and nothing should run ("" otherwise).

        Delivered with an open proposal: done. Nothing to propose (no gain, nothing to try): done.
        Cancelled: done for the command that was cancelled (a re-delivery); a new command starts over.
        """
        done, sha = self.done, self.sha
        if done is None:
            return ""
        if done.proposal_id:
            if self._still_open(done.proposal_id):
                return f"already delivered as #{done.proposal_id} at {sha[:10]}; nothing was run"
            return ""  # closed or merged: the loop starts a fresh run
        if done.cancelled and self.remote.triggers.get(self.op) != self.trigger:
            return ""
        return f"already finished at {sha[:10]} with nothing to propose ({done.no_proposal}); nothing was run"

    def _still_open(self, proposal_id: str) -> bool:
        try:
            return self.forge.get(proposal_id).state == "open"
        except TunebotError:
            return False

    def tune(
        self,
        requester: str | None,
        command: TuneCommand | None = None,
        progress: ProgressCallback | None = None,
    ) -> RunOutcome:
        """Run the loop on the op; the records go to the remote whatever happens."""
        # An older head's run, or a run cancelled by an earlier command: start over.
        restart = recorded_base(self.ctx.checkout, self.op) not in (None, self.sha) or bool(
            self.done and self.done.cancelled
        )
        request = TuneRequest(
            repo=self.ctx.checkout,
            op=self.op,
            base_ref=self.sha,
            base_branch=self.base_branch,
            max_iters=command.max_iters if command else None,
            target_us=command.target_us if command else None,
            strategies=command.strategies if command else None,
            requester=requester,
            restart=restart,
        )
        # The loop does not push: the forge pushes in propose() through RemoteRuns.
        try:
            return self.ctx.tune(request, forge=self.forge, progress=progress)
        finally:
            self._save()

    def _save(self) -> None:
        """Push the op's records for the next runner; a failure is logged (the branches, if pushed, remain)."""
        try:
            self.remote.save(self.op, self.trigger)
        except TunebotError as exc:
            print(
                f"tunebot: could not save the records of {self.op} on the remote: {exc}",
                file=sys.stderr,
            )


RETRY_HINT = (
    "What was measured is kept on the remote (refs/tunebot/runs/); re-run the job or comment `/tune` "
    "again to resume from there."
)
