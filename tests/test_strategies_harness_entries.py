"""The functions a harness calls by name (the op's entry, inputs and reference, as tune.yaml
names them) count as run: a module constant that feeds only them is the knob, and one that
feeds only functions nothing runs is left out."""

from __future__ import annotations

import textwrap
from pathlib import Path

from bot.config.discovery import load_op_config
from bot.config.schema import DEFAULT_HARNESS, Knob
from bot.strategies import knobs
from bot.strategies.base import PlanContext, Variant
from bot.strategies.planner import Planner
from bot.strategies.source import changed_lines

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)

# `__main__` runs only a smoke test with its own literal; the timed function is run_rows()
KERNEL = textwrap.dedent("""\
    import tilelang
    import tilelang.language as T

    DEFAULT_BLOCK_M = 64

    @tilelang.jit(target="npuir")
    def rows(M, block_M):
        @T.prim_func
        def main(A: T.Tensor((M,), "float16")):
            with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                buf = T.alloc_ub((block_M,), "float16")
                T.copy(A[cid * block_M], buf)

        return main

    def smoke():
        return rows(48, 16)

    def run_rows(a):
        return rows(1024, DEFAULT_BLOCK_M)(a)

    if __name__ == "__main__":
        smoke()
""")
HARNESS = ("run_rows", "make_inputs", "torch_rows")


def test_the_default_harness_names_are_the_op_contracts_defaults():
    assert DEFAULT_HARNESS == ("kernel", "get_inputs", "reference")


def test_a_constant_feeding_the_renamed_entry_is_the_knob():
    assert knobs.discover(KERNEL, HARNESS) == ["DEFAULT_BLOCK_M"]
    v = knobs.set_knob(KERNEL, Knob("DEFAULT_BLOCK_M", "block_size", BS), 128, harness=HARNESS)
    assert isinstance(v, Variant), v
    assert changed_lines(KERNEL, v.source) == [("DEFAULT_BLOCK_M = 64", "DEFAULT_BLOCK_M = 128")]
    # the rules are those of the call it feeds (M=1024), not the smoke test's M=48
    legal, _ = knobs.legal_values(KERNEL, "DEFAULT_BLOCK_M", BS, harness=HARNESS)
    assert legal == (8, 16, 32, 64, 128, 256, 512, 1024)
    # under the default names nothing runs run_rows(): editing the constant measures nothing
    assert knobs.discover(KERNEL) == []
    why = {d.name: d.reason for d in knobs.dropped(KERNEL)}["block_M"]
    assert "feeds only calls the file never runs" in why, why


def _op_dir(root: Path, tune: str) -> Path:
    op_dir = root / "examples" / "p" / "rows"
    op_dir.mkdir(parents=True)
    (op_dir / "rows.py").write_text(KERNEL, encoding="utf-8")
    (op_dir / "tune.yaml").write_text(tune, encoding="utf-8")
    return op_dir


def test_the_planner_takes_the_entry_names_from_tune_yaml(tmp_path: Path):
    renamed = "kernel_kind: vector\nentry: run_rows\ninputs: make_inputs\nreference: torch_rows\n"
    op = load_op_config(tmp_path, _op_dir(tmp_path, renamed))
    assert op.harness_functions == HARNESS
    plan = "\n".join(Planner(op).plan(PlanContext(best_source=KERNEL)))
    assert "DEFAULT_BLOCK_M: 64 -> 128" in plan, plan
    assert "feeds only calls the file never runs" not in plan
    plain = load_op_config(tmp_path / "b", _op_dir(tmp_path / "b", "kernel_kind: vector\n"))
    plan = "\n".join(Planner(plain).plan(PlanContext(best_source=KERNEL)))
    assert "DEFAULT_BLOCK_M: 64 ->" not in plan
    assert "feeds only calls the file never runs" in plan, plan


def test_a_knob_tune_yaml_declares_is_bound_through_the_renamed_entry(tmp_path: Path):
    tune = (
        "kernel_kind: vector\nentry: run_rows\nknobs:\n"
        "  - name: DEFAULT_BLOCK_M\n    strategy: block_size\n    values: [32, 64, 128, 2048]\n"
    )
    op = load_op_config(tmp_path, _op_dir(tmp_path, tune))
    plan = "\n".join(Planner(op).plan(PlanContext(best_source=KERNEL)))
    assert "DEFAULT_BLOCK_M: 64 -> 128" in plan, plan
    assert "DEFAULT_BLOCK_M=2048 refused" in plan and "does not divide 1024" in plan, plan
