"""What a run starts from and what it delivers: the merged best, the delivery files, the verdict.

- A run starts from the best already merged on the base: `perf_opt/<op>.py` when the base
  holds one (re-measured as this run's baseline), else the op's own `<op>.py`. So a second
  run never re-finds the first run's change, and its gains are against what the base holds.
  A `<op>.py` edited after that merge is newer work than the merged best and is tuned instead.
- The delivery commit follows the seed's product structure (tests/data/seed): `<op>.py` (the
  best), one `<op>_opt_v<N>.py` per iteration of this run (older runs' extra ones are removed),
  `opt_log.md`, `baseline.py` (the source the baseline was measured on), plus a copy of
  results.jsonl and this op's own evidence file (one file per op: no two ops' proposals touch
  the same file).
- `run_verdict` decides the Stage Result verdict (bot/record/verdicts.py); only
  TUNING_COMPLETED is proposed. The other verdicts come with the reason a person reads.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot import run_state as rs
from bot.git import repository
from bot.record import verdicts
from bot.record.errors import RecordFormatError
from bot.record.opt_log import Conclusion, LogRow, OptLog, parse_opt_log, render_opt_log
from bot.record.report import CompletionReport, render_report
from bot.strategies.evidence import (
    EVIDENCE_DIR,
    EVIDENCE_PATH,
    Evidence,
    op_evidence_path,
)

if TYPE_CHECKING:  # the loop's run context; imported for types only (the loop imports this module)
    from bot.config.schema import OpConfig

REFERENCES = ("references/strategies.md",)
CANCELLED, TARGET_REACHED = "已取消", "达目标"


# ---------------------------------------------------------------- where a run starts


def start_source(repo, base_sha: str, op: OpConfig) -> tuple[str, str]:
    """(repo-relative path of the source this run tunes, a note saying why when it is not the obvious one).

    The merged best `perf_opt/<op>.py` when the base holds one, unless someone changed `<op>.py`
    after that best was merged: then their newer source is what is tuned."""
    merged = (op.perf_dir / f"{op.name}.py").as_posix()
    source = op.source.as_posix()
    if repository.read_file(repo, base_sha, merged, missing_ok=True) is None:
        return source, ""
    source_change, merged_change = (
        repository.last_commit_touching(repo, base_sha, source),
        repository.last_commit_touching(repo, base_sha, merged),
    )
    if (
        source_change
        and merged_change
        and not repository.is_ancestor(repo, source_change, merged_change)
    ):
        return source, (
            f"{source} changed after the merged best {merged} (in {source_change[:10]}), "
            f"so this run tunes {source}"
        )
    return merged, ""


def merged_latency(repo, base_sha: str, op: OpConfig) -> float | None:
    """The final latency the merged opt_log.md recorded for the merged best (None if unknown)."""
    text = repository.read_file(
        repo, base_sha, (op.perf_dir / "opt_log.md").as_posix(), missing_ok=True
    )
    if text is None:
        return None
    try:
        log = parse_opt_log(text)
    except (
        RecordFormatError
    ):  # a hand-edited log that no longer parses: the re-measure is what counts
        return None
    return log.conclusion.final_us if log.conclusion else None


# ---------------------------------------------------------------- evidence


def evidence_at(repo, sha: str) -> Evidence:
    """Every op's evidence at `sha` summed (and the older shared file), for planning."""
    files = {
        path: repository.read_file(repo, sha, path)
        for path in repository.list_files(repo, sha, EVIDENCE_DIR)
        if path.endswith(".json")
    }
    files[EVIDENCE_PATH] = repository.read_file(repo, sha, EVIDENCE_PATH, missing_ok=True)
    return Evidence.combined(files)


def op_evidence(repo, sha: str, op: OpConfig, state: rs.RunState) -> tuple[str, bytes]:
    """This op's evidence file: its tallies at `sha` plus every iteration of this run."""
    path = op_evidence_path(op.project, op.name)
    evidence = Evidence.load(repository.read_file(repo, sha, path, missing_ok=True), path)
    for it in state.iterations:
        evidence.record(it.strategy, op.kernel_kind, it.gain or 0.0, it.verdict == "better")
    return path, evidence.dumps().encode()


