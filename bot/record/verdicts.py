"""Words for how a run ended: the Stage Result verdict values and the stop reasons in English.

The seed's completion report has one verdict, TUNING_COMPLETED, and its stop reasons are
Chinese terms. A run that found nothing, was cancelled or had nothing to try must not call
itself completed, so the verdict takes one of the values below (docs/records.md). The
stop reason stays the seed's term; `stop_reason_text` puts the English beside it.
"""

from __future__ import annotations

# Stage Result verdicts; only TUNING_COMPLETED opens a proposal.
COMPLETED = "TUNING_COMPLETED"  # a variant beats what the base holds, beyond the measured noise
NO_GAIN = "TUNING_NO_GAIN"  # variants were measured; none beat the baseline beyond the noise
TARGET_ALREADY_MET = "TUNING_TARGET_ALREADY_MET"  # the baseline met the target before any iteration
NOTHING_TO_TRY = "TUNING_NOTHING_TO_TRY"  # the planner had no move for this op
CANCELLED = "TUNING_CANCELLED"  # a person stopped the run; nothing is proposed whatever it found

VERDICTS: dict[str, str] = {
    COMPLETED: "a variant beats what the base holds beyond the measured noise; it is proposed",
    NO_GAIN: "no variant beat the baseline beyond the measured noise; nothing is proposed",
    TARGET_ALREADY_MET: "the baseline already meets the target, so nothing was tried or proposed",
    NOTHING_TO_TRY: "no strategy had a move for this op; nothing is proposed",
    CANCELLED: "the run was cancelled; nothing is proposed, its branches and records stay",
}

# Same terms as bot.loop.StopReason and bot.record.opt_log.STOP_REASONS.
STOP_REASON_EN: dict[str, str] = {
    "达目标": "target reached",
    "迭代上限": "iteration limit reached",
    "连续无提升": "no gain from several different things tried",
    "策略耗尽": "nothing left to try",
    "已取消": "cancelled",
}


def stop_reason_text(
    reason: str,
    *,
    max_iters: int | None = None,
    patience: int | None = None,
    target_us: float | None = None,
) -> str:
    """'连续无提升 (no gain from 3 different things tried)': the seed's term with its English meaning."""
    english = STOP_REASON_EN.get(reason)
    if english is None:
        return reason
    if reason == "连续无提升" and patience:
        english = f"no gain from {patience} different things tried, patience {patience}"
    elif reason == "迭代上限" and max_iters:
        english = f"iteration limit {max_iters} reached"
    elif reason == "达目标" and target_us is not None:
        english = f"target {target_us:g} us reached"
    return f"{reason} ({english})"
