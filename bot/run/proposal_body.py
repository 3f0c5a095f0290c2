"""The proposal (pull request) title and body, shared by the local and the GitHub forge.

A reviewer reads, in this order: what changed (the chain of one-line changes from the
baseline to the best), by how much and how sure (the gain with an interval and the
smallest gain the run could have detected), why the other changes were not kept (one row
per iteration), the chart, the seed's Stage Result block and the effective config.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable

from bot.measure.decide import rel_half_ci
from bot.record.chart import latency_chart
from bot.record.fmt import escape_cell, fmt_pct, fmt_us
from bot.run import state as rs
from bot.run.stops import stop_reason_text

BranchUrl = Callable[[str], "str | None"]
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def changed_line(diff: str) -> int | None:
    """Line number (in the new file) of the first added line of a unified diff."""
    line = None
    for text in diff.splitlines():
        m = _HUNK.match(text)
        if m:
            line = int(m.group(1))
            continue
        if line is None or text.startswith(("---", "+++")):
            continue
        if text.startswith("+"):
            return line
        if not text.startswith("-"):
            line += 1
    return None


def one_line_change(it: rs.IterationView) -> str:
    """`BLOCK_ROWS 4 -> 16 (line 20)`: the knob change when there is one, else the description."""
    what = f"{it.knob} {it.old} -> {it.new}" if it.knob is not None else it.change
    line = changed_line(it.diff)
    return f"{what} (line {line})" if line is not None else what


def chain(state: rs.RunState) -> list[rs.IterationView]:
    """The kept iterations from the baseline to the best, in order (each one's parent is the one before)."""
    by_sha = {it.sha: it for it in state.iterations}
    steps: list[rs.IterationView] = []
    sha = state.best_sha
    while sha in by_sha:
        it = by_sha[sha]
        steps.append(it)
        sha = it.parent
    return list(reversed(steps))


def gain_interval(state: rs.RunState) -> tuple[float, float] | None:
    """Range of the gain (percent) allowed by the two medians' 95 % confidence intervals.

    Each interval is taken relative to its median and applied to the medians the gain is
    computed from (the best's may be its re-measured median), so the range holds the gain."""
    base, best = state.baseline_latency, state.best_latency
    if not base or not best or not base.median_us or not best.median_us:
        return None
    ra, rb = rel_half_ci(base), rel_half_ci(best)
    low = (1 - best.median_us * (1 + rb) / (base.median_us * (1 - ra))) * 100 if ra < 1 else None
    high = (1 - best.median_us * (1 - rb) / (base.median_us * (1 + ra))) * 100
    return (low, high) if low is not None else None


def detectable_gain(state: rs.RunState, noise_floor: float) -> tuple[float, float | None]:
    """(smallest detectable gain in percent, the deciding comparison's noise in percent or None).

    The median over the run's decisions of the smallest gain each could have called better
    (`RunState.smallest_detectable`, as the completion report states it), never under the
    floor; without a decision, the floor."""
    decisions = [it.decision for it in state.iterations if it.decision]
    best = next(
        (it.decision for it in state.iterations if it.n == state.best_iteration and it.decision),
        None,
    )
    chosen = best or (
        max(decisions, key=lambda d: d.get("threshold") or 0.0) if decisions else None
    )
    smallest = state.smallest_detectable
    if smallest is None and chosen:
        smallest = chosen.get("threshold")
    detect = max(noise_floor, smallest or noise_floor) * 100
    return detect, ((chosen.get("noise") or 0.0) * 100 if chosen else None)


def proposal_title(op: str, state: rs.RunState) -> str:
    steps = chain(state)
    gain = rs.gain_pct(state.baseline_us, state.best_us) or 0.0
    what = "; ".join(
        f"{it.knob} {it.old} -> {it.new}" if it.knob else it.change for it in steps[-3:]
    )
    return f"tunebot: {op} {gain:+.1f}%: {what}" if what else f"tunebot: {op} {gain:+.1f}%"


def _branch(name: str, branch_url: BranchUrl | None) -> str:
    url = branch_url(name) if branch_url else None
    return f"[`{name}`](<{url}>)" if url else f"`{name}`"


def iteration_rows(state: rs.RunState, branch_url: BranchUrl | None = None) -> str:
    lines = [
        "| iter | change | latency (us) | vs baseline | vs best | verdict | reason | branch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for it in state.iterations:
        vs_best = fmt_pct(it.gain_vs_best_pct)
        verdict = f"**{it.verdict}**" if it.n == state.best_iteration else it.verdict
        cells = [
            str(it.n),
            escape_cell(f"{it.strategy}: {one_line_change(it)}"),
            fmt_us(it.latency_us),
            fmt_pct(it.gain_pct),
            vs_best,
            verdict,
            escape_cell(it.reason),
            _branch(it.branch, branch_url),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


CHART_LEGEND = (
    "**Legend.** Bars: each version's first-look median latency (`base` = the baseline; an empty "
    "bar = not measured: L0 failed, timeout or error). Line: the latency of the best version "
    "kept so far (for a kept variant, its re-measured median, so it can sit above or below its "
    "bar); a bar below the line that did not move it was not confirmed beyond the noise. The "
    "x label with `best` marks the best version. The latency axis starts at 0."
)


def chart_block(state: rs.RunState, op: str) -> str:
    assert state.baseline_us is not None
    points = [(it.n, it.latency_us) for it in state.iterations]
    kept: float = state.baseline_us
    best_so_far = [kept]
    for (
        it
    ) in state.iterations:  # the line follows the variants actually kept, not the running minimum
        if it.verdict == "better":
            kept = (it.decision or {}).get("candidate_us") or it.latency_us or kept
        best_so_far.append(kept)
    return latency_chart(
        state.baseline_us,
        points,
        state.best_us,
        title=f"{op} latency per iteration (us)",
        best_so_far=best_so_far,
        best_iteration=state.best_iteration or 0,
    )


def proposal_body(
    report: str,
    state: rs.RunState,
    settings,
    op: str,
    source_path: str,
    branch_url: BranchUrl | None = None,
) -> str:
    """Markdown body; `source_path` is the delivered perf_opt/<op>.py, `branch_url(name)` links branches."""
    steps = chain(state)
    gain = rs.gain_pct(state.baseline_us, state.best_us) or 0.0
    out = [
        (
            f"**What changed** in `{source_path}`, from the baseline to the best version "
            f"(iter {state.best_iteration}), one kept step per line:"
        ),
        "",
    ]
    out += [
        (
            f"{i}. `{one_line_change(it)}` (iter {it.n}, {it.strategy}: {fmt_pct(it.gain_vs_best_pct)} "
            "vs the version before)"
        )
        for i, it in enumerate(steps, start=1)
    ] or ["(none: the baseline is kept)"]
    interval = gain_interval(state)
    sure = (
        (
            f" (range {interval[0]:+.1f}% .. {interval[1]:+.1f}%: what the two medians' 95 % confidence "
            "intervals allow)"
        )
        if interval
        else ""
    )
    detect, noise = detectable_gain(state, settings.noise_floor)
    noise_text = f", measured noise {noise:.1f}%" if noise is not None else ""
    stopped = stop_reason_text(
        state.stopped.reason,
        max_iters=settings.max_iters,
        patience=settings.patience,
        target_us=settings.target_us,
    )
    out += [
        "",
        f"- **Gain:** {fmt_us(state.baseline_us)} us -> {fmt_us(state.best_us)} us, **{gain:+.1f}%**{sure}.",
        (
            f"- **Smallest gain this run could detect:** {detect:.1f}% (the median over its decisions; "
            f"noise floor {settings.noise_floor * 100:.1f}%{noise_text}); smaller real gains would "
            "read as no gain."
        ),
    ]
    drift = state.drift_pct
    if drift is not None:
        out.append(f"- **Baseline re-measured at the end:** drift {drift:+.1f}%.")
    out.append(f"- **Stopped:** {stopped} after {len(state.iterations)} iterations.")
    out += [
        "",
        "### Iterations",
        "",
        iteration_rows(state, branch_url),
        "### Latency per iteration",
        "",
        chart_block(state, op),
        CHART_LEGEND,
        "",
        (
            "The completion report follows the seed's template (`stage: 4` is the seed's stage number: "
            "stage 4 = performance tuning)."
        ),
        "",
        report.rstrip(),
        "",
    ]
    config = json.dumps(dataclasses.asdict(settings), ensure_ascii=False, sort_keys=True)
    out += [
        "<details><summary>Effective config</summary>",
        "",
        "```json",
        config,
        "```",
        "</details>",
        "",
    ]
    return "\n".join(out)
