"""The typed configuration: `.tunebot.yml` (RepoConfig), per-op `tune.yaml` (OpConfig), and
the effective settings of one run. Every value here has passed the checks in bot/config/.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

REPO_CONFIG_FILE = ".tunebot.yml"
OP_CONFIG_FILE = "tune.yaml"

# Allowed values of the choice-valued keys (the latency backends come from their registry).
KERNEL_KINDS = ("vector", "cube", "mix")
ACCURACY_MODES = ("command", "harness")
LEVELS = ("L0", "L1", "L2")
PERMISSIONS = ("write", "maintain", "admin")
DTYPES = ("float16", "bfloat16", "float32", "float64")
FILESYSTEM_MODES = ("restricted", "open")


@dataclass(frozen=True)
class Knob:
    """One tunable symbol in an op's source, declared in tune.yaml.

    `name` is the symbol the transforms look for (module constant, factory
    default or call-site keyword). `strategy` maps it to a catalog entry
    ("block_size", "pipeline_depth", "multi_buffer", ...). `values` is the
    ordered space; the planner moves to neighbours in it. `divides` names
    another knob or integer the value must divide (e.g. a shape dimension).
    """

    name: str
    strategy: str
    values: tuple[int, ...]
    divides: int | None = None
    multiple_of: int | None = None


@dataclass(frozen=True)
class DeclaredShape:
    """A size the op runs with, declared by name outside the kernel: `M: 4096` in tune.yaml's
    `shapes:` or `M = 4096` in DESIGN.md's shapes section. It fills a size the kernel leaves
    open (`M = T.symbolic("M")`, a parameter bound at run time) for the kernel's own rules
    (bot/strategies/constraints.py); a size the kernel fixes itself is never overridden.
    """

    name: str
    values: tuple[int, ...]  # every size the op runs with under this name
    origin: str  # where it was declared, as a refusal names it: "tune.yaml shapes", "DESIGN.md"


@dataclass(frozen=True)
class AccuracySettings:
    mode: str = "command"  # "command": python <op>.py --level L0 ; "harness": kernel vs reference
    level: str = "L0"
    timeout_s: float = 120.0
    rtol: dict[str, float] = field(
        default_factory=lambda: {"float16": 1e-2, "bfloat16": 1e-2, "float32": 1e-4}
    )
    atol: dict[str, float] = field(
        default_factory=lambda: {"float16": 1e-2, "bfloat16": 1e-2, "float32": 1e-4}
    )
    min_cosine: float = 0.999
    repeats: int = (
        3  # extra L0 runs with fresh seeds once the first passes; a flip is recorded as flaky
    )


@dataclass(frozen=True)
class KernelLimits:
    """Caps on every kernel process (docs/measurement.md). None: tunebot's default; 0: no cap."""

    memory_mb: int | None = None  # default: 3/4 of the machine's memory
    cpu_s: float | None = None  # default: the run's timeout times the number of CPUs
    file_size_mb: int | None = None  # default: 4096
    filesystem: str = (
        "restricted"  # restricted: writes only to its temporary folder and caches; open
    )


MAX_REPEATS = 10_000  # timed calls per measurement: more only lengthens a run, the median CI is tight long before


@dataclass(frozen=True)
class LatencySettings:
    backend: str = "auto"  # auto | cpu | cuda | npu-msprof | npu-torch | command
    warmup: int = 5
    repeats: int = 30
    timeout_s: float = 300.0
    kernel_name: str | None = None  # msprof --kernel-name prefix; default: the @T.prim_func name
    command: tuple[str, ...] | None = (
        None  # backend "command": the team's benchmark (docs/measurement.md)
    )


@dataclass(frozen=True)
class OpConfig:
    """Everything the loop needs to know about one op. Paths are relative to the repo root."""

    project: str
    name: str
    dir: Path  # examples/<project>/<op>
    kernel_kind: str = "vector"  # vector | cube | mix
    entry: str = "kernel"  # function timed by the cpu/cuda backends
    inputs: str = "get_inputs"  # function returning the kernel's input tuple
    reference: str = "reference"  # function the harness compares against
    knobs: tuple[Knob, ...] = ()
    shapes: tuple[DeclaredShape, ...] = ()  # tune.yaml `shapes:`, then DESIGN.md's
    strategies: tuple[str, ...] | None = None  # None: every applicable catalog entry
    accuracy: AccuracySettings = field(default_factory=AccuracySettings)
    latency: LatencySettings = field(default_factory=LatencySettings)
    limits: KernelLimits = field(default_factory=KernelLimits)
    target_us: float | None = None  # from tune.yaml, else DESIGN.md's performance target
    max_iters: int | None = None  # overrides of the repo defaults
    patience: int | None = None
    noise_floor: float | None = None
    proposer: tuple[str, ...] | None = None  # argv of an external proposer

    @property
    def qualified(self) -> str:
        return f"{self.project}/{self.name}"

    @property
    def harness_functions(self) -> tuple[str, ...]:
        """The op file's functions a harness or backend calls by name (entry, inputs, reference),
        as tune.yaml names them."""
        return (self.entry, self.inputs, self.reference)

    @property
    def source(self) -> Path:
        return self.dir / f"{self.name}.py"

    @property
    def perf_dir(self) -> Path:
        return self.dir / "perf_opt"


# the functions a harness calls when tune.yaml does not rename them
DEFAULT_HARNESS: tuple[str, ...] = tuple(
    str(f.default) for f in fields(OpConfig) if f.name in ("entry", "inputs", "reference")
)


@dataclass(frozen=True)
class GithubSettings:
    min_permission: str = "write"  # write | maintain | admin
    labels: tuple[str, ...] = ("tunebot",)
    reviewers: tuple[str, ...] = ()  # empty: from CODEOWNERS
    ops: tuple[str, ...] = ()  # ops tuned on schedule / workflow_dispatch
    required_checks: tuple[
        str, ...
    ] = ()  # merge gate: these statuses/check runs must be present and green
    allow_no_checks: bool = (
        False  # merge gate: a head with no CI at all may merge (explicit opt-in)
    )
    max_parallel: int = 0  # tune matrix: jobs at once (0: one per op)
    runners: tuple[
        tuple[str, tuple[str, ...]], ...
    ] = ()  # (op | project | "default", runner labels)


@dataclass(frozen=True)
class RepoConfig:
    ops_root: str = "examples"
    branch_prefix: str = "tunebot"
    max_iters: int = 10
    patience: int = 3
    noise_floor: float = 0.03
    noise_warn: float = 0.10  # warn when the smallest gain a run can detect exceeds this
    target_us: float | None = None
    keep_branches: bool = False
    base_branch: str | None = None  # None: the branch checked out when the run starts
    proposer: tuple[str, ...] | None = None
    proposer_timeout_s: float = 600.0
    github: GithubSettings = field(default_factory=GithubSettings)


@dataclass(frozen=True)
class RunSettings:
    """Effective settings of one run: repo defaults <- op overrides <- command-line flags."""

    max_iters: int
    patience: int
    noise_floor: float
    target_us: float | None
    strategies: tuple[str, ...] | None
    noise_warn: float = 0.10  # the report warns when the smallest detectable gain exceeds this
