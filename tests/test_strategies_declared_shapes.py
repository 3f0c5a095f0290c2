"""Shapes declared in tune.yaml (`shapes:`) and DESIGN.md feed the kernel's own rules.

A TileLang kernel whose extent is `M = T.symbolic("M")` says nothing in the file about M; only
the op's tune.yaml or DESIGN.md does. Ops here are real folders in real git repos; the dry run
is the `tunebot` command in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_commit, upstream_kernel

from bot.config.discovery import load_op_config
from bot.config.schema import DeclaredShape, Knob
from bot.config.shapes import design_shapes
from bot.errors import ConfigError
from bot.strategies import explain, knobs, shapes
from bot.strategies.base import PlanContext, Refusal, Variant
from bot.strategies.planner import Planner
from bot.strategies.registry import STRATEGIES

# M is symbolic: its size is known only outside the file.
KERNEL = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def scale(block_M=32):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor([M, 64], "float32"), Y: T.Tensor([M, 64], "float32")):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            x = T.alloc_ub([block_M, 64], "float32")
            T.copy(X[cid * block_M, 0], x)
            T.copy(x, Y[cid * block_M, 0])

    return main


def kernel(x, y):
    return scale()(x, y)
"""
KNOB_YAML = "knobs:\n  - {name: block_M, strategy: block_size, values: [32, 64, 96, 128]}\n"


def op_folder(root: Path, tune: str = "", design: str | None = None, source: str = KERNEL) -> Path:
    folder = root / "examples" / "p" / "scale"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scale.py").write_text(source)
    (folder / "tune.yaml").write_text(tune)
    if design is not None:
        (folder / "DESIGN.md").write_text(design)
    return folder


def plan_lines(root: Path, folder: Path) -> str:
    op = load_op_config(root, folder)
    planner = Planner(op)
    source = (folder / "scale.py").read_text()
    specs, skipped = planner.specs(source, ["block_size"])
    return "\n".join(skipped) + "\n" + repr([s.values for s in specs])


# ---------------------------------------------------------------- tune.yaml


def test_tune_yaml_shapes_are_read_by_name(tmp_path):
    folder = op_folder(tmp_path, "shapes:\n  M: 4096\n  N: [1024, 7168]\n")
    op = load_op_config(tmp_path, folder)
    assert op.shapes == (
        DeclaredShape("M", (4096,), "tune.yaml shapes"),
        DeclaredShape("N", (1024, 7168), "tune.yaml shapes"),
    )