# ---------------------------------------------------------------- verdict


def run_verdict(state: rs.RunState) -> tuple[str, str]:
    """(Stage Result verdict, why nothing is proposed; "" for TUNING_COMPLETED)."""
    reason = (state.stop or {}).get("reason")
    n = len(state.iterations)
    if reason == CANCELLED:
        return verdicts.CANCELLED, (
            f"the run was cancelled after {n} iteration{'s' if n != 1 else ''}; "
            "a cancelled run proposes nothing"
        )
    base, best = state.baseline_us, state.best_us
    if state.best_iteration is not None and base is not None and best is not None and best < base:
        return verdicts.COMPLETED, ""
    if not state.iterations:
        if reason == TARGET_REACHED:
            target = ((state.start or {}).get("settings") or {}).get("target_us")
            aim = f" ({target:g} us)" if target is not None else ""
            return verdicts.TARGET_ALREADY_MET, (
                f"the baseline ({base:.2f} us) already meets the target{aim}; nothing was tried"
            )
        tried = (
            f" ({state.rejections} proposed changes were refused before evaluation)"
            if state.rejections
            else ""
        )
        return verdicts.NOTHING_TO_TRY, f"no strategy had a move for this op{tried}"
    measured = [it for it in state.iterations if it.gain_vs_best_pct is not None]
    closest = max(measured, key=lambda it: it.gain_vs_best_pct or 0.0, default=None)
    detail = (
        f"; closest: iter {closest.n} ({closest.change}) {closest.gain_vs_best_pct:+.1f}%: {closest.reason}"
        if closest
        else "; none could be measured"
    )
    return verdicts.NO_GAIN, (
        f"none of the {n} variants beat the baseline ({base:.2f} us) beyond the "
        f"measured noise{detail}"
    )


# ---------------------------------------------------------------- records


def reason_cell(it: rs.IterationView) -> str:
    return it.reason


def log_rows(state: rs.RunState) -> list[LogRow]:
    return [
        LogRow(
            iter=it.n,
            strategy=f"{it.strategy} {it.change}",
            latency_us=it.latency_us,
            gain_pct=it.gain_pct,
            accuracy=it.accuracy,  # type: ignore[arg-type]
            verdict=it.verdict,
            reason=reason_cell(it),
        )
        for it in state.iterations
    ]


def baseline_label(op: OpConfig, path: str) -> str:
    """The 基线 来源 value: the seed's `<op>.py`, or where the merged best lives."""
    return f"{op.name}.py" if path == op.source.as_posix() else path


def conclusion(op: OpConfig, state: rs.RunState) -> Conclusion:
    """The seed's 结论: 最优版本 is always `<op>.py` (perf_opt/<op>.py) with `(iter N)` or `(baseline)`."""
    return Conclusion(
        best_source=f"{op.name}.py",
        best_iter=state.best_iteration,
        final_us=state.best_us,
        total_gain_pct=rs.gain_pct(state.baseline_us, state.best_us) or 0.0,
        stop_reason=state.stop["reason"],
    )


def completion_report(
    op: OpConfig,
    state: rs.RunState,
    noise_floor: float,
    consulted: list[str],
    noise_warn: float = 0.10,
) -> CompletionReport:
    verdict, why = run_verdict(state)
    improvement = rs.gain_pct(state.baseline_us, state.best_us) or 0.0
    issues = ([f"no proposal: {why}"] if why else []) + _issues(state, noise_floor)
    warning = rs.noise_warning(
        state, noise_warn
    )  # "this runner is too noisy to see gains below ..."
    if warning:
        issues.append(warning)
    best = f"iter {state.best_iteration}" if state.best_iteration else "the baseline"
    summary = (
        f"{len(state.iterations)} iterations on {op.qualified}; best is {best} at {state.best_us:.2f} us "
        f"({improvement:+.1f}% vs baseline), stopped: {verdicts.stop_reason_text(state.stop['reason'])}"
        f"{_drift_clause(state)}{_detectable_clause(state)}."
    )
    return CompletionReport(
        project=op.project,
        operator=op.name,
        iterations=len(state.iterations),
        output=(op.perf_dir / f"{op.name}.py").as_posix(),
        baseline_latency=state.baseline_us,
        final_latency=state.best_us,
        improvement=improvement,
        stop_reason=state.stop["reason"],
        skills_consulted=consulted or ["none"],
        summary=summary,
        issues=issues or ["none"],
        verdict=verdict,
    )


