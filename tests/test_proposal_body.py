"""The proposal body a reviewer reads, rendered the way GitHub renders markdown (tables on).

Seen: the body had no winning change, no per-iteration table and no confidence figure;
the chart had no legend and a truncated axis.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from test_loop import OP_DIR, add_sleepy_op, git, records, tune

from bot.forge.local import LocalForge
from bot.run.proposal_body import changed_line

DIFF = """--- a/perf_opt/sleepy.py
+++ b/perf_opt/sleepy.py
@@ -14,7 +14,7 @@ import time
 import time
 
-BLOCK = 16
+BLOCK = 32
 NUM_STAGES = 1
 WRONG_AT = -1
"""


def test_changed_line_is_the_first_added_line_of_the_new_file():
    assert changed_line(DIFF) == 16
    assert changed_line("") is None
    two_hunks = DIFF + "@@ -40,3 +40,4 @@\n a\n b\n+c\n"
    assert changed_line(two_hunks) == 16


def _run_with_proposal(git_repo):
    add_sleepy_op(git_repo, WRONG_AT=256)  # the planner's first move (a far end) fails L0
    outcome = tune(git_repo.path, max_iters=5, patience=5)
    assert outcome.proposal is not None, outcome.no_proposal_reason
    return outcome, LocalForge(git_repo.path).get(outcome.proposal.id)


def test_the_body_leads_with_the_change_then_gain_then_iterations_chart_report_config(git_repo):
    outcome, proposal = _run_with_proposal(git_repo)
    body = proposal.body
    order = [
        "**What changed**",
        "**Gain:**",
        "**Smallest gain this run could detect:**",
        "### Iterations",
        "```mermaid",
        "**Legend.**",
        "## Stage Result",
        "Effective config",
    ]
    positions = [body.index(marker) for marker in order]
    assert positions == sorted(positions), "sections in the order a reviewer needs them"

    iterations = [r for r in records(git_repo.path) if r["kind"] == "iteration"]
    kept = [r for r in iterations if r["verdict"] == "better"]
    chain_text = body[: body.index("**Gain:**")]
    for rec in kept:  # each kept step as a one-line diff naming the line the variant changed
        variant = git(git_repo.path, "show", f"{rec['sha']}:{rec['path']}").splitlines()
        line = next(
            i
            for i, text in enumerate(variant, start=1)
            if text.startswith(f"{rec['change']['knob']} = ")
        )
        step = f"`{rec['change']['knob']} {rec['change']['old']} -> {rec['change']['new']} (line {line})`"
        assert step in chain_text
    assert proposal.title.startswith(f"tunebot: testproj/sleepy {outcome.improvement_pct:+.1f}%: ")
    assert (
        f"{kept[-1]['change']['knob']} {kept[-1]['change']['old']} -> {kept[-1]['change']['new']}"
        in proposal.title
    )

    gain = re.search(
        r"\*\*Gain:\*\* [\d.]+ us -> [\d.]+ us, \*\*([+-][\d.]+)%\*\* \(range "
        r"([+-][\d.]+)% \.\. ([+-][\d.]+)%: what the two medians' 95 % confidence intervals allow",
        body,
    )
    assert gain, body[:800]
    value, low, high = (float(g) for g in gain.groups())
    assert low <= value <= high
    detect = float(re.search(r"could detect:\*\* ([\d.]+)%", body).group(1))
    assert detect >= 3.0, "never below the noise floor"


def test_the_iteration_table_renders_as_a_table_with_a_reason_for_every_row(git_repo):
    _, proposal = _run_with_proposal(git_repo)
    iterations = [r for r in records(git_repo.path) if r["kind"] == "iteration"]
    md = MarkdownIt("commonmark").enable("table")
    tokens = md.parse(proposal.body)
    tables = [i for i, t in enumerate(tokens) if t.type == "table_open"]
    assert len(tables) == 1
    html = md.render(proposal.body)
    table = html[html.index("<table>") : html.index("</table>")]
    header = re.findall(r"<th>(.*?)</th>", table)
    assert header == [
        "iter",
        "change",
        "latency (us)",
        "vs baseline",
        "vs best",
        "verdict",
        "reason",
        "branch",
    ]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.DOTALL)[1:]
    assert len(rows) == len(iterations)
    for row, rec in zip(rows, iterations, strict=False):
        cells = re.findall(r"<td>(.*?)</td>", row, re.DOTALL)
        assert len(cells) == 8 and cells[0] == str(rec["iteration"])
        assert rec["verdict"] in cells[5] and cells[6].strip() not in ("", "-")
        assert rec["branch"] in cells[7]
    assert any(r["verdict"] == "fail_l0" for r in iterations), "the rejected change is in the table"
    assert "L0 fail" in table


def test_the_chart_is_a_mermaid_block_from_zero_with_the_best_marked_and_a_legend(git_repo):
    outcome, proposal = _run_with_proposal(git_repo)
    tokens = MarkdownIt("commonmark").parse(proposal.body)
    fences = [t for t in tokens if t.type == "fence" and t.info == "mermaid"]
    assert len(fences) == 1
    chart = fences[0].content
    assert re.search(r'y-axis "latency \(us\)" 0 --> ', chart)
    assert f'"{outcome.best_iteration} best"' in chart
    legend = proposal.body[proposal.body.index("**Legend.**") :].split("\n")[0]
    assert "Bars:" in legend and "Line:" in legend and "starts at 0" in legend


def test_the_body_never_mentions_a_stage_without_saying_what_it_is(git_repo):
    _, proposal = _run_with_proposal(git_repo)
    assert "- stage: 4" in proposal.body
    assert "`stage: 4` is the seed's stage number" in proposal.body
    assert f"`{OP_DIR}/perf_opt/sleepy.py`" in proposal.body