@pytest.mark.parametrize(
    "text, key, words",
    [
        ("shapes:\n  M: 4k\n", "shapes.M", "expected a whole number, got the text '4k'"),
        ("shapes:\n  M: 0\n", "shapes.M", "0 is not a size"),
        ("shapes:\n  M: [1024, -8]\n", "shapes.M[1]", "-8 is not a size"),
        ("shapes:\n  M: [1024, true]\n", "shapes.M[1]", "expected a whole number"),
        ("shapes:\n  M: []\n", "shapes.M", "the list is empty"),
        ("shapes:\n  2M: 64\n", "shapes.2M", "not a name"),
        ("shapes: [M, 4096]\n", "shapes", "expected a mapping"),
        ("shape:\n  M: 4096\n", "shape", "unknown key"),
        # one name declared twice with different sizes: say both in one list instead
        ("shapes:\n  M: 4096\n  M: 1024\n", "line 3", "duplicate key 'M'"),
    ],
)
def test_a_malformed_tune_yaml_declaration_names_the_file_key_and_fix(tmp_path, text, key, words):
    folder = op_folder(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_op_config(tmp_path, folder)
    assert err.value.exit_code == 2
    assert err.value.file == "examples/p/scale/tune.yaml" and err.value.key == key
    assert words in str(err.value) and "Fix:" in str(err.value)


def test_a_symbolic_shape_declared_only_in_tune_yaml_limits_the_block(tmp_path):
    # nothing declared: only divisors of the current 32 are provably safe
    text = plan_lines(tmp_path, op_folder(tmp_path, KNOB_YAML))
    assert "block_M=64 refused" in text and "only divisors of the current 32" in text
    assert "[(32,)]" in text
    # M: 4096 declared: 64 and 128 divide it, 96 does not, and the refusal says where M came from
    text = plan_lines(tmp_path, op_folder(tmp_path, KNOB_YAML + "shapes:\n  M: 4096\n"))
    assert "[(32, 64, 128)]" in text
    assert (
        "block_M=96 refused: block_M=96 does not divide 4096 (`M // block_M` at line 11 needs "
        "full tiles) (with M=4096 from tune.yaml shapes)"
    ) in text
    assert "block_M=64 refused" not in text


# ---------------------------------------------------------------- DESIGN.md


DESIGN = """\
# scale

## Design

- Kind: vector. Shapes: X and Y are M x 64 float32.

## Shapes

- M = 4096 (rows)
- latency 120 us, a 64 KiB tile

## 性能目标

- 目标: latency <= 100 us
"""


def test_a_symbolic_shape_declared_in_design_md_limits_the_block(tmp_path):
    folder = op_folder(tmp_path, KNOB_YAML, DESIGN)
    op = load_op_config(tmp_path, folder)
    assert op.shapes == (DeclaredShape("M", (4096,), "DESIGN.md line 9"),)
    assert op.target_us == 100.0  # the target is still read from the same file
    text = plan_lines(tmp_path, folder)
    assert "[(32, 64, 128)]" in text
    assert (
        "block_M=96 does not divide 4096" in text and "(with M=4096 from DESIGN.md line 9)" in text
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        ("## Shapes\nM, N, K = 1024, 512, 2048\n", {"M": (1024,), "N": (512,), "K": (2048,)}),
        ("## 形状\n- `M` ∈ {1024, 4096}; T in [8, 16]\n", {"M": (1024, 4096), "T": (8, 16)}),
        ("## Problem sizes\n| name | sizes |\n|---|---|\n| `M` | 7, 9 |\n", {"M": (7, 9)}),
        ("## 输入规模\nM: 4096\nN = 1024 / 2048\n", {"M": (4096,), "N": (1024, 2048)}),
        ("- Kind: cube. Shapes: M = 4096, N = 1024.\n", {"M": (4096,), "N": (1024,)}),
        # prose, products and quantities are not claims
        ("## Shapes\nA = 4096 x 1024\nlatency: 120 us\nX = 64 KiB\n| R | 4 x 2 |\n", {}),
        # a section about blocks or tiles is not about the op's shapes
        ("## Block sizes\nBLOCK_M = 64\n", {}),
        ("- Tile shape: block_M = 128, Shapes: M = 64\n", {}),
        ("## Design\nM = 4096\n", {}),  # outside a shapes section and without a label
    ],
)
def test_design_md_shapes_are_read_leniently_and_claimed_precisely(text, expected):
    found: dict[str, tuple[int, ...]] = {}
    for shape in design_shapes(text, "DESIGN.md"):
        found[shape.name] = found.get(shape.name, ()) + shape.values
    assert found == expected


def test_the_shipped_design_files_claim_no_shape_they_do_not_name():
    # their "Shapes: A, B, C are 4096 x 4096 float16" lines name tensors, not sizes by name
    root = Path(__file__).parent.parent / "examples"
    files = sorted(root.glob("*/*/DESIGN.md"))
    assert len(files) >= 6
    for path in files:
        assert design_shapes(path.read_text(), str(path)) == (), path


@pytest.mark.parametrize(
    "line, words", [("M = 0", "0 is not a size"), ("M = 40.5", "40.5 is not a size")]
)
def test_a_malformed_design_md_declaration_is_an_error_naming_the_line(tmp_path, line, words):
    folder = op_folder(tmp_path, "", f"# op\n\n## Shapes\n\n{line}\n")
    with pytest.raises(ConfigError) as err:
        load_op_config(tmp_path, folder)
    assert err.value.exit_code == 2 and err.value.file == "examples/p/scale/DESIGN.md"
    assert err.value.key == "M (line 5)" and words in str(err.value)


# ---------------------------------------------------------------- several sources


def test_every_declared_and_in_file_size_must_hold(tmp_path):
    # tune.yaml says 4096, DESIGN.md says 1600: a block must divide both
    folder = op_folder(tmp_path, KNOB_YAML + "shapes:\n  M: 4096\n", "## Shapes\nM = 1600\n")
    text = plan_lines(tmp_path, folder)
    assert "[(32, 64)]" in text  # 128 divides 4096 but not 1600
    assert "block_M=128 does not divide 1600" in text and "from DESIGN.md line 2" in text
    # get_inputs runs it with 192 too: 64 still divides all three, 96 none of 4096's
    src = KERNEL + "\n\ndef get_inputs(seed=0):\n    M = 192\n    return (M,)\n"
    folder = op_folder(tmp_path, KNOB_YAML + "shapes:\n  M: [4096, 1600]\n", source=src)
    text = plan_lines(tmp_path, folder)
    assert "[(32, 64)]" in text


