"""A model run's opt_log.md, completion report and proposal body (rendered from its state).

Same style as the operator's records (docs/records.md): a 基线 section, an 迭代记录 table,
a 结论 section; the report is a `## Stage Result` block of `- key: value` lines. Latencies
of a whole pipeline are in milliseconds.
"""

from __future__ import annotations

from bot.features.analysis import LAYERS
from bot.model.state import ModelState
from bot.record import verdicts
from bot.record.chart import latency_chart
from bot.record.fmt import escape_cell, fmt_pct, one_line

TITLE_SUFFIX = "模型性能调优日志"
TABLE_HEADER = ("iter", "特性设置", "引用行", "latency(ms)", "提升", "cosine", "结论")
# The layer figures shown when they move (the ones the decision tree reads).
FIGURES = (
    ("compute", "matmul_pct", "MatMul"),
    ("compute", "attention_pct", "Attention"),
    ("compute", "vector_pct", "Vector"),
    ("communication", "comm_pct", "Comm"),
    ("operator", "host_bound_pct", "Host bound"),
    ("pipeline", "step_similarity", "step similarity"),
    ("system", "peak_memory_gb", "peak memory GB"),
)


def fmt_ms(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "-"


def _cos(value: float | None) -> str:
    return f"{value:.6f}" if value is not None else "-"


def workload_line(workload: dict) -> str:
    return ", ".join(f"{k}={workload[k]}" for k in workload)


def figures_line(layers: dict | None) -> str:
    if not layers:
        return "未运行"
    parts = []
    for layer, name, label in FIGURES:
        value = layers.get(layer, {}).get(name)
        if value is not None and not isinstance(value, bool):
            unit = "%" if LAYERS[layer].get(name) == "pct" else ""
            parts.append(f"{label} {value:g}{unit}")
    return ", ".join(parts) or "无数值"


def delta(before: dict | None, after: dict | None) -> dict:
    """How each figure moved: {"compute.matmul_pct": [before, after], ...} (only figures both have)."""
    out: dict = {}
    for layer, name, _ in FIGURES:
        a = (before or {}).get(layer, {}).get(name)
        b = (after or {}).get(layer, {}).get(name)
        if (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and not isinstance(a, bool)
            and not isinstance(b, bool)
        ):
            out[f"{layer}.{name}"] = [a, b]
    return out


def delta_line(moved: dict | None) -> str:
    if not moved:
        return "-"
    labels = {f"{layer}.{name}": label for layer, name, label in FIGURES}
    return (
        ", ".join(f"{labels.get(k, k)} {a:g} -> {b:g}" for k, (a, b) in moved.items() if a != b)
        or "no figure moved"
    )


def render_opt_log(model: str, state: ModelState, features_file: str) -> str:
    base = state.baseline
    bench = (base.benchmark if base else None) or {}
    stages = ", ".join(f"{k} {v:.2f} ms" for k, v in (bench.get("stages_ms") or {}).items()) or "-"
    lines = [
        f"# {one_line(model)} {TITLE_SUFFIX}",
        "",
        "## 基线",
        f"- latency: {fmt_ms(state.baseline_ms)} ms (median of {len(bench.get('samples_ms', []))} samples)",
        f"- 工作负载: {workload_line(bench.get('workload') or {})}",
        f"- 阶段: {stages}",
        f"- 设置: {one_line(str(base.settings if base else {}))}",
        f"- 分析: {figures_line(((base.analysis if base else None) or {}).get('layers'))}",
        f"- 特性表: {features_file} ({'可能过期: ' + '; '.join(state.stale) if state.stale else '未发现过期迹象'})",
        "",
        "## 迭代记录",
        "| " + " | ".join(TABLE_HEADER) + " |",
        "|" + "------|" * len(TABLE_HEADER),
    ]
    for it in state.iterations:
        cells = [
            str(it.n),
            escape_cell(it.change),
            escape_cell(it.row),
            fmt_ms(it.latency_ms),
            fmt_pct(it.gain_pct),
            _cos(it.cosine),
            it.verdict,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [
        f"- iter {it.n}: {escape_cell(it.citation)}; 依据: {'; '.join(it.reasons) or '-'}; "
        f"分析变化: {delta_line(it.analysis_delta)}" + (f"; {one_line(it.note)}" if it.note else "")
        for it in state.iterations
    ]
    if notes:
        lines += ["", "## 依据与分析变化", *notes]
    if state.stop:
        which = "baseline" if state.best_iteration is None else f"iter {state.best_iteration}"
        lines += [
            "",
            "## 结论",
            f"- 最优版本: {which} ({one_line(str(state.best_settings))})",
            f"- 最终 latency: {fmt_ms(state.best_ms)} ms",
            f"- 总提升: {fmt_pct(_gain(state))}",
            f"- 中止原因: {state.stop.reason}",
            f"- 证据: {one_line(state.stop.evidence)}",
        ]
        if state.drift_pct is not None:
            lines.append(f"- 基线复测漂移: {state.drift_pct:+.1f}%")
    return "\n".join(lines) + "\n"


def _gain(state: ModelState) -> float | None:
    if state.baseline_ms and state.best_ms:
        return (state.baseline_ms - state.best_ms) / state.baseline_ms * 100.0
    return None


def run_verdict(state: ModelState) -> tuple[str, str]:
    """(Stage Result verdict, why nothing is proposed or ""). Only TUNING_COMPLETED opens a proposal,
    as for ops (bot/record/verdicts.py)."""
    reason = state.stop.reason if state.stop else None
    n = len(state.iterations)
    if reason == "已取消":
        return verdicts.CANCELLED, "the run was cancelled; its branches and records stay"
    if state.best_iteration is not None:
        return verdicts.COMPLETED, ""
    if n == 0 and reason == "达目标":
        return verdicts.TARGET_ALREADY_MET, "the baseline already meets the target"
    if n == 0:
        return (
            verdicts.NOTHING_TO_TRY,
            f"no setting was tried: {state.stop.evidence if state.stop else ''}",
        )
    return verdicts.NO_GAIN, (
        f"none of the {n} settings tried beat the baseline ({fmt_ms(state.baseline_ms)} ms) "
        "beyond the noise rule and the quality gate"
    )


REPORT_KEYS = (
    "stage",
    "project",
    "model",
    "output",
    "verdict",
    "iterations",
    "baseline_latency",
    "final_latency",
    "improvement",
    "stop_reason",
    "stop_evidence",
    "enabled",
    "features_table",
    "skills_consulted",
    "summary",
    "issues",
)


def render_report(
    project: str,
    model: str,
    settings_path: str,
    state: ModelState,
    features_file: str,
    noise_floor: float = 0.03,
) -> str:
    enabled = [f"{it.change} ({it.row})" for it in state.iterations if it.verdict == "better"]
    verdict, no_proposal = run_verdict(state)
    issues = [f"no proposal: {no_proposal}"] if no_proposal else []
    issues += [
        f"iter {it.n} ({it.key}={it.new}): {it.verdict}" + (f" — {it.note}" if it.note else "")
        for it in state.iterations
        if it.verdict not in ("better", "not_better")
    ]
    gain = _gain(state)
    stop_reason, stop_evidence = (
        (state.stop.reason, state.stop.evidence) if state.stop else ("-", "-")
    )
    drift = state.drift_pct
    drift_clause = (
        f"; baseline re-measured at the end drifted {drift:+.1f}%" if drift is not None else ""
    )
    if drift is not None and abs(drift) >= noise_floor * 100:
        issues.append(
            f"baseline drifted {drift:+.1f}% between start and end of the run (machine load); "
            "treat the gains vs the baseline with care"
        )
    summary = (
        f"{len(state.iterations)} iterations on {project}/{model}; best "
        f"{'iter ' + str(state.best_iteration) if state.best_iteration else 'is the baseline'} at "
        f"{fmt_ms(state.best_ms)} ms ({fmt_pct(gain)} vs baseline), stopped: {stop_reason}{drift_clause}."
    )
    values = {
        "stage": "model",
        "project": project,
        "model": model,
        "output": settings_path,
        "verdict": verdict,
        "iterations": str(len(state.iterations)),
        "baseline_latency": f"{fmt_ms(state.baseline_ms)} ms",
        "final_latency": f"{fmt_ms(state.best_ms)} ms",
        "improvement": fmt_pct(gain),
        "stop_reason": stop_reason,
        "stop_evidence": stop_evidence,
        "enabled": "; ".join(enabled) or "none",
        "features_table": (
            f"STALE ({'; '.join(state.stale)}): refresh with `tunebot refresh-features`"
            if state.stale
            else f"{features_file} (no sign of staleness)"
        ),
        "skills_consulted": f"{features_file}, references/optimization-dimensions.md",
        "summary": summary,
        "issues": "; ".join(issues) or "none",
    }
    return (
        "\n".join(["## Stage Result"] + [f"- {k}: {one_line(values[k])}" for k in REPORT_KEYS])
        + "\n"
    )


def proposal_body(report: str, state: ModelState, model: str) -> str:
    """Leads with what was enabled and why (the analysis finding and the row), then the report."""
    lines = ["### Enabled, and why", ""]
    kept = [it for it in state.iterations if it.verdict == "better"]
    for it in kept:
        lines.append(
            f"- **{it.change}** — {it.citation}. Finding: {'; '.join(it.reasons) or '-'}. "
            f"{fmt_ms(it.latency_ms)} ms, cosine {_cos(it.cosine)}; layer figures: {delta_line(it.analysis_delta)}."
        )
    if not kept:
        lines.append("- nothing: no setting beat the baseline beyond the noise rule.")
    if state.stale:
        lines += [
            "",
            (
                f"**Features table may be stale:** {'; '.join(state.stale)}. "
                "Refresh it (`tunebot refresh-features`) before trusting its rows."
            ),
        ]
    points = [(it.n, it.latency_ms) for it in state.iterations]
    assert state.baseline_ms is not None
    kept_ms: float = state.baseline_ms
    line = [kept_ms]
    for it in state.iterations:
        if it.verdict == "better" and it.latency_ms is not None:
            kept_ms = it.latency_ms
        line.append(kept_ms)
    chart = latency_chart(
        state.baseline_ms,
        points,
        state.best_ms,
        title=f"{model} end-to-end latency (ms)",
        best_so_far=line,
    ).replace('"latency (us)"', '"latency (ms)"')
    return "\n".join(lines) + f"\n\n{report.rstrip()}\n\n### Latency per iteration\n\n{chart}\n"
