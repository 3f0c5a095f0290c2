"""`tunebot show ID`: read a local proposal as a person would, or as JSON.

The body is the markdown a forge renders; on a terminal tables are aligned, the Mermaid
chart becomes text bars, emphasis marks and HTML fold tags are dropped, and links show
their target.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import click

from bot.cli.common import handle_errors, repo_option
from bot.forge.base import Proposal
from bot.forge.local import LocalForge
from bot.record.fmt import is_separator_row, split_row

BAR_WIDTH = 40
_LINK = re.compile(r"\[([^\]]*)\]\(<?([^)>]*)>?\)")
_LIST = re.compile(r"\[(.*)\]")


def _plain(text: str) -> str:
    text = _LINK.sub(lambda m: f"{m.group(1)} <{m.group(2)}>", text)
    return text.replace("**", "")


def _chart(block: list[str]) -> list[str]:
    """A Mermaid xychart as one text bar per x position (the bar) with the best-so-far value."""
    found: dict[str, list[str]] = {}
    for line in block:
        words = line.strip().split(None, 1)
        if words and words[0] in ("x-axis", "bar", "line") and len(words) > 1:
            m = _LIST.search(words[1])
            if m:
                found[words[0]] = [v.strip().strip('"') for v in m.group(1).split(",")]
    labels, bars, best = found.get("x-axis", []), found.get("bar", []), found.get("line", [])
    if not labels or len(bars) != len(labels):
        return block
    values = [float(v) for v in bars]
    top = max(values + [float(v) for v in best]) or 1.0
    width = max(len(label) for label in labels)
    out = ["latency per version (us): bar = measured median, | = best kept so far, axis from 0"]
    for i, label in enumerate(labels):
        cells = [" "] * (BAR_WIDTH + 1)
        for j in range(round(values[i] / top * BAR_WIDTH)):
            cells[j] = "#"
        if i < len(best):
            cells[min(BAR_WIDTH, round(float(best[i]) / top * BAR_WIDTH))] = "|"
        kept = f"  best so far {float(best[i]):.2f}" if i < len(best) else ""
        out.append(f"  {label:<{width}} {''.join(cells)} {values[i]:.2f}{kept}")
    return out


def _table(rows: list[str]) -> list[str]:
    cells = [split_row(r) or [r] for r in rows]
    body = [c for c in cells if not is_separator_row(c)]
    widths = [
        max(len(_plain(row[i])) if i < len(row) else 0 for row in body)
        for i in range(max(map(len, body)))
    ]
    out = []
    for n, row in enumerate(body):
        out.append("  ".join(_plain(c).ljust(widths[i]) for i, c in enumerate(row)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def render_body(body: str) -> str:
    lines = body.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == "```mermaid":
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), len(lines)
            )
            out += _chart(lines[i + 1 : end])
            i = end + 1
            continue
        if line.strip().startswith("```"):  # other code: indented, without its fences
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), len(lines)
            )
            out += ["    " + text for text in lines[i + 1 : end]]
            i = end + 1
            continue
        if line.lstrip().startswith("|"):
            end = i
            while end < len(lines) and lines[end].lstrip().startswith("|"):
                end += 1
            out += _table(lines[i:end])
            i = end
            continue
        m = re.match(r"\s*<details><summary>(.*)</summary>\s*$", line)
        if m:
            out.append(m.group(1) + ":")
        elif line.strip() != "</details>":
            out.append(_plain(line))
        i += 1
    return "\n".join(out).rstrip() + "\n"


def render_proposal(p: Proposal) -> str:
    approved = "approved" if p.approved_sha and p.approved_sha == p.head_sha else "needs approval"
    head = f"#{p.id} {p.state}  {p.head} -> {p.base}  {approved}  (head {p.head_sha[:10]})"
    return f"{head}\n{p.title}\n\n{render_body(p.body)}"


@click.command()
@click.argument("proposal_id")
@repo_option()
@click.option(
    "--json", "as_json", is_flag=True, help="Machine output: the proposal record, body as markdown."
)
@handle_errors
def show(proposal_id: str, repo: Path, as_json: bool) -> None:
    """Show proposal PROPOSAL_ID: what changed, the gain, every iteration, the report."""
    proposal = LocalForge(repo.resolve()).get(proposal_id)
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(proposal), ensure_ascii=False))
    else:
        click.echo(render_proposal(proposal), nl=False)


COMMANDS: list[click.Command] = [show]