def test_a_size_the_kernel_fixes_is_never_overridden(tmp_path):
    fixed = KERNEL.replace('M = T.symbolic("M")', "M = 96")
    folder = op_folder(tmp_path, KNOB_YAML + "shapes:\n  M: 4096\n", source=fixed)
    text = plan_lines(tmp_path, folder)
    # 96 divides the kernel's own M = 96, 64 does not: the declared 4096 plays no part
    assert "[(32, 96)]" in text
    assert text.count("4096") == 1  # only in the note below: no rule used it
    assert (
        "block_M=64 refused: block_M=64 does not divide 96 (`M // block_M` at line 11 needs full "
        "tiles)\n"
    ) in text
    assert (
        "block_size: shape M=4096 (tune.yaml shapes) not used: the kernel fixes it itself" in text
    )


def test_a_shape_may_be_declared_under_the_symbol_s_own_name(tmp_path):
    # `M = T.symbolic("num_rows")`: `num_rows: 4096` fills M as `M: 4096` would
    source = KERNEL.replace('T.symbolic("M")', 'T.symbolic("num_rows")')
    folder = op_folder(tmp_path, KNOB_YAML + "shapes:\n  num_rows: 4096\n", source=source)
    text = plan_lines(tmp_path, folder)
    assert "[(32, 64, 128)]" in text and "(with M=4096 from tune.yaml shapes)" in text
    assert "not used" not in text


def test_a_declared_name_no_kernel_reads_is_listed_as_not_used(tmp_path):
    folder = op_folder(tmp_path, KNOB_YAML + "shapes:\n  seq_len: 4096\n")
    assert "shape seq_len=4096 (tune.yaml shapes) not used: no kernel factory reads that name" in (
        plan_lines(tmp_path, folder)
    )


def test_set_knob_results_depend_on_the_declared_shapes():
    knob = Knob("block_M", "block_size", (32, 128))
    fits = (DeclaredShape("M", (4096,), "tune.yaml shapes"),)
    tail = (DeclaredShape("M", (4160,), "tune.yaml shapes"),)  # 4160 = 32 * 130, not 128 * n
    assert isinstance(knobs.set_knob(KERNEL, knob, 128, None, "scale.py", fits), Variant)
    refused = knobs.set_knob(KERNEL, knob, 128, None, "scale.py", tail)
    assert isinstance(refused, Refusal) and "does not divide 4160" in refused.reason
    again = knobs.set_knob(KERNEL, knob, 128, None, "scale.py", fits)
    assert isinstance(again, Variant)  # the cache is keyed on the shapes too


def test_a_changed_tune_yaml_is_not_answered_from_the_cache(tmp_path):
    folder = op_folder(tmp_path, KNOB_YAML + "shapes:\n  M: 4096\n")
    assert "[(32, 64, 128)]" in plan_lines(tmp_path, folder)
    first = Planner(load_op_config(tmp_path, folder)).next(PlanContext(KERNEL))
    assert isinstance(first, Variant) and first.change.new == 128  # the far end first
    (folder / "tune.yaml").write_text(KNOB_YAML + "shapes:\n  M: 4160\n")  # 4160 = 64 * 65
    text = plan_lines(tmp_path, folder)
    assert "[(32, 64)]" in text and "block_M=128 does not divide 4160" in text
    first = Planner(load_op_config(tmp_path, folder)).next(PlanContext(KERNEL))
    assert isinstance(first, Variant) and first.change.new == 64


WIDE = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def rows(block_M=4):
    M = 1024
    N = T.symbolic("N")

    @T.prim_func
    def main(X: T.Tensor([M, N], "float32"), Y: T.Tensor([M, N], "float32")):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            x = T.alloc_ub([block_M, N], "float32")
            T.copy(X[cid * block_M, 0], x)
            T.copy(x, Y[cid * block_M, 0])

    return main
