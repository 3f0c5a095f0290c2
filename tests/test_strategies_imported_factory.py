"""A block size passed only to a kernel factory the file imports from another module is never
tuned on a guess (bot/strategies/imported.py): the kernel's rules are not in the file, so the
name is dropped with that reason; a knob tune.yaml declares anyway is planned as declared, with
a note saying its values are not checked. Library calls (tilelang, torch) are not factories."""

from __future__ import annotations

from pathlib import Path

from bot.config.schema import Knob, OpConfig
from bot.strategies import knobs
from bot.strategies.planner import Planner

# no kernel in the file: the plain-Python (name-based) path
IMPORTED_ONLY = """
import torch
from kernels.gemm import matmul

M, N, K = 1024, 1024, 1024
BLOCK_M = 128
BLOCK_N = 128


def main():
    kernel = matmul(M, N, K, block_M=BLOCK_M, block_N=BLOCK_N)
    return kernel(torch.randn(M, K).npu(), torch.randn(K, N).npu())


if __name__ == "__main__":
    main()
"""

# a kernel of its own beside an imported one
BESIDE = """
import tilelang
import tilelang.language as T
import kernels


@tilelang.jit(target="npuir")
def rows(M, block_M=32):
    @T.prim_func
    def main(A: T.Tensor((M,), "float16")):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M,), "float16")
            T.copy(A[cid * block_M], buf)

    return main


BLOCK_N = 128

if __name__ == "__main__":
    rows(1024)
    kernels.matmul(1024, 1024, 1024, block_N=BLOCK_N)
"""

# a local helper reads the constant too: the file itself uses it
READ_HERE = IMPORTED_ONLY.replace(
    "    return kernel(", "    assert M % BLOCK_M == 0\n    return kernel("
)


def _op(**kw) -> OpConfig:
    return OpConfig(project="u", name="op", dir=Path("examples/u/op"), kernel_kind="mix", **kw)


def test_blocks_passed_only_to_an_imported_factory_are_dropped_with_the_reason():
    specs, skipped = Planner(_op()).specs(IMPORTED_ONLY, ["block_size"])
    assert specs == []
    (why,) = [s for s in skipped if s.startswith("block_size: BLOCK_N: ")]
    assert "matmul() (line 11)" in why and "imports from kernels.gemm" in why


def test_an_imported_factory_beside_the_files_own_kernel():
    specs, skipped = Planner(_op()).specs(BESIDE, ["block_size"])
    assert [s.key for s in specs] == ["block_M"]
    assert any(s.startswith("block_size: BLOCK_N: ") and "kernels.matmul()" in s for s in skipped)


def test_a_declared_knob_is_planned_with_a_note_that_its_values_are_unchecked():
    op = _op(knobs=[Knob("BLOCK_N", "block_size", (64, 128, 256))])
    _, skipped = Planner(op).specs(IMPORTED_ONLY, ["block_size"])
    assert any("planned as declared, unchecked" in s for s in skipped)


def test_a_constant_the_file_reads_itself_is_still_discovered():
    assert "BLOCK_M" in knobs.discover(READ_HERE)
    assert "BLOCK_N" not in knobs.discover(READ_HERE)
