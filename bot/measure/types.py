"""Plain records produced by measurement. CONTRACT shared with loop and record.

All of them serialize with `dataclasses.asdict` into results.jsonl.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Status = Literal["pass", "fail", "timeout", "error"]
LatencyStatus = Literal["ok", "timeout", "error", "skipped"]


@dataclass
class AccuracyResult:
    status: Status
    mode: str  # "command" | "harness"
    command: list[str]
    duration_s: float = 0.0
    tail: str = ""  # last lines of stdout+stderr
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    cosine: float | None = None
    reason: str = (
        ""  # one line: why it failed ("exit code 1", "2 of 4096 elements beyond tolerance")
    )
    details: dict = field(default_factory=dict)  # harness: per-output errors and tolerances

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass
class LatencyResult:
    status: LatencyStatus
    backend: str
    samples_us: list[float] = field(default_factory=list)
    median_us: float | None = None
    min_us: float | None = None
    q1_us: float | None = None
    q3_us: float | None = None
    ci_low_us: float | None = None  # confidence interval of the median
    ci_high_us: float | None = None
    command: list[str] = field(default_factory=list)
    tail: str = ""
    suspect: bool = False  # e.g. a down-clocked msprof sample
    notes: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # backend specifics: block dim, op type, freqs

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.median_us is not None

    @property
    def spread(self) -> float | None:
        """Relative IQR: (q3 - q1) / median."""
        if self.median_us and self.q1_us is not None and self.q3_us is not None:
            return (self.q3_us - self.q1_us) / self.median_us
        return None


@dataclass
class Environment:
    backend: str
    device: str | None = None
    cann_version: str | None = None
    torch_version: str | None = None
    torch_npu_version: str | None = None
    driver_version: str | None = None
    cpu_model: str | None = None
    python_version: str | None = None
    git_sha: str | None = None  # the variant's commit (or blob) sha
    command: list[str] = field(default_factory=list)


@dataclass
class Decision:
    """Whether a candidate beats the best-so-far, and why."""

    better: bool
    gain: float  # relative: (best - candidate) / best; positive = faster
    threshold: float  # max(noise floor, measured noise) actually applied
    noise: float  # the measured relative noise
    remeasured: bool  # an interleaved A/B re-measurement decided it
    reason: str
    best_us: float | None = None  # medians the decision used (after any re-measurement)
    candidate_us: float | None = None
    details: dict = field(
        default_factory=dict
    )  # first-pass figures, per-round medians of a re-measure
    detectable: float | None = (
        None  # the smallest gain this decision could have called better (relative)
    )