"""


def test_a_declared_size_lets_the_buffers_be_counted():
    # x is [block_M, N] fp32 in UB (192 KiB): with N unknown its size cannot be read, so no
    # capacity refusal rests on a guess; with N = 8192 declared, 4 rows take 128 KiB (fits),
    # 8 rows 256 KiB (does not)
    knob = Knob("block_M", "block_size", (4, 8))
    assert isinstance(knobs.set_knob(WIDE, knob, 8), Variant)
    declared = (DeclaredShape("N", (8192,), "tune.yaml shapes"),)
    r = knobs.set_knob(WIDE, knob, 8, None, "rows.py", declared)
    assert isinstance(r, Refusal)
    assert "UB buffers as allocated (x (line 13))" in r.reason and "262144 bytes" in r.reason
    assert "(with N=8192 from tune.yaml shapes)" in r.reason


def test_the_refusal_reaches_the_stop_record_lines_with_its_source(tmp_path):
    # explain.not_planned is what results.jsonl's stop record, opt_log.md and the report carry
    folder = op_folder(tmp_path, KNOB_YAML, "# scale\n\n## 形状\n\n- M = 4096\n")
    lines = explain.not_planned(Planner(load_op_config(tmp_path, folder)), PlanContext(KERNEL))
    assert (
        "block_size: block_M=96 refused: block_M=96 does not divide 4096 (`M // block_M` at line "
        "11 needs full tiles) (with M=4096 from DESIGN.md line 5)"
    ) in lines


def test_every_size_is_checked_even_when_the_combinations_are_too_many():
    # 3 names x 10 sizes = 1000 combinations: more than are checked, but each size of each name
    # still appears in some choice, so a rule on one extent sees every size it can take
    found = {n: tuple(range(1, 11)) for n in ("K", "M", "N")}
    picked = shapes.choices(found)
    assert len(picked) < 1000
    for name, sizes in found.items():
        assert {c[name] for c in picked} == set(sizes)
    # a small product is checked whole
    assert len(shapes.choices({"M": (1, 2), "N": (3, 4)})) == 4


ASSERTED = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def cols(N, block_N=32):
    assert N % block_N == 0, "N must be a multiple of block_N"

    @T.prim_func
    def main(X: T.Tensor((128, N), "float16"), Y: T.Tensor((128, N), "float16")):
        with T.Kernel(N // block_N, is_npu=True) as (cid, _):
            buf = T.alloc_ub((128, block_N), "float16")
            T.copy(X[0, cid * block_N], buf)
            T.copy(buf, Y[0, cid * block_N])

    return main


def run(x):
    return cols(x.shape[-1])(x)
"""


def test_the_kernel_s_own_assert_is_checked_with_a_declared_run_time_size():
    # N is bound at run time (x.shape[-1]): without a size only divisors of the current 32
    knob = Knob("block_N", "block_size", (32, 64))
    r = knobs.set_knob(ASSERTED, knob, 64)
    assert isinstance(r, Refusal) and "only divisors of the current 32" in r.reason
    fits = (DeclaredShape("N", (128,), "tune.yaml shapes"),)
    assert isinstance(knobs.set_knob(ASSERTED, knob, 64, None, "cols.py", fits), Variant)
    declared = (DeclaredShape("N", (96,), "DESIGN.md line 3"),)
    r = knobs.set_knob(ASSERTED, knob, 64, None, "cols.py", declared)
    assert isinstance(r, Refusal)
    assert r.reason == (
        "block_N=64 breaks the kernel's assert at line 7: `N % block_N == 0` "
        "(with N=96 from DESIGN.md line 3)"
    )


# ---------------------------------------------------------------- upstream kernels


def test_upstream_dynamic_shape_matmul_keeps_its_own_sizes_when_larger_ones_are_declared():
    # matmul_dynamic_shape: M, N, K symbolic, tails handled by T.min, so a block past the
    # largest size the file's own test runs it with (M, N in {1024, 512}) only idles; L0C holds
    # [block_M, block_N] fp32 (128 KiB), so 256 x 256 is too much. Declaring larger sizes
    # loosens nothing here: L0C refuses what the file's sizes leave out, at every size.
    source = upstream_kernel("npuir_matmul_dynamic_shape.py")
    values = (16, 32, 64, 128, 256, 512, 1024)
    big = (
        DeclaredShape("M", (8192,), "tune.yaml shapes"),
        DeclaredShape("N", (8192,), "DESIGN.md line 4"),
    )
    for name in ("block_M", "block_N"):
        plain, plain_refused = knobs.legal_values(source, name, values)
        legal, refused = knobs.legal_values(source, name, values, big)
        assert legal == plain and refused == plain_refused
    assert knobs.legal_values(source, "block_M", values, big)[0] == (16, 32, 64, 128)
    (why,) = [w for v, w in knobs.legal_values(source, "block_N", values, big)[1] if v == 1024]
    assert "L0C" in why and "128 KiB" in why


