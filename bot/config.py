"""`.tunebot.yml` (repo level) and per-op `tune.yaml`: schema, defaults, clear errors.

CONTRACT (used by loop, cli, strategies, measure, events): the dataclasses and
load_repo_config, list_ops, resolve_op, load_op_config, design_target_us,
effective_settings. Never reads the network. Reference: docs/config.md.
"""

from __future__ import annotations

import difflib
import keyword
import math
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import NoReturn

import yaml

from bot.errors import ConfigError, OpNotFound
from bot.measure.backends.registry import REGISTRY

REPO_CONFIG_FILE = ".tunebot.yml"
OP_CONFIG_FILE = "tune.yaml"


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
    def source(self) -> Path:
        return self.dir / f"{self.name}.py"

    @property
    def perf_dir(self) -> Path:
        return self.dir / "perf_opt"


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


# ---------------------------------------------------------------- implementation
#
# Everything below reads local files only. Every user mistake becomes a
# ConfigError (file, key, problem, fix) or an OpNotFound, never a traceback.

# One part of an op name or ops_root path. Deliberately narrow: no separators,
# no shell or glob characters, so a name can never leave the ops root.
NAME_PART = re.compile(r"^[A-Za-z0-9_.-]+$")
KERNEL_KINDS = ("vector", "cube", "mix")
ACCURACY_MODES = ("command", "harness")
LEVELS = ("L0", "L1", "L2")
BACKENDS = ("auto", *REGISTRY)  # latency.backend: auto or a registered backend
PERMISSIONS = ("write", "maintain", "admin")
DTYPES = ("float16", "bfloat16", "float32", "float64")

_OP_KEYS = (
    "kernel_kind",
    "entry",
    "inputs",
    "reference",
    "knobs",
    "strategies",
    "accuracy",
    "latency",
    "limits",
    "target_us",
    "max_iters",
    "patience",
    "noise_floor",
    "proposer",
)
_KNOB_KEYS = ("name", "strategy", "values", "divides", "multiple_of")
_ACCURACY_KEYS = ("mode", "level", "timeout_s", "rtol", "atol", "min_cosine", "repeats")
_LIMIT_KEYS = ("memory_mb", "cpu_s", "file_size_mb", "filesystem")
_LATENCY_KEYS = ("backend", "warmup", "repeats", "timeout_s", "kernel_name", "command")
_REPO_KEYS = (
    "ops_root",
    "branch_prefix",
    "defaults",
    "keep_branches",
    "base_branch",
    "proposer",
    "proposer_timeout_s",
    "github",
)
_DEFAULTS_KEYS = ("max_iters", "patience", "noise_floor", "noise_warn", "target_us")
_GITHUB_KEYS = (
    "min_permission",
    "labels",
    "reviewers",
    "ops",
    "required_checks",
    "allow_no_checks",
    "max_parallel",
    "runners",
)
RUNNER_LABEL = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


class OpNameError(OpNotFound):
    """OpNotFound with a sharper message: a refused name, or close-match suggestions.

    Subclasses OpNotFound so callers (exit code 2) need not know it exists.
    """

    def __init__(
        self,
        name: str,
        candidates: list[str],
        ambiguous: bool = False,
        suggestions: list[str] | None = None,
        problem: str | None = None,
    ) -> None:
        super().__init__(name, candidates, ambiguous)
        self.suggestions = list(suggestions or [])
        self.problem = problem
        if problem:
            message = (
                f"invalid op name {name!r}: {problem}. Fix: name an op as <op> or <project>/<op>, "
                "each part made of letters, digits, '_', '.' and '-'"
            )
        else:
            message = str(self)
            if self.suggestions:
                message += f". Did you mean: {', '.join(self.suggestions)}?"
        self.args = (message,)


