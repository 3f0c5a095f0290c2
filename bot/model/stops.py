"""When a model run stops, and the evidence that says why (recorded with the stop).

The skill's four reasons plus the iteration limit, and two the loop needs besides:

- 达目标 (target met): the best latency is at or under stop.target_ms.
- 差距在噪声内 (within noise): the gap to the target is under the noise floor, or the last
  `patience` measured iterations each moved latency by less than the noise floor.
- 外部根因 (external root cause): nothing the analysis points to is left to try and the
  analysis of the best-so-far names a bottleneck outside the pipeline: exposed communication
  (HCCL) or host-bound dispatch (torch_npu / CANN). Named from the figures, never guessed.
- 硬件上限 (hardware limit): nothing the analysis points to is left and peak memory is at the
  device's capacity (the memory finding of the analysis).
- 迭代上限 (iteration limit): stop.max_iters iterations recorded.
- 特性耗尽 (settings exhausted): no untried setting fits.
- 已取消 (cancelled): `tunebot cancel` / `/tune cancel` asked the run to stop.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.features import tree
from bot.features.analysis import Analysis
from bot.model.rank import Ranking
from bot.model.spec import StopSpec
from bot.model.state import MEASURED, ModelState

TARGET_MET, WITHIN_NOISE, EXTERNAL, HARDWARE_LIMIT, MAX_ITERS, EXHAUSTED, CANCELLED = (
    "达目标",
    "差距在噪声内",
    "外部根因",
    "硬件上限",
    "迭代上限",
    "特性耗尽",
    "已取消",
)
STOP_REASONS = (TARGET_MET, WITHIN_NOISE, EXTERNAL, HARDWARE_LIMIT, MAX_ITERS, EXHAUSTED, CANCELLED)

# Findings of advise's decision tree that point outside the pipeline's own code.
_EXTERNAL = {
    "communication": "HCCL (communication not hidden by compute)",
    "operator.host_bound": "torch_npu / CANN host dispatch (the device waits on the host)",
}
_HARDWARE = {"memory": "device memory capacity"}


@dataclass
class Stop:
    reason: str
    evidence: str


def before_ranking(state: ModelState, stop: StopSpec) -> Stop | None:
    """Reasons that need no ranking: target, iteration limit, noise."""
    best = state.best_ms
    target = stop.target_ms
    if target is not None and best is not None and best <= target:
        return Stop(TARGET_MET, f"best {best:.2f} ms <= target {target:.2f} ms")
    if len(state.iterations) >= stop.max_iters:
        return Stop(
            MAX_ITERS,
            f"{len(state.iterations)} iterations recorded (stop.max_iters = {stop.max_iters})",
        )
    if target is not None and best is not None and (best - target) / target < stop.noise_floor:
        return Stop(
            WITHIN_NOISE,
            f"best {best:.2f} ms is {100 * (best - target) / target:.1f}% above the target "
            f"{target:.2f} ms, under the noise floor {100 * stop.noise_floor:.0f}%",
        )
    measured = [it for it in state.iterations if it.verdict in MEASURED]
    last = measured[-stop.patience :]
    if len(last) == stop.patience and all(
        it.verdict != "better" and it.step_gain is not None and abs(it.step_gain) < stop.noise_floor
        for it in last
    ):
        gains = ", ".join(f"iter {it.n} {100 * (it.step_gain or 0.0):+.1f}%" for it in last)
        return Stop(
            WITHIN_NOISE,
            f"the last {stop.patience} measured iterations moved latency by less than the "
            f"noise floor {100 * stop.noise_floor:.0f}%: {gains}",
        )
    return None


def after_ranking(ranking: Ranking, analysis: Analysis | None) -> Stop | None:
    """With the ranking of the best-so-far: outside causes once nothing recommended is left, or exhaustion."""
    if not ranking.tier1 and analysis is not None:
        fired = {f.branch: f for f in tree.walk_tree(analysis) if f.fired}
        for branch, where in _EXTERNAL.items():
            if branch in fired:
                return Stop(
                    EXTERNAL,
                    f"root cause outside the pipeline: {where}; {analysis.source}: "
                    f"{fired[branch].reason}; no untried setting addresses it",
                )
        for branch, what in _HARDWARE.items():
            if branch in fired:
                return Stop(
                    HARDWARE_LIMIT,
                    f"hardware limit: {what}; {analysis.source}: "
                    f"{fired[branch].reason}; no untried setting addresses it",
                )
    if not ranking.candidates:
        why = "; ".join(ranking.excluded) or "every listed value was tried"
        return Stop(EXHAUSTED, f"no untried setting fits ({why})")
    return None