def test_upstream_act_quant_takes_its_symbolic_m_from_a_declaration():
    # act_quant_kernel: M = T.symbolic("M"), m_num = M // block_M (full tiles). The file's own
    # tests build x with M = 64 and call the kernel on it, so the run path fixes M = 64; without
    # those tests (the kernel module alone) nothing sets M and only divisors of 32 are safe.
    source = upstream_kernel("example_act_quant_kernel.py")
    kernel_only = source[: source.index("def test_act_quant():")]
    values = (16, 32, 64, 96, 128)
    legal, refused = knobs.legal_values(source, "block_M", values)
    assert legal == (16, 32, 64)
    assert all("M=64, a size this file runs the op with" in why for _, why in refused)
    assert knobs.legal_values(kernel_only, "block_M", values)[0] == (16, 32)
    declared = (DeclaredShape("M", (4096,), "tune.yaml shapes"),)
    legal, refused = knobs.legal_values(kernel_only, "block_M", values, declared)
    assert legal == (16, 32, 64, 128)
    assert [v for v, _ in refused] == [96]
    assert (
        "does not divide 4096" in refused[0][1] and "M=4096 from tune.yaml shapes" in refused[0][1]
    )
    # a declaration adds a size; it never loosens the file's own (64 stays, 96 takes 64 away)
    assert knobs.legal_values(source, "block_M", values, declared)[0] == (16, 32, 64)
    small = (DeclaredShape("M", (96,), "tune.yaml shapes"),)
    legal, refused = knobs.legal_values(source, "block_M", values, small)
    assert legal == (16, 32)
    assert "does not divide 96" in dict(refused)[64]
    # a declaration the running kernel contradicts (32 does not divide 100) is not used: the
    # rule guarding the unknown extent stays, and the plan says why the declaration was left out
    wrong = (DeclaredShape("M", (100,), "DESIGN.md line 7"),)
    assert knobs.legal_values(kernel_only, "block_M", values, wrong)[0] == (16, 32)
    (note,) = knobs.unused_shapes(kernel_only, wrong)
    assert note.startswith("shape M=100 (DESIGN.md line 7) not used for block_M: the current ")
    assert "block_M=32 already breaks" in note


# ---------------------------------------------------------------- positive sizes by strategy


def test_positive_values_are_a_property_of_the_strategy_not_its_name(monkeypatch):
    assert knobs.check_constraints(Knob("BLOCK_M", "block_size", (0, 64)), 0) == (
        "BLOCK_M=0: a block size must be positive"
    )
    assert knobs.check_constraints(Knob("DEPTH", "pipeline_depth", (0, 2)), 0) is None
    # a strategy whose entry says its values are sizes gets the same rule, with its own noun
    pipeline = STRATEGIES["pipeline_depth"]
    entry = pipeline.entry
    from dataclasses import replace

    tiles = replace(pipeline, entry=replace(entry, id="tile_count", positive="a tile count"))
    monkeypatch.setitem(STRATEGIES, "tile_count", tiles)
    assert knobs.check_constraints(Knob("TILES", "tile_count", (0, 2)), 0) == (
        "TILES=0: a tile count must be positive"
    )
    assert knobs.check_constraints(Knob("TILES", "tile_count", (0, 2)), 2) is None


# ---------------------------------------------------------------- the dry run


def _dry_run(git_repo) -> subprocess.CompletedProcess[str]:
    """`tunebot tune scale --dry-run` as a user runs it: a subprocess on the real repository."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "bot.cli",
            "tune",
            "scale",
            "--repo",
            str(git_repo.path),
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_dry_run_shows_the_refusal_with_where_the_shape_came_from(git_repo):
    make_commit(
        git_repo.path,
        {
            "examples/p/scale/scale.py": KERNEL,
            "examples/p/scale/tune.yaml": KNOB_YAML + "shapes:\n  M: 4096\n",
        },
        "add scale",
    )
    done = _dry_run(git_repo)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "not planned: block_size: block_M=96 refused: block_M=96 does not divide 4096" in out
    assert "(with M=4096 from tune.yaml shapes)" in out
    assert "block_M: 32 -> 128" in out  # what the declaration allows is planned


def test_dry_run_with_a_malformed_declaration_exits_2(git_repo):
    make_commit(
        git_repo.path,
        {
            "examples/p/scale/scale.py": KERNEL,
            "examples/p/scale/tune.yaml": KNOB_YAML + "shapes:\n  M: big\n",
        },
        "add scale",
    )
    done = _dry_run(git_repo)
    assert done.returncode == 2
    assert "examples/p/scale/tune.yaml: key 'shapes.M'" in done.stderr
    assert "expected a whole number" in done.stderr and "Fix:" in done.stderr
