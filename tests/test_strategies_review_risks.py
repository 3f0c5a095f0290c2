"""Review risks of the last session, each on a self-written kernel: a host padding counts only
where the kernel is built (hostpad.py); ..."""

from __future__ import annotations

from bot.strategies import inventory

# num_tokens is symbolic; the clipped copies handle a partial last tile. {HOST} is the host code.
PADDED = """
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def rows(hidden):
    block_m = 16
    num_tokens = T.symbolic("num_tokens")

    @T.prim_func
    def main(X: T.Tensor((num_tokens, hidden), "float16"), Y: T.Tensor((num_tokens, hidden), "float16")):
        with T.Kernel(T.ceildiv(num_tokens, block_m)) as bx:
            buf = T.alloc_ub((block_m, hidden), "float16")
            T.copy(X[bx * block_m : (bx + 1) * block_m, :], buf)
            T.copy(buf, Y[bx * block_m : (bx + 1) * block_m, :])

    return main


{HOST}
"""


def test_a_same_named_padding_in_an_unrelated_function_sets_no_granule():
    src = PADDED.replace(
        "{HOST}",
        "def reference_rows(num_tokens):\n"
        "    return ((num_tokens + 15) // 16) * 16\n\n\n"
        "def run(x):\n"
        "    return rows(x.shape[1])(x)\n",
    )
    (knob,) = inventory.inventory(src).knobs
    ok, refused = knob.legal((8, 16, 32, 64))
    assert ok == (8, 16, 32, 64), refused


def test_the_padding_where_the_kernel_is_built_still_sets_the_granule():
    src = PADDED.replace(
        "{HOST}",
        "def run(x, num_tokens):\n"
        "    if num_tokens % 16 != 0:\n"
        "        x = pad_rows(x, ((num_tokens + 15) // 16) * 16)\n"
        "    return rows(x.shape[1])(x)\n",
    )
    (knob,) = inventory.inventory(src).knobs
    ok, refused = knob.legal((8, 16, 32, 64))
    assert ok == (8, 16) and "pads `num_tokens` only to a multiple of 16" in refused[0][1]
