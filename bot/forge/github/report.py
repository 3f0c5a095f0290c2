"""The matrix's last job: one aggregated answer for all the per-op jobs of a `/tune`.

Each op runs in its own job (its own runner); each job keeps its op's status comment and a
`tunebot/<op>` commit status. This job runs after all of them, whatever they did, and:

- reads every op's status comment once (one list of comments);
- gives a final state to any op whose job ended without one (runner lost, timeout, workflow
  cancelled): its comment says so, nothing keeps saying "iterating" forever;
- writes one summary comment for the command (one row per op, proposal links) and the
  combined `tunebot` commit status: success only if every op is done.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from bot.errors import TunebotError
from bot.forge.github.forge import GithubForge
from bot.forge.github.status import matching, without_quotes

HEADING = re.compile(r"^### tunebot · `(?P<op>[^`]+)` · (?P<phase>.+)$", re.MULTILINE)
PROPOSAL = re.compile(r"Proposal: \[#(\d+)\]\(([^)\s]+)\)")
FINAL = {
    "done": "success",
    "failed": "failure",
    "stale": "error",
    "cancelled": "error",
    "not run": "error",
}
SUMMARY_MARKER = "<!-- tunebot:summary:{id} -->"


@dataclass(frozen=True)
class OpState:
    op: str
    phase: str  # as the status comment (or, where it lags, the job's status) tells it
    proposal: str = ""  # "[#12](url)", or ""
    state: str = "failure"  # success | failure | error
    lost: bool = False  # the job ended without a result: no status of its own, comment not final


JOB_PHASE = {"success": "done", "failure": "failed", "error": "stale or cancelled"}


def op_states(
    comments: dict[str, str], ops: tuple[str, ...], job_statuses: dict[str, str] | None = None
) -> list[OpState]:
    """The state of each op of the command.

    The job's own commit status `tunebot/<op>` (set once, at its end, one context per job: no
    lost update between jobs) decides; the status comment gives the detail, and decides only
    when the job set no final status at all (it died first).
    """
    out = []
    for typed in ops:
        name = matching(comments, typed)
        body = without_quotes(comments.get(name or "", ""))  # not what PR code printed
        heading = HEADING.search(body)
        phase = heading.group("phase").strip() if heading else "no status"
        found = PROPOSAL.search(body)
        link = f"[#{found.group(1)}]({found.group(2)})" if found else ""
        job = (job_statuses or {}).get(f"tunebot/{typed}")
        if job in JOB_PHASE:
            shown = phase if FINAL.get(phase) == job else JOB_PHASE[job]
            out.append(OpState(name or typed, shown, link, job))
        elif phase in FINAL:
            out.append(OpState(name or typed, phase, link, FINAL[phase]))
        else:
            out.append(OpState(name or typed, phase, link, "failure", lost=True))
    return out


def combined(states: list[OpState]) -> str:
    """success only when every op succeeded; any failure wins over stale/cancelled."""
    kinds = {s.state for s in states}
    return "failure" if "failure" in kinds else "error" if "error" in kinds else "success"


def report(
    forge: GithubForge,
    pr: int,
    comment_id: int | None,
    ops: tuple[str, ...],
    sha: str,
    mark_lost: Callable[[str, str], None],
) -> tuple[str, list[OpState], str]:
    """Finish every op, post the summary, set the combined status; returns (state, states, text)."""
    comments = forge.comments.status_comments(pr)
    states = op_states(comments, ops, forge.comments.commit_statuses(sha))
    for s in states:
        if s.lost:
            mark_lost(s.op, s.phase)
    state = combined(states)
    text = summary_text(
        states, sha, forge.run_url, "all done" if state == "success" else "finished with problems"
    )
    marker = SUMMARY_MARKER.format(id=comment_id if comment_id is not None else "run")
    try:
        forge.comments.upsert(pr, marker, text)
    except TunebotError as exc:
        text += f"\n(could not post the summary: {exc})"
    done = sum(s.state == "success" for s in states)
    forge.comments.set_status(
        sha, state, f"tunebot: {done}/{len(states)} ops done", context="tunebot"
    )
    return state, states, text


def summary_text(states: list[OpState], sha: str, run_url: str | None, heading: str) -> str:
    rows = "\n".join(
        f"| `{s.op}` | {'job ended early (was: ' + s.phase + ')' if s.lost else s.phase} | "
        f"{s.proposal or '-'} |"
        for s in states
    )
    return (
        f"### tunebot · {len(states)} op{'s' if len(states) != 1 else ''} · {heading}\n\nPR head `{sha[:10]}`"
        + (f" · [workflow run]({run_url})" if run_url else "")
        + f"\n\n| op | state | proposal |\n|---|---|---|\n{rows}\n\nDetails in each op's status comment."
    )


def post_queued_summary(
    forge: GithubForge, pr: int, comment_id: int | None, ops: tuple[str, ...], sha: str
) -> None:
    """The gate's summary of a multi-op command: one row per op, each queued for its own job."""
    states = [OpState(op, "queued", "", "pending") for op in ops]
    text = summary_text(states, sha, forge.run_url, f"queued as {len(ops)} jobs")
    forge.comments.upsert(
        pr, SUMMARY_MARKER.format(id=comment_id if comment_id is not None else "run"), text
    )


def lost_notice(op: str, phase: str) -> str:
    return (
        f"**Failed:** the job tuning `{op}` ended while it was `{phase}` (runner lost, timeout or the "
        "workflow was cancelled). What it measured is kept on the remote (refs/tunebot/runs/); "
        "re-run the job or comment `/tune` again to resume."
    )
