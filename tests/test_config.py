"""bot/config/: .tunebot.yml, tune.yaml, op resolution, DESIGN.md targets, precedence.

Every test writes real files into a temporary repository layout.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bot.config.design import design_target_us
from bot.config.discovery import list_ops, load_op_config, resolve_op
from bot.config.repo import load_repo_config
from bot.config.schema import (
    GithubSettings,
    Knob,
    LatencySettings,
    OpConfig,
    RepoConfig,
    RunSettings,
)
from bot.config.settings import effective_settings
from bot.errors import ConfigError, OpNotFound

REPO_ROOT = Path(__file__).resolve().parent.parent


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def make_op(
    root: Path,
    project: str,
    op: str,
    tune: str | None = None,
    design: str | None = None,
    ops_root: str = "examples",
) -> Path:
    op_dir = root / ops_root / project / op
    write(op_dir / f"{op}.py", "BLOCK_M = 64\n")
    if tune is not None:
        write(op_dir / "tune.yaml", tune)
    if design is not None:
        write(op_dir / "DESIGN.md", design)
    return op_dir


def op_error(tmp_path: Path, tune: str) -> ConfigError:
    op_dir = make_op(tmp_path, "p", "op", tune=tune)
    with pytest.raises(ConfigError) as info:
        load_op_config(tmp_path, op_dir)
    return info.value


def repo_error(tmp_path: Path, text: str) -> ConfigError:
    write(tmp_path / ".tunebot.yml", text)
    with pytest.raises(ConfigError) as info:
        load_repo_config(tmp_path)
    return info.value


# ---------------------------------------------------------------- .tunebot.yml


def test_missing_repo_config_means_defaults(tmp_path: Path) -> None:
    cfg = load_repo_config(tmp_path)
    assert cfg == RepoConfig()
    assert (cfg.max_iters, cfg.patience, cfg.noise_floor) == (10, 3, 0.03)


def test_full_repo_config_is_read(tmp_path: Path) -> None:
    write(
        tmp_path / ".tunebot.yml",
        """\
        ops_root: kernels/ops
        branch_prefix: bots/tune
        defaults: {max_iters: 4, patience: 2, noise_floor: 0.05, target_us: 90}
        keep_branches: true
        base_branch: main
        proposer: python propose.py --fast
        proposer_timeout_s: 30
        github:
          min_permission: maintain
          labels: [perf, bot]
          reviewers: ["@alice", bob]
          ops: [rms_norm, demo/matmul]
        """,
    )
    cfg = load_repo_config(tmp_path)
    assert cfg.ops_root == "kernels/ops" and cfg.branch_prefix == "bots/tune"
    assert (cfg.max_iters, cfg.patience, cfg.noise_floor, cfg.target_us) == (4, 2, 0.05, 90.0)
    assert cfg.keep_branches is True and cfg.base_branch == "main"
    assert cfg.proposer == ("python", "propose.py", "--fast") and cfg.proposer_timeout_s == 30.0
    assert cfg.github == GithubSettings(
        "maintain", ("perf", "bot"), ("alice", "bob"), ("rms_norm", "demo/matmul")
    )


def test_empty_repo_config_means_defaults(tmp_path: Path) -> None:
    write(tmp_path / ".tunebot.yml", "# nothing yet\n")
    assert load_repo_config(tmp_path) == RepoConfig()


@pytest.mark.parametrize(
    "text, key, in_problem, in_fix",
    [
        ("ops_rot: examples\n", "ops_rot", "unknown key", "did you mean 'ops_root'"),
        ("max_iters: 5\n", "max_iters", "not allowed here", "under `defaults:`"),
        ("defaults: {max_iter: 5}\n", "defaults.max_iter", "unknown key", "'defaults.max_iters'"),
        ("defaults: {max_iters: 0}\n", "defaults.max_iters", "at least 1", ">= 1"),
        ("defaults: {max_iters: ten}\n", "defaults.max_iters", "whole number", "max_iters: 10"),
        ("defaults: {patience: -1}\n", "defaults.patience", "at least 1", ">= 1"),
        ("defaults: {noise_floor: 3}\n", "defaults.noise_floor", "must be < 1", "0.03 means 3 %"),
        ("defaults: {noise_floor: -0.1}\n", "defaults.noise_floor", ">= 0", "0.03 means 3 %"),
        (
            "defaults: {target_us: 120us}\n",
            "defaults.target_us",
            "expected a number",
            "microseconds",
        ),
        ("defaults: {target_us: -5}\n", "defaults.target_us", "must be > 0", "microseconds"),
        ("defaults: [1, 2]\n", "defaults", "expected a mapping", "defaults:"),
        ("ops_root: ../elsewhere\n", "ops_root", "path traversal", "inside the repository"),
        ("ops_root: /abs/path\n", "ops_root", "relative path", "relative to the repository root"),
        ("ops_root: 'a\\b'\n", "ops_root", "relative path", "relative"),
        (
            "branch_prefix: 'tune bot'\n",
            "branch_prefix",
            "not a usable branch name",
            "e.g. `tunebot`",
        ),
        ("branch_prefix: a..b\n", "branch_prefix", "'..'", "letters, digits"),
        ("base_branch: -main\n", "base_branch", "not a valid branch name component", "letters"),
        ("keep_branches: yes please\n", "keep_branches", "true or false", "keep_branches: true"),
        ("proposer_timeout_s: 0\n", "proposer_timeout_s", "must be > 0", "> 0"),
        ("proposer: []\n", "proposer", "the command is empty", "name a program"),
        ('proposer: "python \'unbalanced"\n', "proposer", "cannot split", "balance the quotes"),
        (
            "github: {min_permission: read}\n",
            "github.min_permission",
            "unknown value 'read'",
            "write, maintain, admin",
        ),
        (
            "github: {min_permision: write}\n",
            "github.min_permision",
            "unknown key",
            "'github.min_permission'",
        ),
        ("github: {labels: [ok, 3]}\n", "github.labels[1]", "non-empty text", "quote"),
        ("github: {ops: [../x]}\n", "github.ops[0]", "path traversal", "<project>/<op>"),
        ("- just\n- a list\n", "(top level)", "mapping of keys", "key: value"),
    ],
)
def test_repo_config_errors_name_file_key_and_fix(
    tmp_path: Path, text: str, key: str, in_problem: str, in_fix: str
) -> None:
    err = repo_error(tmp_path, text)
    assert err.file == ".tunebot.yml"
    assert err.key == key
    assert in_problem in err.problem
    assert in_fix in err.fix
    assert ".tunebot.yml" in str(err) and key in str(err) and "Fix:" in str(err)
    assert err.exit_code == 2


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    err = repo_error(tmp_path, "ops_root: examples\ndefaults:\n  max_iters: 3\n patience: 2\n")
    assert err.key == "line 4"
    assert "not valid YAML" in err.problem and "line 4" in err.problem
    assert "correct line 4" in err.fix


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    err = repo_error(tmp_path, "ops_root: a\nbranch_prefix: b\nops_root: c\n")
    assert err.key == "line 3"
    assert "duplicate key 'ops_root'" in err.problem and "line 1" in err.problem


def test_non_utf8_config_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / ".tunebot.yml").write_bytes(b"ops_root: \xff\xfe\n")
    with pytest.raises(ConfigError) as info:
        load_repo_config(tmp_path)
    assert "UTF-8" in info.value.problem and info.value.file == ".tunebot.yml"


# ---------------------------------------------------------------- listing and resolving ops


@pytest.fixture
def ops_repo(tmp_path: Path) -> Path:
    make_op(tmp_path, "demo", "rms_norm")
    make_op(tmp_path, "demo", "matmul")
    make_op(tmp_path, "tilelang", "rms_norm")
    make_op(tmp_path, "tilelang", "vec_add")
    (tmp_path / "examples" / "demo" / "notes").mkdir()  # no notes.py: not an op
    write(
        tmp_path / "examples" / "demo" / "helper" / "other.py", ""
    )  # module name differs: not an op
    make_op(tmp_path, ".hidden", "secret")
    write(tmp_path / "examples" / "README.md", "ops live here\n")
    return tmp_path


def test_list_ops_is_sorted_and_only_real_ops(ops_repo: Path) -> None:
    assert list_ops(ops_repo, RepoConfig()) == [
        "demo/matmul",
        "demo/rms_norm",
        "tilelang/rms_norm",
        "tilelang/vec_add",
    ]


def test_list_ops_follows_ops_root(ops_repo: Path) -> None:
    make_op(ops_repo, "x", "y", ops_root="kernels")
    assert list_ops(ops_repo, RepoConfig(ops_root="kernels")) == ["x/y"]
    assert list_ops(ops_repo, RepoConfig(ops_root="missing")) == []


def test_resolve_by_op_and_by_project_op(ops_repo: Path) -> None:
    cfg = RepoConfig()
    op = resolve_op(ops_repo, cfg, "matmul")
    assert (op.project, op.name, op.qualified) == ("demo", "matmul", "demo/matmul")
    assert op.dir == Path("examples/demo/matmul") and not op.dir.is_absolute()
    assert op.source == Path("examples/demo/matmul/matmul.py")
    assert resolve_op(ops_repo, cfg, "tilelang/rms_norm").dir == Path("examples/tilelang/rms_norm")
    assert resolve_op(ops_repo, cfg, "demo/rms_norm").qualified == "demo/rms_norm"


def test_ambiguous_name_lists_qualified_names(ops_repo: Path) -> None:
    with pytest.raises(OpNotFound) as info:
        resolve_op(ops_repo, RepoConfig(), "rms_norm")
    err = info.value
    assert err.ambiguous and err.candidates == ["demo/rms_norm", "tilelang/rms_norm"]
    assert (
        "ambiguous" in str(err) and "demo/rms_norm" in str(err) and "tilelang/rms_norm" in str(err)
    )
    assert err.exit_code == 2


@pytest.mark.parametrize(
    "name, suggestion",
    [
        ("rmsnorm", "demo/rms_norm"),
        ("matmull", "demo/matmul"),
        ("vec-add", "tilelang/vec_add"),
        ("MATMUL", "demo/matmul"),
        ("demo/matmu", "demo/matmul"),
    ],
)
def test_unknown_name_lists_candidates_and_close_matches(
    ops_repo: Path, name: str, suggestion: str
) -> None:
    with pytest.raises(OpNotFound) as info:
        resolve_op(ops_repo, RepoConfig(), name)
    err = info.value
    assert not err.ambiguous
    assert err.candidates == list_ops(ops_repo, RepoConfig())
    assert suggestion in err.suggestions
    assert f"Did you mean: {err.suggestions[0]}" in str(err)


def test_unknown_name_without_close_match_still_lists_ops(ops_repo: Path) -> None:
    with pytest.raises(OpNotFound) as info:
        resolve_op(ops_repo, RepoConfig(), "zzzzzz")
    assert info.value.suggestions == [] and "known ops: demo/matmul" in str(info.value)


@pytest.mark.parametrize(
    "name, why",
    [
        ("../rms_norm", "path traversal"),
        ("demo/..", "path traversal"),
        ("./matmul", "path traversal"),
        ("/etc/passwd", "absolute path"),
        ("demo\\matmul", "backslash"),
        ("demo/matmul/x", "more than two parts"),
        ("demo/", "empty part"),
        ("", "empty"),
        ("rms norm", "' '"),
        ("rms;rm -rf", "';'"),
    ],
)
def test_bad_names_are_refused_before_touching_files(ops_repo: Path, name: str, why: str) -> None:
    with pytest.raises(OpNotFound) as info:
        resolve_op(ops_repo, RepoConfig(), name)
    assert why in str(info.value)
    assert "<project>/<op>" in str(info.value)


def test_symlinked_op_outside_ops_root_is_refused(ops_repo: Path, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    make_op(outside, "p", "evil")
    (ops_repo / "examples" / "demo" / "evil").symlink_to(outside / "examples" / "p" / "evil")
    with pytest.raises(OpNotFound) as info:
        resolve_op(ops_repo, RepoConfig(), "demo/evil")
    assert "outside" in str(info.value)


def test_missing_ops_root_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_op(tmp_path, RepoConfig(ops_root="kernels"), "x")
    assert info.value.key == "ops_root" and "'kernels' does not exist" in info.value.problem


# ---------------------------------------------------------------- tune.yaml

FULL_TUNE = """\
    kernel_kind: mix
    entry: run
    inputs: make_inputs
    reference: ref
    knobs:
      - name: BLOCK_M
        strategy: block_size
        values: [32, 64, 128]
        divides: 1024
        multiple_of: 16
      - name: NUM_STAGES
        strategy: pipeline_depth
        values: [0, 1, 2, 3]
      - name: USE_DB
        strategy: multi_buffer
        values: [false, true]
    strategies: [block_size, pipeline_depth]
    accuracy:
      mode: harness
      level: L0
      timeout_s: 60
      rtol: {float16: 2e-2}
      atol: 1e-3
      min_cosine: 0.99
    latency:
      backend: npu-msprof
      warmup: 3
      repeats: 10
      timeout_s: 100
      kernel_name: fused_attn
    target_us: 150
    max_iters: 6
    patience: 2
    noise_floor: 0.05
    proposer: [python, tools/propose.py]
    """


def test_full_tune_yaml_is_read(tmp_path: Path) -> None:
    op = load_op_config(tmp_path, make_op(tmp_path, "p", "op", tune=FULL_TUNE))
    assert (op.project, op.name, op.dir) == ("p", "op", Path("examples/p/op"))
    assert (op.kernel_kind, op.entry, op.inputs, op.reference) == (
        "mix",
        "run",
        "make_inputs",
        "ref",
    )
    assert op.knobs == (
        Knob("BLOCK_M", "block_size", (32, 64, 128), 1024, 16),
        Knob("NUM_STAGES", "pipeline_depth", (0, 1, 2, 3)),
        Knob("USE_DB", "multi_buffer", (False, True)),
    )
    assert op.strategies == ("block_size", "pipeline_depth")
    assert (
        op.accuracy.mode == "harness"
        and op.accuracy.timeout_s == 60.0
        and op.accuracy.min_cosine == 0.99
    )
    # a mapping overrides only the dtypes it names; one number sets every dtype
    assert op.accuracy.rtol == {"float16": 2e-2, "bfloat16": 1e-2, "float32": 1e-4}
    assert set(op.accuracy.atol.values()) == {1e-3}
    assert op.latency == LatencySettings("npu-msprof", 3, 10, 100.0, "fused_attn")
    assert (op.target_us, op.max_iters, op.patience, op.noise_floor) == (150.0, 6, 2, 0.05)
    assert op.proposer == ("python", "tools/propose.py")


def test_missing_tune_yaml_means_defaults(tmp_path: Path) -> None:
    op = load_op_config(tmp_path, make_op(tmp_path, "p", "op"))
    assert op == OpConfig(project="p", name="op", dir=Path("examples/p/op"))


def test_absolute_op_dir_becomes_relative(tmp_path: Path) -> None:
    op = load_op_config(tmp_path, make_op(tmp_path, "p", "op").resolve())
    assert op.dir == Path("examples/p/op")


def test_missing_op_dir_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_op_config(tmp_path, Path("examples/p/nothing"))
    assert "does not exist" in info.value.problem


KNOB = "knobs:\n  - name: BLOCK_M\n    strategy: block_size\n"


@pytest.mark.parametrize(
    "tune, key, in_problem, in_fix",
    [
        ("kernel_knd: vector\n", "kernel_knd", "unknown key", "did you mean 'kernel_kind'"),
        ("tagret_us: 100\n", "tagret_us", "unknown key", "did you mean 'target_us'"),
        ("colour: red\n", "colour", "unknown key", "known keys here"),
        ("kernel_kind: scalar\n", "kernel_kind", "unknown value 'scalar'", "vector, cube, mix"),
        ("entry: 'not a name'\n", "entry", "not a Python name", "function"),
        ("entry: class\n", "entry", "not a Python name", "function"),
        ("knobs: {name: BLOCK_M}\n", "knobs", "expected a list of knobs", "- name: BLOCK_M"),
        ("knobs: [BLOCK_M]\n", "knobs[0]", "expected a mapping", "- name:"),
        (
            "knobs:\n  - strategy: block_size\n    values: [1]\n",
            "knobs[0].name",
            "missing",
            "add `name:`",
        ),
        (
            "knobs:\n  - name: B\n    values: [1]\n",
            "knobs[0].strategy",
            "missing",
            "add `strategy:`",
        ),
        (KNOB, "knobs[0].values", "missing", "add `values:`"),
        (KNOB + "    values: []\n", "knobs[0].values", "the list is empty", "at least one value"),
        (KNOB + "    values: 64\n", "knobs[0].values", "expected a list", "values: [32, 64, 128]"),
        (KNOB + "    values: [32, big]\n", "knobs[0].values[1]", "whole number", "integers"),
        (KNOB + "    values: [32, 1.5]\n", "knobs[0].values[1]", "whole number", "integers"),
        (KNOB + "    values: [-32, 64]\n", "knobs[0].values[0]", "negative", ">= 0"),
        (KNOB + "    values: [64, 32]\n", "knobs[0].values", "strictly increasing", "[32, 64]"),
        (KNOB + "    values: [32, 32]\n", "knobs[0].values", "strictly increasing", "[32]"),
        (
            KNOB + "    values: [32, 48]\n    divides: 1024\n",
            "knobs[0].values",
            "48 do(es) not divide 1024",
            "divisors of 1024",
        ),
        (
            KNOB + "    values: [16, 24]\n    multiple_of: 16\n",
            "knobs[0].values",
            "24 is/are not multiples of 16",
            "multiples of 16",
        ),
        (KNOB + "    values: [16]\n    divides: 0\n", "knobs[0].divides", "at least 1", ">= 1"),
        (
            KNOB + "    values: [16]\n    size: 3\n",
            "knobs[0].size",
            "unknown key",
            "known keys here",
        ),
        (
            "knobs:\n  - name: 3d\n    strategy: block_size\n    values: [1]\n",
            "knobs[0].name",
            "not a Python name",
            "constant",
        ),
        (
            "knobs:\n  - {name: B, strategy: block_sise, values: [1]}\n",
            "knobs[0].strategy",
            "unknown strategy 'block_sise'",
            "did you mean 'block_size'",
        ),
        (
            "knobs:\n  - {name: B, strategy: block_size, values: [1]}\n"
            "  - {name: B, strategy: block_size, values: [2]}\n",
            "knobs[1].name",
            "declared twice",
            "one declaration",
        ),
        (
            "strategies: [block_size, pipelining]\n",
            "strategies[1]",
            "unknown strategy",
            "known strategies",
        ),
        ("strategies: []\n", "strategies", "the list is empty", "remove the key"),
        ("accuracy: {mode: fast}\n", "accuracy.mode", "unknown value 'fast'", "command, harness"),
        ("accuracy: {level: L9}\n", "accuracy.level", "unknown value 'L9'", "L0"),
        ("accuracy: {timeout_s: 0}\n", "accuracy.timeout_s", "must be > 0", "> 0"),
        ("accuracy: {rtol: {fp16: 1e-2}}\n", "accuracy.rtol.fp16", "unknown dtype", "float16"),
        ("accuracy: {atol: {float16: -1}}\n", "accuracy.atol.float16", ">= 0", ">= 0"),
        ("accuracy: {atol: loose}\n", "accuracy.atol", "expected a number", "float16: 1e-2"),
        ("accuracy: {min_cosine: 1.5}\n", "accuracy.min_cosine", "<= 1", "<= 1"),
        ("accuracy: {tolerance: 1}\n", "accuracy.tolerance", "unknown key", "known keys here"),
        ("latency: {backend: gpu}\n", "latency.backend", "unknown value 'gpu'", "auto, cpu, cuda"),
        (
            "latency: {backend: npu_msprof}\n",
            "latency.backend",
            "unknown value",
            "did you mean 'npu-msprof'",
        ),
        ("latency: {warmup: -1}\n", "latency.warmup", "at least 0", ">= 0"),
        ("latency: {repeats: 0}\n", "latency.repeats", "at least 1", ">= 1"),
        ("latency: {repeats: 20001}\n", "latency.repeats", "at most 10000", "<= 10000"),
        (
            "latency: {repeat: 10}\n",
            "latency.repeat",
            "unknown key",
            "did you mean 'latency.repeats'",
        ),
        ("latency: {kernel_name: ''}\n", "latency.kernel_name", "non-empty text", "kernel_name"),
        ("latency: fast\n", "latency", "expected a mapping", "latency:"),
        ("target_us: 0\n", "target_us", "must be > 0", "microseconds"),
        ("max_iters: 2.5\n", "max_iters", "whole number", "max_iters: 10"),
        ("patience: true\n", "patience", "whole number", "patience: 3"),
        ("noise_floor: 5\n", "noise_floor", "must be < 1", "0.03 means 3 %"),
        ("proposer: 42\n", "proposer", "list of texts", "proposer: [a, b]"),
    ],
)
def test_tune_yaml_errors_name_file_key_and_fix(
    tmp_path: Path, tune: str, key: str, in_problem: str, in_fix: str
) -> None:
    err = op_error(tmp_path, tune)
    assert err.file == "examples/p/op/tune.yaml"
    assert err.key == key
    assert in_problem in err.problem
    assert in_fix in err.fix
    assert str(err).startswith("examples/p/op/tune.yaml: key ")


def test_tune_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    err = op_error(tmp_path, "knobs:\n  - name: B\n    values: [1, 2\n")
    assert err.key.startswith("line ") and "not valid YAML" in err.problem
    assert err.file == "examples/p/op/tune.yaml"


def test_exponent_without_dot_is_read_as_a_number(tmp_path: Path) -> None:
    # PyYAML reads `1e-4` as text; users write it anyway.
    op = load_op_config(
        tmp_path, make_op(tmp_path, "p", "op", tune="accuracy: {rtol: 1e-4, atol: 1e-3}\n")
    )
    assert set(op.accuracy.rtol.values()) == {1e-4} and set(op.accuracy.atol.values()) == {1e-3}


def test_proposer_text_is_split_like_a_shell(tmp_path: Path) -> None:
    op = load_op_config(
        tmp_path, make_op(tmp_path, "p", "op", tune="proposer: \"python 'my tool.py' -v\"\n")
    )
    assert op.proposer == ("python", "my tool.py", "-v")


# ---------------------------------------------------------------- DESIGN.md targets


@pytest.mark.parametrize(
    "text, expected",
    [
        ("# op\n\n## 性能目标\n\n- latency <= 120 us\n", 120.0),
        ("## 性能目标\n目标: 120us\n", 120.0),
        ("## 性能目标\n- 目标：85.5 μs\n", 85.5),
        ("## 性能目标\n- 目标 85 µs 以内\n", 85.0),
        ("## Performance target\n\nThe kernel should take 120 μs.\n", 120.0),
        ("## Performance targets\n| metric | value |\n|---|---|\n| latency | 0.5 ms |\n", 500.0),
        ("### 性能目标\n- 基线 300us，目标 200us\n", 200.0),
        ("## 性能目标\n- baseline: 300 us\n- target: 1.2 ms\n", 1200.0),
        ("## 性能目标\n- 当前 300 us\n- 150 us\n", 150.0),
        ("## Performance target\nunder 2 毫秒\n", 2000.0),
        ("## 性能目标\n- 120 users served\n", None),  # 'us' must be a unit, not a word prefix
        ("## 性能目标\n\nTBD\n\n## 其他\n- 50 us\n", None),  # the next section is not read
        ("# Design\n\nlatency 50 us\n", None),  # no performance-target section
        ("```\n## 性能目标\n10 us\n```\n## Notes\n", None),  # headings in code blocks do not count
        (
            "## 性能目标\n### 延迟\n- 目标 70 us\n## 实现\n- 5 us\n",
            70.0,
        ),  # subsections belong to it
        ("", None),
    ],
)
def test_design_target_us(text: str, expected: float | None) -> None:
    assert design_target_us(text) == expected


def test_design_md_target_is_used_when_tune_yaml_has_none(tmp_path: Path) -> None:
    op_dir = make_op(
        tmp_path, "p", "op", tune="max_iters: 3\n", design="## 性能目标\n- 目标 80 us\n"
    )
    assert load_op_config(tmp_path, op_dir).target_us == 80.0


def test_tune_yaml_target_wins_over_design_md(tmp_path: Path) -> None:
    op_dir = make_op(
        tmp_path, "p", "op", tune="target_us: 60\n", design="## 性能目标\n- 目标 80 us\n"
    )
    assert load_op_config(tmp_path, op_dir).target_us == 60.0


# ---------------------------------------------------------------- precedence


def test_effective_settings_flags_over_op_over_repo(tmp_path: Path) -> None:
    repo = RepoConfig(max_iters=8, patience=4, noise_floor=0.04, target_us=500.0)
    bare = OpConfig(project="p", name="op", dir=Path("x"))
    assert effective_settings(repo, bare) == RunSettings(8, 4, 0.04, 500.0, None)
    op = OpConfig(
        project="p",
        name="op",
        dir=Path("x"),
        max_iters=5,
        patience=2,
        noise_floor=0.06,
        target_us=300.0,
        strategies=("block_size",),
    )
    assert effective_settings(repo, op) == RunSettings(5, 2, 0.06, 300.0, ("block_size",))
    flagged = effective_settings(
        repo,
        op,
        max_iters=2,
        target_us=100.0,
        strategies=("pipeline_depth",),
        patience=1,
        noise_floor=0.1,
    )
    assert flagged == RunSettings(2, 1, 0.1, 100.0, ("pipeline_depth",))


def test_effective_settings_defaults_are_the_issue_defaults() -> None:
    settings = effective_settings(RepoConfig(), OpConfig(project="p", name="o", dir=Path("x")))
    assert (settings.max_iters, settings.patience, settings.noise_floor, settings.target_us) == (
        10,
        3,
        0.03,
        None,
    )


@pytest.mark.parametrize(
    "flags, key",
    [
        ({"max_iters": 0}, "--max-iters"),
        ({"target_us": -1.0}, "--target-us"),
        ({"strategies": ("blocksize",)}, "--strategies"),
        ({"patience": 0}, "--patience"),
        ({"noise_floor": 2.0}, "--noise-floor"),
    ],
)
def test_bad_flags_are_config_errors(flags: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        effective_settings(RepoConfig(), OpConfig(project="p", name="o", dir=Path("x")), **flags)
    assert info.value.file == "command line" and info.value.key == key


# ---------------------------------------------------------------- this repository's own files


def test_this_repository_config_and_demo_ops_load() -> None:
    cfg = load_repo_config(REPO_ROOT)
    assert cfg.ops_root == "examples" and cfg.branch_prefix == "tunebot"
    ops = list_ops(REPO_ROOT, cfg)
    for name in ("demo/rms_norm", "demo/matmul", "demo/attention"):
        assert name in ops
        op = resolve_op(REPO_ROOT, cfg, name)
        assert op.knobs and op.target_us is not None, name


def test_github_required_checks_and_allow_no_checks_are_read(tmp_path: Path) -> None:
    write(
        tmp_path / ".tunebot.yml", "github: {required_checks: [ci, lint], allow_no_checks: true}\n"
    )
    cfg = load_repo_config(tmp_path)
    assert cfg.github.required_checks == ("ci", "lint") and cfg.github.allow_no_checks is True
    assert (
        RepoConfig().github.required_checks == () and RepoConfig().github.allow_no_checks is False
    )
    assert (
        repo_error(tmp_path, "github: {allow_no_checks: maybe}\n").key == "github.allow_no_checks"
    )
    assert (
        repo_error(tmp_path, "github: {required_checks: [ci, 3]}\n").key
        == "github.required_checks[1]"
    )


def test_infinite_numbers_are_refused_with_the_key(tmp_path):
    op_dir = tmp_path / "examples" / "p" / "op"
    op_dir.mkdir(parents=True)
    (op_dir / "op.py").write_text("BLOCK = 1\n")
    (op_dir / "tune.yaml").write_text("target_us: .inf\n")
    with pytest.raises(ConfigError) as err:
        load_op_config(tmp_path, op_dir)
    assert err.value.key == "target_us" and "finite" in str(err.value)
