"""A remainder `X % knob` demands full tiles only where the kernel checks it (an assert, an
`if ...: raise`); computed anywhere else it is how the kernel handles the partial tile."""

from __future__ import annotations

from conftest import upstream_kernel

from bot.config.schema import Knob
from bot.strategies import knobs
from bot.strategies.base import Refusal, Variant

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)


# top_k candidates per row, of which only `real_top_k` are real: the last tile's
# `real_top_k % block_I` valid lanes are masked in; the assert is the kernel's only demand
MASKED = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def sparse(seq_len, top_k, block_I=32):
    assert top_k % block_I == 0, "whole tiles of candidates"

    @T.prim_func
    def main(Idx: T.Tensor((seq_len, top_k), "int32"), O: T.Tensor((seq_len, top_k), "float")):
        with T.Kernel(seq_len, is_npu=True) as (cid, _):
            mask = T.alloc_ub((1, block_I), "float")
            real_top_k = T.min(T.max(cid, 1), top_k)
            valid = real_top_k % block_I
            for i in T.serial(valid):
                mask[0, i] = 1.0
            for b in T.serial(T.ceildiv(top_k, block_I)):
                T.copy(mask, O[cid, b * block_I])

    return main


kernel = sparse(128, 64)
"""

# the same demand written as a raising check instead of an assert
RAISING = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def rows(M, block_M=32):
    if M % block_M != 0:
        raise ValueError("M must be a multiple of block_M")

    @T.prim_func
    def main(A: T.Tensor((M,), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M,), "float16")
            T.copy(A[cid * block_M : (cid + 1) * block_M], buf)

    return main


kernel = rows(96)
"""


def bs(name: str) -> Knob:
    return Knob(name, "block_size", BS)


def test_a_remainder_the_kernel_masks_is_not_a_full_tile_rule():
    legal, refused = knobs.legal_values(MASKED, "block_I", BS)
    assert legal == (8, 16, 32, 64)  # every divisor of top_k=64: the assert's rule
    reasons = dict(refused)
    assert "breaks the kernel's assert" in reasons[128] and "top_k % block_I" in reasons[128]
    assert not any("needs full tiles" in r for r in reasons.values()), reasons
    assert isinstance(knobs.set_knob(MASKED, bs("block_I"), 64), Variant)


def test_a_raising_check_is_an_assert_of_the_opposite():
    legal, refused = knobs.legal_values(RAISING, "block_M", BS)
    assert legal == (8, 16, 32)  # divisors of M=96 among the tried values, within its extent
    r = knobs.set_knob(RAISING, bs("block_M"), 64)
    assert isinstance(r, Refusal)
    assert "makes the kernel raise" in r.reason and "M % block_M != 0" in r.reason


def test_sparse_mla_fwd_block_I_64_is_planned_and_128_refused_by_its_assert():
    # upstream sparse_mla_fwd: `valid_mod = real_top_k % block_I` (line 247) sizes the mask of
    # the last, partial tile; `assert top_k % block_I == 0` (line 55) with top_k=64 is the rule
    source = upstream_kernel("sparse_mla_fwd.py")
    legal, refused = knobs.legal_values(source, "block_I", BS)
    assert legal == (16, 32, 64)  # 8: a part cube fractal (fractal.py)
    reasons = dict(refused)
    assert all("assert at line 55" in reasons[v] for v in (128, 256, 512, 1024, 2048))
    v = knobs.set_knob(source, bs("block_I"), 64)
    assert isinstance(v, Variant) and v.change.old == 32 and v.change.new == 64
