"""`.tunebot.yml`: the repository-level settings, declared as field specs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from bot.config.checker import Checker
from bot.config.fields import Argv, Boolean, Field, Integer, Nested, Number, Section, Text, Texts
from bot.config.names import RUNNER_LABEL, check_ref_name, check_relative_path, op_name_problem
from bot.config.schema import PERMISSIONS, REPO_CONFIG_FILE, GithubSettings, RepoConfig
from bot.config.tree import Tree, as_tree
from bot.config.yamlfile import read_yaml

# max_iters, patience, noise_floor, target_us: shared by `.tunebot.yml` defaults and tune.yaml.
RUN_LIMIT_FIELDS = (
    Field("max_iters", Integer(minimum=1, example=10)),
    Field("patience", Integer(minimum=1, example=3)),
    Field(
        "noise_floor",
        Number(minimum=0, below=1, fix="write a fraction of the latency: 0.03 means 3 %"),
    ),
    Field(
        "target_us",
        Number(
            above=0,
            fix="write the target latency in microseconds as a number, e.g. `target_us: 120`",
        ),
    ),
)


@dataclass(frozen=True)
class RelativePath:
    """A folder inside the repository, '/'-separated."""

    def read(self, check: Checker, value: object, key: str) -> str:
        return check_relative_path(check, check.text(value, key), key)


@dataclass(frozen=True)
class RefName:
    """A branch name (or prefix) git accepts."""

    def read(self, check: Checker, value: object, key: str) -> str:
        return check_ref_name(check, value, key)


@dataclass(frozen=True)
class Reviewers:
    """GitHub users; "@alice" and "alice" both mean the user alice."""

    def read(self, check: Checker, value: object, key: str) -> tuple[str, ...]:
        return tuple(r.lstrip("@") for r in check.texts(value, key))


@dataclass(frozen=True)
class OpNames:
    def read(self, check: Checker, value: object, key: str) -> tuple[str, ...]:
        ops = check.texts(value, key)
        for i, name in enumerate(ops):
            problem = op_name_problem(name)
            if problem:
                check.fail(
                    f"{key}[{i}]",
                    f"{name!r} is not an op name: {problem}",
                    "write <op> or <project>/<op>",
                )
        return ops


@dataclass(frozen=True)
class MaxParallel:
    def read(self, check: Checker, value: object, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 256:
            check.fail(
                key,
                f"{value!r} is not a whole number from 1 to 256",
                "write how many tune jobs may run at once, e.g. `max_parallel: 8` "
                "(one per accelerator runner)",
            )
        return value


@dataclass(frozen=True)
class RunnerTable:
    """Runner labels keyed by op, project or `default`."""

    def read(self, check: Checker, value: object, key: str) -> tuple:
        if not isinstance(value, dict):
            check.fail(
                key,
                "is not a mapping",
                "write `runners: {default: [self-hosted, npu], mindiesd: [self-hosted, 910B]}`",
            )
        rows = []
        for name, labels in value.items():
            if not isinstance(name, str) or (name != "default" and op_name_problem(name)):
                check.fail(
                    f"{key}.{name}",
                    "is not an op, a project or `default`",
                    "key the labels by op, project or default",
                )
            texts = check.texts(labels, f"{key}.{name}")
            bad = [t for t in texts if not RUNNER_LABEL.match(t)]
            if not texts or bad:
                check.fail(
                    f"{key}.{name}",
                    f"{(bad or ['(empty)'])[0]!r} is not a runner label",
                    "write runner labels such as self-hosted, npu, 910B (letters, digits, . _ -)",
                )
            rows.append((name, texts))
        return tuple(rows)


GITHUB = Section(
    (
        Field("min_permission", Text(PERMISSIONS)),
        Field("labels", Texts(), null_is_absent=False),
        Field("reviewers", Reviewers(), null_is_absent=False),
        Field("ops", OpNames(), null_is_absent=False),
        Field("required_checks", Texts(), null_is_absent=False),
        Field("allow_no_checks", Boolean()),
        Field("max_parallel", MaxParallel()),
        Field("runners", RunnerTable()),
    )
)

DEFAULTS = Section(
    (
        *RUN_LIMIT_FIELDS,
        Field(
            "noise_warn",
            Number(above=0, below=1, fix="write a fraction of the latency: 0.10 warns above 10 %"),
        ),
    ),
    keys=("max_iters", "patience", "noise_floor", "noise_warn", "target_us"),
)

REPO = Section(
    (
        Field("ops_root", RelativePath()),
        Field("branch_prefix", RefName()),
        Field("defaults", Nested(DEFAULTS), flatten=True),
        Field("keep_branches", Boolean(), null_is_absent=False),
        Field("base_branch", RefName()),
        Field("proposer", Argv(), null_is_absent=False),
        Field("proposer_timeout_s", Number(above=0, example="600")),
        Field(
            "github",
            Nested(GITHUB, lambda _, values: GithubSettings(**values)),
            null_is_absent=False,
        ),
    ),
    hints=tuple(
        (k, f"move it under `defaults:` (write `defaults:` then an indented `{k}: ...` line)")
        for k in DEFAULTS.allowed
    ),
)


def load_repo_config(root: Path | Tree) -> RepoConfig:
    """Read `.tunebot.yml` at the root of a folder or commit; a missing file means every default."""
    tree = as_tree(root)
    if not tree.exists(REPO_CONFIG_FILE):
        return RepoConfig()
    data = read_yaml(tree, REPO_CONFIG_FILE, REPO_CONFIG_FILE)
    return replace(RepoConfig(), **REPO.read(Checker(REPO_CONFIG_FILE), data))