# ---------------------------------------------------------------- YAML reading


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen: dict[object, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # unhashable key: let the base class report it
                    break
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {key!r} (first defined at line {first})",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path, shown: str) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            shown,
            "(file)",
            f"not UTF-8 text ({exc.reason} at byte {exc.start})",
            "save the file as UTF-8",
        ) from None
    except OSError as exc:
        raise ConfigError(
            shown, "(file)", f"cannot be read ({exc.strerror})", "check that it is a readable file"
        ) from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        column = mark.column + 1 if mark else 0
        problem = exc.problem or exc.context or "syntax error"
        raise ConfigError(
            shown,
            f"line {line}",
            f"not valid YAML: {problem} (line {line}, column {column})",
            f"correct line {line}: indent with spaces, write `key: value`, "
            "and quote text that contains ':' or '#'",
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(
            shown, "(file)", f"not valid YAML: {exc}", "correct the YAML syntax"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            shown,
            "(top level)",
            f"must be a mapping of keys to values, got {_kind(data)}",
            "write one `key: value` per line (see docs/config.md)",
        )
    return data


def _kind(value: object) -> str:
    """How a YAML value reads to a person, for 'expected X, got Y' messages."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"true/false ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the text {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


@dataclass(frozen=True)
class _Checker:
    """Typed reads of one file's values; every failure names the file, the key and a fix."""

    file: str

    def fail(self, key: str, problem: str, fix: str) -> NoReturn:
        raise ConfigError(self.file, key, problem, fix)

    def known_keys(
        self,
        data: dict,
        allowed: tuple[str, ...],
        prefix: str = "",
        hints: dict[str, str] | None = None,
    ) -> None:
        for key in data:
            if not isinstance(key, str):
                self.fail(
                    f"{prefix}{key}",
                    f"keys must be text, got {_kind(key)}",
                    "quote the key or rename it",
                )
            if key in allowed:
                continue
            if hints and key in hints:
                self.fail(f"{prefix}{key}", "not allowed here", hints[key])
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            if close:
                fix = f"did you mean '{prefix}{close[0]}'?"
            else:
                fix = f"remove it; known keys here: {', '.join(allowed)}"
            self.fail(f"{prefix}{key}", "unknown key", fix)

    def mapping(self, value: object, key: str) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(
                key,
                f"expected a mapping of keys to values, got {_kind(value)}",
                f"write `{key.rsplit('.', 1)[-1]}:` followed by indented `key: value` lines",
            )
        return value

    def integer(
        self,
        value: object,
        key: str,
        minimum: int | None = None,
        example: int = 1,
        maximum: int | None = None,
    ) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(
                key,
                f"expected a whole number, got {_kind(value)}",
                f"write e.g. `{_leaf(key)}: {example}`",
            )
        if minimum is not None and value < minimum:
            self.fail(key, f"must be at least {minimum}, got {value}", f"use a value >= {minimum}")
        if maximum is not None and value > maximum:
            self.fail(key, f"must be at most {maximum}, got {value}", f"use a value <= {maximum}")
        return value

    def number(
        self,
        value: object,
        key: str,
        minimum: float | None = None,
        above: float | None = None,
        below: float | None = None,
        at_most: float | None = None,
        example: str = "1.0",
        fix: str | None = None,
    ) -> float:
        # PyYAML reads `1e-4` (no dot) as text; accept plain numeric text so users are not punished for it.
        if isinstance(value, str) and _FLOAT_TEXT.match(value.strip()):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            self.fail(
                key,
                f"expected a number, got {_kind(value)}",
                fix or f"write e.g. `{_leaf(key)}: {example}`",
            )
        number = float(value)
        if not math.isfinite(number):  # .inf would reach results.jsonl, which is strict JSON
            self.fail(
                key,
                f"must be a finite number, got {number:g}",
                fix or f"write e.g. `{_leaf(key)}: {example}`",
            )
        if minimum is not None and number < minimum:
            self.fail(
                key, f"must be >= {minimum:g}, got {number:g}", fix or f"use a value >= {minimum:g}"
            )
        if above is not None and number <= above:
            self.fail(
                key, f"must be > {above:g}, got {number:g}", fix or f"use a value > {above:g}"
            )
        if below is not None and number >= below:
            self.fail(
                key, f"must be < {below:g}, got {number:g}", fix or f"use a value < {below:g}"
            )
        if at_most is not None and number > at_most:
            self.fail(
                key, f"must be <= {at_most:g}, got {number:g}", fix or f"use a value <= {at_most:g}"
            )
        return number

    def boolean(self, value: object, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(
                key,
                f"expected true or false, got {_kind(value)}",
                f"write `{_leaf(key)}: true` or `false`",
            )
        return value

    def text(
        self,
        value: object,
        key: str,
        choices: tuple[str, ...] | None = None,
        identifier: bool = False,
    ) -> str:
        if not isinstance(value, str) or not value.strip():
            what = f"one of {', '.join(choices)}" if choices else "non-empty text"
            self.fail(
                key,
                f"expected {what}, got {_kind(value)}",
                f"write e.g. `{_leaf(key)}: {(choices or ('...',))[0]}`",
            )
        if choices and value not in choices:
            close = difflib.get_close_matches(value, choices, n=1, cutoff=0.5)
            hint = f"did you mean '{close[0]}'? " if close else ""
            self.fail(key, f"unknown value {value!r}", f"{hint}use one of: {', '.join(choices)}")
        if identifier and (not value.isidentifier() or keyword.iskeyword(value)):
            self.fail(
                key,
                f"{value!r} is not a Python name",
                "use the name of a function or constant in the op module",
            )
        return value

    def texts(self, value: object, key: str) -> tuple[str, ...]:
        """A list of non-empty texts; a single text counts as a list of one."""
        if isinstance(value, str):
            value = [value]
        if value is None:
            return ()
        if not isinstance(value, list):
            self.fail(
                key,
                f"expected a list of texts, got {_kind(value)}",
                f"write `{_leaf(key)}: [a, b]`",
            )
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                self.fail(
                    f"{key}[{i}]",
                    f"expected non-empty text, got {_kind(item)}",
                    "quote the item or remove it",
                )
        return tuple(value)

    def argv(self, value: object, key: str) -> tuple[str, ...] | None:
        """A command: a list of arguments, or one text split like a shell would."""
        if value is None:
            return None
        if isinstance(value, str):
            try:
                parts = shlex.split(value)
            except ValueError as exc:
                self.fail(
                    key,
                    f"cannot split the command: {exc}",
                    "balance the quotes, or write it as a list of arguments",
                )
            value = parts
        argv = self.texts(value, key)
        if not argv:
            self.fail(
                key,
                "the command is empty",
                f"name a program, e.g. `{_leaf(key)}: [python, propose.py]`, or remove the key",
            )
        return argv


def _leaf(key: str) -> str:
    return re.sub(r"\[\d+\]$", "", key.rsplit(".", 1)[-1])


# ---------------------------------------------------------------- names


def _name_problem(part: str) -> str | None:
    """Why `part` cannot be one component of an op name or path, or None if it can."""
    if part == "":
        return "it has an empty part (a leading, trailing or doubled '/')"
    if part in (".", ".."):
        return f"'{part}' would leave the ops folder (path traversal is not allowed)"
    if not NAME_PART.match(part):
        bad = sorted({c for c in part if not re.match(r"[A-Za-z0-9_.-]", c)})
        return f"it contains {', '.join(repr(c) for c in bad)}"
    return None


def _check_relative_path(check: _Checker, value: str, key: str) -> str:
    if "\\" in value or value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        check.fail(
            key,
            f"{value!r} must be a relative path inside the repository, with '/' separators",
            "write it relative to the repository root, e.g. `examples`",
        )
    for part in PurePosixPath(value).parts:
        problem = _name_problem(part)
        if problem:
            check.fail(
                key,
                f"{value!r} is not allowed: {problem}",
                "use a folder inside the repository, e.g. `examples`",
            )
    return value


def _check_ref_name(check: _Checker, value: object, key: str) -> str:
    """A branch name (or prefix) git accepts and that tunebot can safely build on."""
    text = check.text(value, key)
    problem = None
    if text.startswith("/") or text.endswith("/") or "//" in text:
        problem = "it starts or ends with '/' or has an empty part"
    elif ".." in text or "@{" in text:
        problem = "git refuses '..' and '@{' in branch names"
    else:
        for part in text.split("/"):
            if not NAME_PART.match(part) or part.startswith((".", "-")) or part.endswith(".lock"):
                problem = f"the part {part!r} is not a valid branch name component"
                break
    if problem:
        check.fail(
            key,
            f"{text!r} is not a usable branch name: {problem}",
            "use letters, digits, '_', '.', '-' and '/' between parts, e.g. `tunebot`",
        )
    return text


# ---------------------------------------------------------------- repo config


def load_repo_config(root: Path) -> RepoConfig:
    """Read `<root>/.tunebot.yml`; a missing file means every default."""
    root = Path(root)
    path = root / REPO_CONFIG_FILE
    if not path.exists():
        return RepoConfig()
    check = _Checker(REPO_CONFIG_FILE)
    data = _read_yaml(path, REPO_CONFIG_FILE)
    moved = {
        k: f"move it under `defaults:` (write `defaults:` then an indented `{k}: ...` line)"
        for k in _DEFAULTS_KEYS
    }
    check.known_keys(data, _REPO_KEYS, hints=moved)
    base = RepoConfig()
    values: dict = {}
    if data.get("ops_root") is not None:
        values["ops_root"] = _check_relative_path(
            check, check.text(data["ops_root"], "ops_root"), "ops_root"
        )
    if data.get("branch_prefix") is not None:
        values["branch_prefix"] = _check_ref_name(check, data["branch_prefix"], "branch_prefix")
    defaults = check.mapping(data.get("defaults"), "defaults")
    check.known_keys(defaults, _DEFAULTS_KEYS, prefix="defaults.")
    values.update(_run_limits(check, defaults, "defaults."))
    if defaults.get("noise_warn") is not None:
        values["noise_warn"] = check.number(
            defaults["noise_warn"],
            "defaults.noise_warn",
            above=0,
            below=1,
            fix="write a fraction of the latency: 0.10 warns above 10 %",
        )
    if "keep_branches" in data:
        values["keep_branches"] = check.boolean(data["keep_branches"], "keep_branches")
    if data.get("base_branch") is not None:
        values["base_branch"] = _check_ref_name(check, data["base_branch"], "base_branch")
    if "proposer" in data:
        values["proposer"] = check.argv(data["proposer"], "proposer")
    if data.get("proposer_timeout_s") is not None:
        values["proposer_timeout_s"] = check.number(
            data["proposer_timeout_s"], "proposer_timeout_s", above=0, example="600"
        )
    values["github"] = _github_settings(check, check.mapping(data.get("github"), "github"))
    return replace(base, **values)


def _run_limits(check: _Checker, data: dict, prefix: str) -> dict:
    """max_iters, patience, noise_floor, target_us: shared by `.tunebot.yml` defaults and tune.yaml."""
    out: dict = {}
    if data.get("max_iters") is not None:
        out["max_iters"] = check.integer(
            data["max_iters"], f"{prefix}max_iters", minimum=1, example=10
        )
    if data.get("patience") is not None:
        out["patience"] = check.integer(data["patience"], f"{prefix}patience", minimum=1, example=3)
    if data.get("noise_floor") is not None:
        out["noise_floor"] = check.number(
            data["noise_floor"],
            f"{prefix}noise_floor",
            minimum=0,
            below=1,
            fix="write a fraction of the latency: 0.03 means 3 %",
        )
    if data.get("target_us") is not None:
        out["target_us"] = check.number(
            data["target_us"],
            f"{prefix}target_us",
            above=0,
            fix="write the target latency in microseconds as a number, e.g. `target_us: 120`",
        )
    return out


def _github_settings(check: _Checker, data: dict) -> GithubSettings:
    check.known_keys(data, _GITHUB_KEYS, prefix="github.")
    values: dict = {}
    if data.get("min_permission") is not None:
        values["min_permission"] = check.text(
            data["min_permission"], "github.min_permission", PERMISSIONS
        )
    if "labels" in data:
        values["labels"] = check.texts(data["labels"], "github.labels")
    if "reviewers" in data:
        # "@alice" and "alice" both mean the GitHub user alice.
        values["reviewers"] = tuple(
            r.lstrip("@") for r in check.texts(data["reviewers"], "github.reviewers")
        )
    if "ops" in data:
        ops = check.texts(data["ops"], "github.ops")
        for i, name in enumerate(ops):
            problem = _op_name_problem(name)
            if problem:
                check.fail(
                    f"github.ops[{i}]",
                    f"{name!r} is not an op name: {problem}",
                    "write <op> or <project>/<op>",
                )
        values["ops"] = ops
    if "required_checks" in data:
        values["required_checks"] = check.texts(data["required_checks"], "github.required_checks")
    if data.get("allow_no_checks") is not None:
        values["allow_no_checks"] = check.boolean(data["allow_no_checks"], "github.allow_no_checks")
    if data.get("max_parallel") is not None:
        n = data["max_parallel"]
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 256:
            check.fail(
                "github.max_parallel",
                f"{n!r} is not a whole number from 1 to 256",
                "write how many tune jobs may run at once, e.g. `max_parallel: 8` (one per accelerator runner)",
            )
        values["max_parallel"] = n
    if data.get("runners") is not None:
        table = data["runners"]
        if not isinstance(table, dict):
            check.fail(
                "github.runners",
                "is not a mapping",
                "write `runners: {default: [self-hosted, npu], mindiesd: [self-hosted, 910B]}`",
            )
        rows = []
        for key, labels in table.items():
            if not isinstance(key, str) or (key != "default" and _op_name_problem(key)):
                check.fail(
                    f"github.runners.{key}",
                    "is not an op, a project or `default`",
                    "key the labels by op, project or default",
                )
            texts = check.texts(labels, f"github.runners.{key}")
            bad = [t for t in texts if not RUNNER_LABEL.match(t)]
            if not texts or bad:
                check.fail(
                    f"github.runners.{key}",
                    f"{(bad or ['(empty)'])[0]!r} is not a runner label",
                    "write runner labels such as self-hosted, npu, 910B (letters, digits, . _ -)",
                )
            rows.append((key, texts))
        values["runners"] = tuple(rows)
    return GithubSettings(**values)


# ---------------------------------------------------------------- ops


def list_ops(root: Path, cfg: RepoConfig) -> list[str]:
    """Every op under the ops root as "project/op", sorted.

    An op is a folder `<ops_root>/<project>/<op>/` holding `<op>.py`.
    """
    base = Path(root) / cfg.ops_root
    if not base.is_dir():
        return []
    found = []
    for project in base.iterdir():
        if (
            not project.is_dir()
            or project.name.startswith(".")
            or not NAME_PART.match(project.name)
        ):
            continue
        for op_dir in project.iterdir():
            if (
                op_dir.is_dir()
                and not op_dir.name.startswith(".")
                and NAME_PART.match(op_dir.name)
                and (op_dir / f"{op_dir.name}.py").is_file()
            ):
                found.append(f"{project.name}/{op_dir.name}")
    return sorted(found)


def _op_name_problem(name: str) -> str | None:
    if not name:
        return "it is empty"
    if "\\" in name:
        return "it contains a backslash"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "it is an absolute path"
    parts = name.split("/")
    if len(parts) > 2:
        return "it has more than two parts"
    for part in parts:
        problem = _name_problem(part)
        if problem:
            return problem
    return None


def resolve_op(root: Path, cfg: RepoConfig, name: str) -> OpConfig:
    """Find op `name` ("op" or "project/op") and load its config.

    Raises OpNotFound (an OpNameError) for refused, unknown or ambiguous names.
    """
    root = Path(root)
    name = name.strip() if isinstance(name, str) else ""
    problem = _op_name_problem(name)
    if problem:
        raise OpNameError(name, [], problem=problem)
    base = root / cfg.ops_root
    if not base.is_dir():
        raise ConfigError(
            REPO_CONFIG_FILE,
            "ops_root",
            f"the ops folder '{cfg.ops_root}' does not exist",
            "create it with <project>/<op>/<op>.py inside, or point ops_root at the folder that has them",
        )
    ops = list_ops(root, cfg)
    if "/" in name:
        matches = [q for q in ops if q == name]
    else:
        matches = [q for q in ops if q.split("/", 1)[1] == name]
    if len(matches) > 1:
        raise OpNameError(name, matches, ambiguous=True)
    if not matches:
        raise OpNameError(name, ops, suggestions=_suggest(name, ops))
    project, op = matches[0].split("/")
    op_dir = Path(cfg.ops_root) / project / op
    # A symlinked folder could point anywhere: the op must really live under the ops root.
    try:
        (root / op_dir).resolve().relative_to(base.resolve())
    except ValueError:
        raise OpNameError(
            name, ops, problem=f"'{op_dir.as_posix()}' points outside '{cfg.ops_root}'"
        ) from None
    return load_op_config(root, op_dir)


def _suggest(name: str, ops: list[str]) -> list[str]:
    """Close matches for a mistyped op name, compared case-insensitively by short and full name."""
    by_key: dict[str, list[str]] = {}
    for q in ops:
        for key in (q.lower(), q.split("/", 1)[1].lower()):
            by_key.setdefault(key, []).append(q)
    out: list[str] = []
    for key in difflib.get_close_matches(name.lower(), list(by_key), n=5, cutoff=0.6):
        for q in by_key[key]:
            if q not in out:
                out.append(q)
    return out[:3]


def load_op_config(root: Path, op_dir: Path) -> OpConfig:
    """Read `<op_dir>/tune.yaml` (optional) and DESIGN.md's target for the op in `op_dir`.

    `op_dir` may be absolute or relative to `root`; the returned OpConfig.dir is relative.
    """
    root = Path(root)
    op_dir = Path(op_dir)
    absolute = op_dir if op_dir.is_absolute() else root / op_dir
    try:
        relative = absolute.resolve().relative_to(root.resolve())
    except ValueError:
        relative = op_dir
    if not absolute.is_dir():
        raise ConfigError(
            relative.as_posix(),
            "(folder)",
            "the op folder does not exist",
            "create <ops_root>/<project>/<op>/ with <op>.py, DESIGN.md and tune.yaml",
        )
    project, name = relative.parent.name, relative.name
    path = absolute / OP_CONFIG_FILE
    shown = (relative / OP_CONFIG_FILE).as_posix()
    data = _read_yaml(path, shown) if path.exists() else {}
    op = _op_from_data(_Checker(shown), data, project, name, relative)
    if op.target_us is None:
        design = absolute / "DESIGN.md"
        if design.is_file():
            try:
                text = design.read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    (relative / "DESIGN.md").as_posix(),
                    "(file)",
                    f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                    "save DESIGN.md as UTF-8 (e.g. `iconv -f gbk -t utf-8`)",
                ) from None
            target = design_target_us(text)
            if target is not None:
                op = replace(op, target_us=target)
    return op


def _op_from_data(check: _Checker, data: dict, project: str, name: str, relative: Path) -> OpConfig:
    check.known_keys(data, _OP_KEYS)
    values: dict = {}
    if data.get("kernel_kind") is not None:
        values["kernel_kind"] = check.text(data["kernel_kind"], "kernel_kind", KERNEL_KINDS)
    for key in ("entry", "inputs", "reference"):
        if data.get(key) is not None:
            values[key] = check.text(data[key], key, identifier=True)
    if data.get("knobs") is not None:
        values["knobs"] = _knobs(check, data["knobs"])
    if "strategies" in data and data["strategies"] is not None:
        values["strategies"] = _strategy_ids(
            check, check.texts(data["strategies"], "strategies"), "strategies"
        )
        if not values["strategies"]:
            check.fail(
                "strategies",
                "the list is empty, so nothing could be tried",
                "remove the key to allow every applicable strategy, or list some",
            )
    values["accuracy"] = _accuracy(check, check.mapping(data.get("accuracy"), "accuracy"))
    values["latency"] = _latency(check, check.mapping(data.get("latency"), "latency"))
    values["limits"] = _kernel_limits(check, check.mapping(data.get("limits"), "limits"))
    values.update(_run_limits(check, data, ""))
    if "proposer" in data:
        values["proposer"] = check.argv(data["proposer"], "proposer")
    return OpConfig(project=project, name=name, dir=relative, **values)


def _strategy_ids(
    check: _Checker, ids: tuple[str, ...], key: str, indexed: bool = True
) -> tuple[str, ...]:
    from bot.strategies import catalog  # imported late: strategies import this module

    for i, sid in enumerate(ids):
        if sid not in catalog.IDS:
            close = difflib.get_close_matches(sid, catalog.IDS, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'? " if close else ""
            check.fail(
                f"{key}[{i}]" if indexed else key,
                f"unknown strategy {sid!r}",
                f"{hint}known strategies: {', '.join(catalog.IDS)}",
            )
    return ids


def _knobs(check: _Checker, value: object) -> tuple[Knob, ...]:
    if not isinstance(value, list):
        check.fail(
            "knobs",
            f"expected a list of knobs, got {_kind(value)}",
            "write `knobs:` followed by `- name: BLOCK_M` items with strategy and values",
        )
    knobs: list[Knob] = []
    for i, item in enumerate(value):
        key = f"knobs[{i}]"
        if not isinstance(item, dict):
            check.fail(
                key,
                f"expected a mapping, got {_kind(item)}",
                "write `- name: ..., strategy: ..., values: [...]`",
            )
        check.known_keys(item, _KNOB_KEYS, prefix=f"{key}.")
        for required in ("name", "strategy", "values"):
            if item.get(required) is None:
                check.fail(f"{key}.{required}", "missing", f"add `{required}:` to this knob")
        knob_name = check.text(item["name"], f"{key}.name", identifier=True)
        if any(k.name == knob_name for k in knobs):
            check.fail(
                f"{key}.name",
                f"knob {knob_name!r} is declared twice",
                "keep one declaration per knob",
            )
        strategy = _strategy_ids(
            check,
            (check.text(item["strategy"], f"{key}.strategy"),),
            f"{key}.strategy",
            indexed=False,
        )[0]
        values = _knob_values(check, item["values"], f"{key}.values")
        divides = multiple_of = None
        if item.get("divides") is not None:
            divides = check.integer(item["divides"], f"{key}.divides", minimum=1, example=1024)
            bad = [v for v in values if v == 0 or divides % v]
            if bad:
                check.fail(
                    f"{key}.values",
                    f"{', '.join(map(str, bad))} do(es) not divide {divides} (declared by divides)",
                    f"keep only divisors of {divides}, or correct `divides`",
                )
        if item.get("multiple_of") is not None:
            multiple_of = check.integer(
                item["multiple_of"], f"{key}.multiple_of", minimum=1, example=16
            )
            bad = [v for v in values if v % multiple_of]
            if bad:
                check.fail(
                    f"{key}.values",
                    f"{', '.join(map(str, bad))} is/are not multiples of {multiple_of} "
                    "(declared by multiple_of)",
                    f"keep only multiples of {multiple_of}, or correct `multiple_of`",
                )
        knobs.append(Knob(knob_name, strategy, values, divides, multiple_of))
    return tuple(knobs)


def _knob_values(check: _Checker, value: object, key: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        check.fail(
            key,
            f"expected a list of whole numbers, got {_kind(value)}",
            "write e.g. `values: [32, 64, 128]`",
        )
    if not value:
        check.fail(
            key, "the list is empty", "list at least one value, e.g. `values: [32, 64, 128]`"
        )
    if all(isinstance(v, bool) for v in value):
        if len(set(value)) != len(value):
            check.fail(key, "a value appears twice", "write `values: [false, true]`")
        return tuple(value)
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, int):
            check.fail(
                f"{key}[{i}]",
                f"expected a whole number, got {_kind(v)}",
                "knob values are integers (or all true/false for a switch)",
            )
        if v < 0:
            check.fail(f"{key}[{i}]", f"negative value {v}", "knob values must be >= 0")
    if list(value) != sorted(set(value)):
        # The planner steps to neighbours in this order, so it must be a sorted space.
        check.fail(
            key,
            "values must be strictly increasing (no repeats)",
            f"write `values: {sorted(set(value))}`",
        )
    return tuple(value)


def _dtype_tolerances(
    check: _Checker, value: object, key: str, default: dict[str, float]
) -> dict[str, float]:
    if isinstance(value, dict):
        out = dict(default)
        for dtype, tol in value.items():
            if dtype not in DTYPES:
                close = difflib.get_close_matches(str(dtype), DTYPES, n=1, cutoff=0.6)
                hint = f"did you mean '{close[0]}'? " if close else ""
                check.fail(
                    f"{key}.{dtype}", "unknown dtype", f"{hint}use one of: {', '.join(DTYPES)}"
                )
            out[dtype] = check.number(tol, f"{key}.{dtype}", minimum=0, example="1e-2")
        return out
    # One number applies to every dtype.
    tol = check.number(
        value,
        key,
        minimum=0,
        example="1e-2",
        fix=f"write one number, or a mapping per dtype like `{_leaf(key)}: {{float16: 1e-2, float32: 1e-4}}`",
    )
    return {dtype: tol for dtype in default}


def _accuracy(check: _Checker, data: dict) -> AccuracySettings:
    check.known_keys(data, _ACCURACY_KEYS, prefix="accuracy.")
    base = AccuracySettings()
    values: dict = {}
    if data.get("mode") is not None:
        values["mode"] = check.text(data["mode"], "accuracy.mode", ACCURACY_MODES)
    if data.get("level") is not None:
        values["level"] = check.text(data["level"], "accuracy.level", LEVELS)
    if data.get("timeout_s") is not None:
        values["timeout_s"] = check.number(
            data["timeout_s"], "accuracy.timeout_s", above=0, example="120"
        )
    for tol in ("rtol", "atol"):
        if data.get(tol) is not None:
            values[tol] = _dtype_tolerances(check, data[tol], f"accuracy.{tol}", getattr(base, tol))
    if data.get("min_cosine") is not None:
        values["min_cosine"] = check.number(
            data["min_cosine"], "accuracy.min_cosine", above=0, at_most=1, example="0.999"
        )
    if data.get("repeats") is not None:
        values["repeats"] = check.integer(data["repeats"], "accuracy.repeats", minimum=0, example=3)
        if values["repeats"] > 20:
            check.fail(
                "accuracy.repeats",
                f"at most 20 extra L0 runs, got {values['repeats']}",
                "use 0 to 20",
            )
    return replace(base, **values)


def _kernel_limits(check: _Checker, data: dict) -> KernelLimits:
    check.known_keys(data, _LIMIT_KEYS, prefix="limits.")
    values: dict = {}
    for key, example in (("memory_mb", 16384), ("file_size_mb", 4096)):
        if data.get(key) is not None:
            values[key] = check.integer(data[key], f"limits.{key}", minimum=0, example=example)
            if 0 < values[key] < 64:
                check.fail(
                    f"limits.{key}",
                    f"{values[key]} MiB is too small for a Python process",
                    "use at least 64, or 0 for no cap",
                )
    if data.get("cpu_s") is not None:
        values["cpu_s"] = check.number(data["cpu_s"], "limits.cpu_s", minimum=0, example="600")
    if data.get("filesystem") is not None:
        values["filesystem"] = check.text(
            data["filesystem"], "limits.filesystem", ("restricted", "open")
        )
    return KernelLimits(**values)


def _latency(check: _Checker, data: dict) -> LatencySettings:
    check.known_keys(data, _LATENCY_KEYS, prefix="latency.")
    values: dict = {}
    if data.get("backend") is not None:
        values["backend"] = check.text(data["backend"], "latency.backend", BACKENDS)
    if data.get("warmup") is not None:
        values["warmup"] = check.integer(data["warmup"], "latency.warmup", minimum=0, example=5)
    if data.get("repeats") is not None:
        values["repeats"] = check.integer(
            data["repeats"], "latency.repeats", minimum=1, example=30, maximum=MAX_REPEATS
        )
    if data.get("timeout_s") is not None:
        values["timeout_s"] = check.number(
            data["timeout_s"], "latency.timeout_s", above=0, example="300"
        )
    if data.get("kernel_name") is not None:
        values["kernel_name"] = check.text(data["kernel_name"], "latency.kernel_name")
    if data.get("command") is not None:
        values["command"] = check.argv(data["command"], "latency.command")
    backend = REGISTRY.get(values.get("backend", ""))
    for key, problem, fix in backend.requires if backend else ():
        if not values.get(key):
            check.fail(f"latency.{key}", problem, fix)
    return LatencySettings(**values)


# ---------------------------------------------------------------- DESIGN.md target

_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_TARGET_TITLE = re.compile(
    r"性能目标|性能指标|目标性能|performance\s+(target|goal)s?|latency\s+(target|goal)s?",
    re.IGNORECASE,
)
_LATENCY = re.compile(r"(\d+(?:\.\d+)?)\s*(us|μs|µs|微秒|ms|毫秒)(?![A-Za-z])", re.IGNORECASE)
_TARGET_WORDS = re.compile(
    r"<=|≤|<|目标|target|goal|不超过|不高于|以内|以下|at most|under|below", re.IGNORECASE
)
_BASELINE_WORDS = re.compile(r"基线|当前|现状|baseline|current", re.IGNORECASE)


def design_target_us(design_md_text: str) -> float | None:
    """The latency target in DESIGN.md's performance-target section, in microseconds.

    Understands headings like `## 性能目标` or `## Performance target` and values like
    `latency <= 120 us`, `目标: 120us`, `120 μs`, `0.5 ms`. A line with a target word
    (目标, target, <=, 以内, ...) wins; lines naming only a baseline are skipped; otherwise
    the first value in the section. None when there is no such section or value.
    """
    section = _target_section(design_md_text.splitlines())
    if section is None:
        return None
    fallback: float | None = None
    for line in section:
        values = [(m.start(), _microseconds(m)) for m in _LATENCY.finditer(line)]
        values = [(pos, us) for pos, us in values if us > 0]
        if not values:
            continue
        word = _TARGET_WORDS.search(line)
        if word:
            after = [us for pos, us in values if pos >= word.end()]
            before = [us for pos, us in values if pos < word.start()]
            # "目标: 120us" names the value after the word; "120us 以内" names it before.
            return after[0] if after else before[-1]
        if fallback is None and not _BASELINE_WORDS.search(line):
            fallback = values[0][1]
    return fallback


def _microseconds(match: re.Match) -> float:
    scale = 1000.0 if match.group(2).lower() in ("ms", "毫秒") else 1.0
    return float(match.group(1)) * scale


def _target_section(lines: list[str]) -> list[str] | None:
    in_fence = False
    level = 0
    section: list[str] | None = None
    for line in lines:
        if _FENCE.match(line):
            in_fence = not in_fence
            if section is not None:
                section.append(line)
            continue
        heading = None if in_fence else _HEADING.match(line)
        if heading:
            if section is not None and len(heading.group(1)) <= level:
                return section
            if section is None and _TARGET_TITLE.search(heading.group(2)):
                level = len(heading.group(1))
                section = []
                continue
        if section is not None:
            section.append(line)
    return section


# ---------------------------------------------------------------- effective settings


def effective_settings(
    cfg: RepoConfig,
    op: OpConfig,
    max_iters: int | None = None,
    target_us: float | None = None,
    strategies: tuple[str, ...] | None = None,
    patience: int | None = None,
    noise_floor: float | None = None,
) -> RunSettings:
    """Command-line flags > the op's tune.yaml (and DESIGN.md target) > `.tunebot.yml` defaults."""
    flags = _Checker("command line")
    if max_iters is not None:
        flags.integer(max_iters, "--max-iters", minimum=1, example=10)
    if patience is not None:
        flags.integer(patience, "--patience", minimum=1, example=3)
    if target_us is not None:
        target_us = flags.number(target_us, "--target-us", above=0, example="120")
    if noise_floor is not None:
        noise_floor = flags.number(noise_floor, "--noise-floor", minimum=0, below=1, example="0.03")
    if strategies:
        strategies = _strategy_ids(flags, tuple(strategies), "--strategies", indexed=False)
    else:
        strategies = None

    def pick(flag, from_op, from_repo):
        if flag is not None:
            return flag
        return from_op if from_op is not None else from_repo

    return RunSettings(
        max_iters=pick(max_iters, op.max_iters, cfg.max_iters),
        patience=pick(patience, op.patience, cfg.patience),
        noise_floor=pick(noise_floor, op.noise_floor, cfg.noise_floor),
        target_us=pick(target_us, op.target_us, cfg.target_us),
        strategies=pick(strategies, op.strategies, None),
        noise_warn=cfg.noise_warn,
    )
