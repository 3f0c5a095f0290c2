"""What a run shows on the pull request: its sticky status comment and commit status.

The status comment of an op is rendered from the loop's progress events; every failure to
write it is logged and never stops the run. Whatever ends a run, the comment and the commit
status end in a final, truthful state.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.errors import TunebotError
from bot.forge.github.comments import CANCEL_MARKER
from bot.forge.github.forge import GithubForge

if TYPE_CHECKING:
    from bot.forge.github.context import Context
    from bot.forge.github.events import Request
    from bot.run.request import ProgressEvent


@dataclass(frozen=True)
class Links:
    server_url: str
    repo: str

    def _base(self) -> str:
        return f"{self.server_url.rstrip('/')}/{self.repo}"

    def commit(self, sha: str) -> str:
        return f"{self._base()}/commit/{sha}"

    def compare(self, base: str, head: str) -> str:
        return f"{self._base()}/compare/{base}...{head}"

    def tree(self, branch: str) -> str:
        return f"{self._base()}/tree/{branch}"


def us(value: float | None) -> str:
    return f"{value:.2f} us" if value is not None else "—"


class StatusReporter:
    """Renders the sticky status comment from the loop's progress events."""

    def __init__(
        self, forge: GithubForge, op: str, head_sha: str, requester: str | None, links: Links
    ) -> None:
        self.forge, self.op, self.head_sha = forge, op, head_sha
        self.requester, self.links = requester, links
        self.phase = "queued"
        self.baseline: str = ""
        self.rows: list[str] = []
        self.verdict: str = ""
        self.noise_warning: str = ""  # "this runner is too noisy to see gains below ..."
        self.publish_failures = 0

    def __call__(self, event: ProgressEvent) -> None:
        if event.kind in ("phase", "note"):  # terminal progress only: no API call per phase
            return
        if event.kind in ("start", "resumed"):
            self.phase = "measuring the baseline" if event.kind == "start" else "resumed"
        elif event.kind == "baseline":
            self.phase = "iterating"
            self.baseline = f"Baseline: **{us(event.latency_us)}**, L0 {event.accuracy or '?'}"
        elif event.kind == "iteration":
            self.rows.append(self._row(event))
        elif event.kind == "stop":
            self.phase = "delivering"
            self.verdict = f"Stopped: {event.message or event.verdict or ''}".strip()
            self.noise_warning = (event.data or {}).get("noise_warning") or ""
        elif event.kind == "delivered":
            self.phase = "done"
        self.publish()

    def _row(self, e: ProgressEvent) -> str:
        gain = f"{e.gain_pct:+.1f}%" if e.gain_pct is not None else ""
        change = (e.change or "").replace("|", "\\|").replace("\n", " ")[:80]
        links = ""
        if e.sha:
            links = (
                f"[`{e.sha[:7]}`]({self.links.commit(e.sha)}) · "
                f"[diff]({self.links.compare(self.head_sha, e.sha)})"
            )
        if e.branch:
            links += f" · [branch]({self.links.tree(e.branch)})"
        return (
            f"| {e.iteration} | {e.strategy or ''} | {change} | {e.accuracy or ''} | "
            f"{us(e.latency_us)} | {gain} | {e.verdict or ''} | {links} |"
        )

    def render(self, extra: str = "") -> str:
        head = f"### tunebot · `{self.op}` · {self.phase}"
        meta = f"PR head `{self.head_sha[:10]}`" + (
            f" · requested by @{self.requester}" if self.requester else ""
        )
        if self.forge.run_url:
            meta += f" · [workflow run]({self.forge.run_url})"
        parts = [head, meta]
        if self.baseline:
            parts.append(self.baseline)
        if self.rows:
            parts.append(
                "| # | strategy | change | L0 | latency | gain | verdict | links |\n"
                "|---|---|---|---|---|---|---|---|\n" + "\n".join(self.rows)
            )
        if self.verdict:
            parts.append(self.verdict)
        if extra:
            parts.append(extra)
        if self.forge.cancelled:
            parts.append(
                f"{CANCEL_MARKER}\n**Cancel requested**: stopping after the current iteration."
            )
        return "\n\n".join(parts)

    def publish(self, extra: str = "") -> bool:
        """Edit the status comment; an API failure is logged and never stops the run (the next edit retries)."""
        try:
            self.forge.post_status(self.render(extra))
        except TunebotError as exc:
            self.publish_failures += 1
            print(
                f"tunebot: could not update the status comment of {self.op}: {exc}", file=sys.stderr
            )
            return False
        return True

    def final(self, phase: str, extra: str = "") -> None:
        """Publish a last state of the run (done, failed, stale, cancelled, not run...)."""
        self.phase = phase
        self.publish(extra)


def set_status(
    forge: GithubForge, sha: str, state: str, description: str, context: str = "tunebot"
) -> None:
    """The final commit status; if even that fails, the log says so (there is nothing else to tell)."""
    try:
        forge.comments.set_status(sha, state, description[:140], context=context)
    except TunebotError as exc:
        print(f"tunebot: could not set the commit status to {state}: {exc}", file=sys.stderr)


def quoted(text: str) -> str:
    """`text` as a fenced code block that nothing inside it can close: a failure's message carries
    the output tail of PR-controlled code, which must render as text and never as markdown (links,
    mentions, a fake heading or "Proposal:" line that the summary step reads)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def without_quotes(body: str) -> str:
    """`body` without its fenced code blocks: what tunebot itself wrote in a comment."""
    return _FENCED.sub("", body)


_FENCED = re.compile(r"^(`{3,})[^\n`]*\n.*?\n\1[ \t]*$", re.MULTILINE | re.DOTALL)


def failure_text(exc: BaseException) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        detail = (
            (exc.stderr or b"").decode(errors="replace").strip()
            if isinstance(exc.stderr, bytes)
            else str(exc.stderr or "").strip()
        )
        return f"`{' '.join(map(str, exc.cmd))[:80]}` failed ({exc.returncode}): {detail[:200]}"
    return str(exc).strip()[:500] or type(exc).__name__


def matching(names: Iterable[str], typed: str) -> str | None:
    """The status comment's name for an op as typed (`demo/rms_norm` for `rms_norm`)."""
    return next((name for name in names if name == typed or name.endswith("/" + typed)), None)


def end_all(
    ctx: Context,
    req: Request,
    pinned: str,
    ops: tuple[str, ...],
    comment: tuple[str, str],
    status: tuple[str, str],
) -> None:
    """End a command that did not run: each op's status comment gets `comment` (phase, text), the
    commit status `status` (state, description). Best effort: the API may be what failed.

    If the comments cannot be read, each op's comment is written anyway (created if need be): a
    "queued" that stays forever is worse than a second comment.
    """
    phase, text = comment
    existing: dict[str, str] | None
    try:
        existing = ctx.forge.comments.status_comments(req.pr) if req.pr is not None else {}
    except TunebotError:
        existing = None
    if existing is None:
        targets = list(ops)
    else:
        targets = [name for name in (matching(existing, t) for t in ops) if name is not None]
    links = Links(ctx.flow.server_url, ctx.flow.repo)
    for op in dict.fromkeys(targets):
        reporter = StatusReporter(ctx.op_forge(op, req.pr, pinned), op, pinned, req.actor, links)
        reporter.final(phase, text)
    set_status(ctx.forge, pinned, *status)
