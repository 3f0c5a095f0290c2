"""An approving review of a tunebot proposal runs the merge gate; its answer is one comment on the PR."""

from __future__ import annotations

import sys

from bot.errors import TunebotError
from bot.forge.base import MergeBlocked
from bot.forge.github.comments import GATE_MARKER
from bot.forge.github.context import Context, Outcome
from bot.forge.github.events import Request
from bot.forge.github.status import failure_text


def handle(req: Request, ctx: Context) -> Outcome:
    forge = ctx.forge
    if req.review_state != "APPROVED":
        return Outcome(
            "ignored", f"review state {req.review_state}: only approvals run the merge gate"
        )
    assert req.pr is not None
    head_ref = req.head_ref or forge.pull_info(req.pr).head_ref
    if not head_ref.startswith(forge.branch_prefix + "/"):
        return Outcome("ignored", f"#{req.pr} is not a tunebot proposal (head {head_ref})")
    try:
        proposal = forge.merge(str(req.pr))
    except MergeBlocked as exc:
        outcome = Outcome(
            "gate-refused",
            "**Not merged yet.** Missing:\n"
            + "\n".join(f"- {m}" for m in exc.missing)
            + "\n\nOnce these hold, approve again (or re-run the `tunebot review` workflow) to merge.",
            exit_code=exc.exit_code,
        )
    except TunebotError as exc:
        outcome = Outcome(
            "failed",
            f"**Not merged: the merge gate could not finish.** {failure_text(exc)}\n\n"
            "Nothing was merged. Re-run the `tunebot review` workflow or approve again once GitHub answers.",
            exit_code=1,
        )
    else:
        outcome = Outcome(
            "merged",
            f"**Merged** `{proposal.head}` at `{proposal.head_sha[:10]}` after approval; "
            "iteration branches deleted.",
        )
    try:
        forge.comments.upsert(req.pr, GATE_MARKER, outcome.message)
    except TunebotError as exc:
        print(
            f"tunebot: could not post the merge gate's answer on #{req.pr}: {exc}", file=sys.stderr
        )
    return outcome