def _detectable_clause(state: rs.RunState) -> str:
    detectable = state.smallest_detectable
    return f"; smallest detectable gain {detectable * 100:.1f}%" if detectable is not None else ""


def _drift_clause(state: rs.RunState) -> str:
    drift = (state.baseline_end or {}).get("drift_pct")
    return f"; baseline re-measured at the end drifted {drift:+.1f}%" if drift is not None else ""


def _issues(state: rs.RunState, noise_floor: float) -> list[str]:
    found = [
        f"iter {it.n} ({it.strategy}): {it.verdict}"
        for it in state.iterations
        if it.verdict in ("fail_l0", "timeout", "error")
    ]
    drift = (state.baseline_end or {}).get("drift_pct")
    if (
        drift is not None and abs(drift) >= noise_floor * 100
    ):  # drift as large as a gain we would accept
        found.append(
            f"baseline drifted {drift:+.1f}% between start and end of the run; "
            "treat small gains with care"
        )
    return found


_VARIANT = re.compile(r"_opt_v(\d+)\.py$")


def delivery_files(
    repo, base_sha: str, op: OpConfig, state: rs.RunState, results: bytes
) -> dict[str, bytes | None]:
    """The files of the delivery commit (on top of the best variant's commit); None removes a file."""
    rel = lambda name: (op.perf_dir / name).as_posix()
    baseline_path = state.baseline["path"]
    opt_log = OptLog(
        op=op.name,
        baseline_us=state.baseline_us,
        baseline_source=baseline_label(op, baseline_path),
        rows=log_rows(state),
        conclusion=conclusion(op, state),
    )
    files: dict[str, bytes | None] = {
        # bytes as committed: a source with a PEP 263 coding line keeps its encoding
        rel(f"{op.name}.py"): repository.read_bytes(repo, state.best_sha, state.best_path),
        rel("baseline.py"): repository.read_bytes(repo, base_sha, baseline_path),
        rel("opt_log.md"): render_opt_log(opt_log).encode(),
        rel("results.jsonl"): results,
    }
    ours = {it.path for it in state.iterations}
    for it in state.iterations:
        files[it.path] = repository.read_bytes(repo, it.sha, it.path)
    prefix = rel(f"{op.name}_opt_v")
    for path in repository.list_files(repo, state.best_sha, op.perf_dir.as_posix()):
        if path.startswith(prefix) and _VARIANT.search(path) and path not in ours:
            files[path] = None  # an earlier run's variant: its opt_log row is gone, so is the file
    path, data = op_evidence(repo, base_sha, op, state)
    files[path] = data
    return files


def report_text(
    op: OpConfig, state: rs.RunState, noise_floor: float, worktree, noise_warn: float = 0.10
) -> str:
    # The planner works from the strategy catalog, whose readable form is references/strategies.md.
    consulted = [p for p in REFERENCES if (worktree / p).exists()]
    return render_report(completion_report(op, state, noise_floor, consulted, noise_warn))


# The exception line that ended the process; warnings printed earlier (torch's "Failed to initialize
# NumPy: No module named 'numpy'") also name modules but are not why the op failed.
_MISSING_MODULE = re.compile(
    r"^(?:ModuleNotFoundError|ImportError): No module named '([A-Za-z0-9_.]+)'", re.M
)


def missing_module(tail: str) -> str | None:
    """The top-level module an op failed to import (e.g. 'tilelang', 'torch_npu'), if that was the failure."""
    found = _MISSING_MODULE.findall(tail or "")
    return found[-1].split(".")[0] if found else None
