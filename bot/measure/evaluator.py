"""The single facade the loop uses to measure a variant.

Every call runs the kernel
in a sandboxed subprocess with a timeout; misbehaviour comes back as a result
(status timeout/error/fail), never as an exception, except for MeasureError
when the tool itself is missing (e.g. no msprof on PATH).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Literal

from bot.config.schema import OP_CONFIG_FILE, OpConfig
from bot.errors import ConfigError
from bot.measure import accuracy as acc
from bot.measure import decide as decide_mod
from bot.measure import environment as env_mod
from bot.measure import pairs as pairs_mod
from bot.measure.backends.base import Backend, Request
from bot.measure.backends.msprof import kernel_name_for
from bot.measure.backends.registry import REGISTRY, detect
from bot.measure.confine import Limits
from bot.measure.sandbox import kernel_limits
from bot.measure.types import AccuracyResult, Decision, Environment, LatencyResult

DEFAULT_FILE_SIZE_MB = 4096
MEMORY_SHARE = 0.75  # default memory cap: this share of the machine's memory


def machine_memory_mb() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        return None


def l0_seeds(source_text: str, count: int) -> list[int]:
    """Fresh seeds for the repeated L0 runs: derived from the variant's text, so a rerun of the
    same variant uses the same inputs (reproducible) and different variants use different ones."""
    digest = hashlib.sha256(source_text.encode("utf-8", "surrogateescape")).digest()
    return [
        1 + int.from_bytes(digest[4 * i : 4 * i + 4], "big") % 1_000_000
        for i in range(min(count, 8))
    ] + [1_000_001 + i for i in range(max(0, count - 8))]


class Evaluator:
    def __init__(
        self, op: OpConfig, workdir: Path, memory_limit_mb: int | None = None, rounds: int = 5
    ) -> None:
        """`workdir` is the worktree root; variant paths are given relative to it or absolute.

        `memory_limit_mb` caps each child's address space (RLIMIT_AS); `rounds` is
        how many A/B pairs an interleaved re-measure runs.
        """
        self.op = op
        self.workdir = workdir
        self.memory_limit_mb = memory_limit_mb
        self.rounds = rounds
        self._backend: str | None = None
        self._static_env: Environment | None = None
        self._commands: dict[Path, list[str]] = {}
        # every source measured more than once tells how much one measurement moves between processes
        self.spread = decide_mod.SpreadTracker()
        self.pair_spread = pairs_mod.PairSpread()  # learned by decide_in_pairs
        self._facts: dict = {}  # environment facts a `command` benchmark reported
        # the best's side of the last `compare`'s first pair (backends with `pairs`), else None:
        # a real measurement of the best, timed side by side with the candidate
        self.paired_best: LatencyResult | None = None

    # -- paths and settings ------------------------------------------------
    def _abs(self, source: Path) -> Path:
        source = Path(source)
        return (source if source.is_absolute() else Path(self.workdir) / source).resolve()

    def _cwd(self, source: Path) -> Path:
        op_dir = Path(self.workdir) / self.op.dir
        return op_dir if op_dir.is_dir() else source.parent

    def _config_file(self) -> str:
        return str(self.op.dir / OP_CONFIG_FILE)

    @property
    def backend(self) -> str:
        """The configured backend, or the detected one for 'auto' (detected once)."""
        if self._backend is None:
            name = self.op.latency.backend
            if name == "auto":
                name = detect()
            elif name not in REGISTRY:
                raise ConfigError(
                    self._config_file(),
                    "latency.backend",
                    f"unknown backend '{name}'",
                    "use one of auto, " + ", ".join(REGISTRY),
                )
            self._backend = name
        return self._backend

    @property
    def _impl(self) -> Backend:
        return REGISTRY[self.backend]

    @property
    def pairs(self) -> bool:
        """Whether `compare` times the best and the candidate side by side (cpu backend)."""
        return self._impl.pairs

    def request(self, cwd: Path, repeats: int | None = None) -> Request:
        """What every backend needs to measure one of this op's variants from `cwd`."""
        lat = self.op.latency
        return Request(
            entry=self.op.entry,
            inputs=self.op.inputs,
            warmup=lat.warmup,
            repeats=lat.repeats if repeats is None else repeats,
            timeout_s=lat.timeout_s,
            cwd=cwd,
            memory_limit_mb=self.memory_limit_mb,
            kernel_name=lat.kernel_name,
            command=tuple(lat.command) if lat.command else None,
            op_name=self.op.name,
            config_file=self._config_file(),
        )

    def kernel_name(self, source: Path) -> str:
        """msprof's --kernel-name prefix: tune.yaml's, else the @T.prim_func name, else the op name."""
        path = self._abs(source)
        return kernel_name_for(path, self.request(self._cwd(path)))

    def limits(self, timeout_s: float) -> Limits:
        """The caps of one kernel run (tune.yaml `limits`, else the defaults of docs/measurement.md)."""
        cfg = self.op.limits
        memory = self.memory_limit_mb or cfg.memory_mb
        if memory is None:
            total = machine_memory_mb()
            memory = int(total * MEMORY_SHARE) if total else None
        # no CPU-time cap unless asked: with RLIMIT_CPU set, Linux's per-call process CPU clock (which
        # the cpu backend decides on) reads 0 for short calls; the wall-clock timeout bounds a run anyway
        cpu_s = cfg.cpu_s
        size = cfg.file_size_mb if cfg.file_size_mb is not None else DEFAULT_FILE_SIZE_MB
        # GPU drivers reserve huge address ranges: cap what is allocated instead (confine.py)
        kind = self._memory_kind()
        return Limits(
            memory_mb=memory or None,
            memory_kind=kind,
            cpu_s=cpu_s or None,
            file_size_mb=size or None,
            writable=() if cfg.filesystem == "restricted" else None,
        )

    def _memory_kind(self) -> Literal["as", "data"]:
        try:
            return self._impl.memory_kind
        except ConfigError:
            return "as"

    # -- the contract --------------------------------------------------------
    def accuracy(self, source: Path, seed: int | None = None) -> AccuracyResult:
        """L0 gate of the kernel in `source` (command or harness mode per op.accuracy).

        With `seed` None, a pass is confirmed by `accuracy.repeats` more runs on fresh seeds
        (`l0_seeds`); if any of them does not pass, the result is a "fail" marked flaky in
        `details` (the kernel is right only some of the time: never adopted)."""
        first = self._accuracy_once(source, 0 if seed is None else seed)
        if seed is not None or not first.passed or self.op.accuracy.repeats <= 0:
            return first
        path = self._abs(source)
        try:
            text = path.read_bytes().decode("utf-8", "surrogateescape")
        except OSError:
            text = str(path)
        runs = {0: first.status}
        for extra in l0_seeds(text, self.op.accuracy.repeats):
            again = self._accuracy_once(source, extra)
            runs[extra] = again.status
            if not again.passed:
                flips = ", ".join(f"seed {k}: {v}" for k, v in runs.items())
                return replace(
                    again,
                    status="fail",
                    reason=f"flaky L0: {flips} ({again.reason or again.status})",
                    details={**again.details, "flaky": True, "l0_runs": runs},
                )
        return replace(first, details={**first.details, "l0_runs": runs})

    def _accuracy_once(self, source: Path, seed: int) -> AccuracyResult:
        path = self._abs(source)
        settings = self.op.accuracy
        with kernel_limits(self.limits(settings.timeout_s)):
            if settings.mode == "command":
                result = acc.l0_command(
                    path,
                    self._cwd(path),
                    settings.level,
                    settings.timeout_s,
                    self.memory_limit_mb,
                    seed=seed,
                )
            elif settings.mode == "harness":
                result = acc.l0_harness(
                    path,
                    self._cwd(path),
                    settings,
                    self.op.entry,
                    self.op.inputs,
                    self.op.reference,
                    seed=seed,
                    memory_limit_mb=self.memory_limit_mb,
                )
            else:
                raise ConfigError(
                    self._config_file(),
                    "accuracy.mode",
                    f"unknown mode '{settings.mode}'",
                    "use command (python <op>.py --level L0) or harness (kernel vs reference)",
                )
        self._commands.setdefault(path, result.command)
        return result

    def latency(self, source: Path) -> LatencyResult:
        """Kernel-only latency of `source` with the op's backend (auto-detected if 'auto')."""
        with kernel_limits(self.limits(self.op.latency.timeout_s)):
            return self._latency(source)

    def _latency(self, source: Path) -> LatencyResult:
        path = self._abs(source)
        result = self._impl.measure(path, self.request(self._cwd(path)))
        self._commands[path] = result.command
        self._track(path, result)
        self._facts.update(result.extra.get("environment") or {})
        return result

    def latency_pair(self, a: Path, b: Path) -> tuple[LatencyResult, LatencyResult]:
        """Both variants timed side by side in one run, in turns (backends with `pairs`).

        Each side gets half the op's repeats (at least 5): one pair costs the kernel time of
        one ordinary measurement.
        """
        pa, pb = self._abs(a), self._abs(b)
        with kernel_limits(self.limits(self.op.latency.timeout_s)):
            ra, rb = self._pair(pa, pb)
        self._commands[pa] = self._commands[pb] = ra.command
        for path, result in ((pa, ra), (pb, rb)):
            self._track(path, result)
        return ra, rb

    def _pair(self, pa: Path, pb: Path) -> tuple[LatencyResult, LatencyResult]:
        request = self.request(self._cwd(pa), repeats=max(5, self.op.latency.repeats // 2))
        return self._impl.measure_pair(pa, pb, request)

    def _track(self, path: Path, result: LatencyResult) -> None:
        if result.ok:
            with contextlib.suppress(OSError):  # a variant gone since: nothing to learn from it
                self.spread.add(hashlib.sha256(path.read_bytes()).hexdigest(), result.median_us)

    def decide(
        self,
        best_source: Path,
        best: LatencyResult,
        candidate_source: Path,
        candidate: LatencyResult,
        noise_floor: float,
    ) -> Decision:
        """Better only if gain >= max(noise_floor, measured noise); re-measures A/B/A/B when close.

        The between-process spread learned from this evaluator's repeated measurements sets the
        first-look acceptance and the decision's `detectable` gain.
        """
        rule = decide_mod.Rule(noise_floor=noise_floor, rounds=self.rounds)
        return decide_mod.decide(
            self._abs(best_source),
            best,
            self._abs(candidate_source),
            candidate,
            self.latency,
            rule,
            spread=self.spread.spread(),
            pair=self.latency_pair if self._impl.pairs else None,
        )

    def compare(
        self,
        best_source: Path,
        best: LatencyResult | None,
        candidate_source: Path,
        noise_floor: float,
    ) -> tuple[LatencyResult, Decision | None]:
        """Measure a candidate and decide whether it beats the best: (its latency, the decision).

        Backends with `pairs` (cpu): both are timed side by side from the first measurement
        on (`pairs.decide_in_pairs`); the others measure the candidate alone and apply `decide`
        against the best's recorded result (`best`: None only with pairs, which time the best
        anew). No decision when the candidate has no latency. Afterwards `paired_best` holds the
        best's side of the first pair (None without pairs).
        """
        self.paired_best = None
        if self._impl.pairs:
            rule = decide_mod.Rule(noise_floor=noise_floor)
            first: list[LatencyResult] = []

            def pair(a: Path, b: Path) -> tuple[LatencyResult, LatencyResult]:
                ra, rb = self.latency_pair(a, b)
                if not first:  # decide_in_pairs times (best, candidate) first
                    first.append(ra)
                return ra, rb

            latency, decision = pairs_mod.decide_in_pairs(
                self._abs(best_source), self._abs(candidate_source), pair, rule, self.pair_spread
            )
            self.paired_best = first[0] if first else None
            return latency, decision if latency.ok else None
        if best is None:
            raise ValueError("a backend without pairs compares with the best's recorded latency")
        latency = self.latency(candidate_source)
        if not latency.ok:
            return latency, None
        return latency, self.decide(best_source, best, candidate_source, latency, noise_floor)

    def environment(self, source: Path, git_sha: str | None) -> Environment:
        """Backend, device, CANN/torch/torch_npu/driver versions, CPU model, sha, command line."""
        if self._static_env is None:
            self._static_env = env_mod.capture(self.backend, device=self._impl.device)
        path = self._abs(source)
        command = self._commands.get(path) or [sys.executable, str(path)]  # not measured yet
        # facts a benchmark command reported about its own machine win over what we probed here
        known = {f.name for f in fields(Environment)} - {"backend", "git_sha", "command"}
        reported = {k: str(v) for k, v in self._facts.items() if k in known}
        return replace(self._static_env, git_sha=git_sha, command=list(command), **reported)

    @staticmethod
    def drift(start: LatencyResult, end: LatencyResult) -> float | None:
        """Baseline re-measured at the end vs the start of a run (positive: slower at the end)."""
        return decide_mod.drift(start, end)
