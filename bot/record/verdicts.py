"""Words for how a run ended: the Stage Result verdict values and the stop reasons in English.

The seed's completion report has one verdict, TUNING_COMPLETED, and its stop reasons are
Chinese terms. A run that found nothing, was cancelled or had nothing to try must not call
itself completed, so the verdict takes one of the values below (docs/records.md). The
stop reason stays the seed's term; `bot.run.stops.stop_reason_text` puts the English beside it.
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
