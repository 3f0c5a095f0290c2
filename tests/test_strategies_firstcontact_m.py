"""heldout_m first-contact failures, each on a small kernel written for the test."""

from __future__ import annotations

from bot.strategies import inventory, multibuffer
from bot.strategies.base import Refusal, Variant

FLAG_OFF_WITH_REASON = """
import tilelang
import tilelang.language as T


@tilelang.jit(
    target="npuir",
    pass_configs={
        # Keep auto multi-buffering off here: the doubled buffers of the three
        # matmuls overflow the on-chip budget.
        "npuir.enable_auto_multi_buffer": False,
    },
)
def scale(n, block=64):
    @T.prim_func
    def main(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(n // block) as bx:
            buf = T.alloc_shared((block,), "float16")
            T.copy(X[bx * block], buf)
            T.copy(buf, Y[bx * block])

    return main
"""


def test_a_flag_turned_off_with_a_stated_reason_is_not_turned_on():
    r = multibuffer.set_flag(FLAG_OFF_WITH_REASON, True)
    assert isinstance(r, Refusal)
    assert "on purpose" in r.reason and "on-chip budget" in r.reason


def test_a_flag_turned_off_without_a_reason_is_still_turned_on():
    bare = FLAG_OFF_WITH_REASON.replace(
        "        # Keep auto multi-buffering off here: the doubled buffers of the three\n"
        "        # matmuls overflow the on-chip budget.\n",
        "",
    )
    assert isinstance(multibuffer.set_flag(bare, True), Variant)
    # a trailing comment on the entry states a reason as well
    trailing = bare.replace(
        '": False,', '": False,  # off: the manual double buffer below replaces it'
    )
    assert isinstance(multibuffer.set_flag(trailing, True), Refusal)
    # a comment about something else is not a reason for this flag
    other = bare.replace("    pass_configs={\n", "    pass_configs={\n        # tuned on 910B\n")
    assert isinstance(multibuffer.set_flag(other, True), Variant)


MACRO_READS_THE_LOCAL = """
import tilelang as tl
import tilelang.language as T


def rows_pass(M, n):
    block_N = 32

    @tl.jit(target="npuir")
    def _func():
        @T.macro
        def _body(X: T.Tensor((M, n), "float32"), Y: T.Tensor((M, n), "float32")):
            with T.Kernel(T.ceildiv(n, block_N) * M, is_npu=True) as (cid, _):
                for ti in T.serial(block_N):
                    Y[cid % M, ti] = X[cid % M, ti]

        @T.prim_func
        def main(X: T.Tensor((M, n), "float32"), Y: T.Tensor((M, n), "float32")):
            _body(X, Y)

        return main

    return _func


if __name__ == "__main__":
    rows_pass(1, 4096)()
"""


def test_a_local_read_through_a_macro_the_kernel_calls_is_a_knob():
    inv = inventory.inventory(MACRO_READS_THE_LOCAL)
    knob = inv.knob("block_N")
    assert knob is not None and knob.site.line == 7 and knob.value == 32
    assert not any(d.name == "block_N" for d in inv.dropped)


NONE_FILL_AND_PRINTED_LOCAL = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def rows(n, heads, block_N=64, block_Q=None):
    if block_Q is None:
        block_Q = max(1, 128 // heads)

    @T.prim_func
    def main(X: T.Tensor((n, heads), "float16"), Y: T.Tensor((n, heads), "float16")):
        with T.Kernel(n // block_N, is_npu=True) as (bx, _):
            buf = T.alloc_shared((block_N, block_Q), "float16")
            T.copy(X[bx * block_N, 0], buf)
            T.copy(buf, Y[bx * block_N, 0])

    return main


def helper_interface(x, block_N=32):
    return rows(x.shape[0], x.shape[1], block_N=block_N)


def test_small():
    BN, BQ = 16, 4
    print(f"compile rows(BN={BN}, BQ={BQ})")
    k = rows(256, 8, block_N=BN, block_Q=BQ)
    return k


if __name__ == "__main__":
    test_small()
"""


def test_a_none_fill_a_printed_local_and_an_unrun_wrapper_leave_the_run_literal_the_knob():
    inv = inventory.inventory(NONE_FILL_AND_PRINTED_LOCAL)
    why = {d.name: d.reason for d in inv.dropped}
    q, n = inv.knob("block_Q"), inv.knob("block_N")
    # `if block_Q is None: block_Q = ...` runs only for None; the test passes 4
    assert q is not None and (q.site.line, q.value) == (26, 4), why
    # BN is read again only in a print's f-string; the wrapper nothing runs binds its own 32
    assert n is not None and (n.site.line, n.value) == (26, 16), why


SWAPPED_OFFSETS = """
import tilelang
import tilelang.language as T


def matmul(M, N, K, block_M, block_N, block_K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N) * T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            col = (cid % T.ceildiv(N, block_N)) * block_M
            row = (cid // T.ceildiv(N, block_N)) * block_N
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_s = T.alloc_shared((block_M, block_N), "float32")
            for k in T.Pipelined(T.ceildiv(K, block_K)):
                T.copy(A[row, k * block_K], A_s, size=[block_M, block_K])
                T.copy(B[k * block_K, col], B_s, size=[block_K, block_N])
                T.gemm(A_s, B_s, C_s)
            T.copy(C_s, C[row, col], size=[block_M, block_N])

    return main


def test():
    program = matmul(M=256, N=256, K=512, block_M=32, block_N=32, block_K=32)
    return tilelang.compile(program, target="npuir")


if __name__ == "__main__":
    test()
"""


def test_a_tile_placed_by_one_block_and_sized_by_another_keeps_them_equal():
    k = inventory.inventory(SWAPPED_OFFSETS).knob("block_M")
    assert k is not None and k.value == 32
    ok, refused = k.legal((16, 32, 64))
    assert ok == (32,)
    assert all("block_N == block_M" in r for _, r in refused), refused
    # the straight layout (row steps by block_M, col by block_N) keeps every divisor
    straight = SWAPPED_OFFSETS.replace(
        "cid % T.ceildiv(N, block_N)) * block_M", "cid % T.ceildiv(N, block_N)) * block_N"
    ).replace("cid // T.ceildiv(N, block_N)) * block_N", "cid // T.ceildiv(N, block_N)) * block_M")
    s = inventory.inventory(straight).knob("block_M")
    assert s is not None and s.legal((16, 32, 64))[0] == (16, 32, 64)


PRINTED = """\
import torch
import tilelang
import tilelang.language as T

N = 256


@tilelang.jit
def softmax(M, D, block_N):
    @T.prim_func
    def main(X: T.Tensor((M, D), "float16"), Y: T.Tensor((M, D), "float16")):
        with T.Kernel(M // block_N) as bx:
            buf = T.alloc_ub((block_N, D), "float16")
            T.copy(X[bx * block_N, 0], buf)
            T.copy(buf, Y[bx * block_N, 0])

    return main


if __name__ == "__main__":
    block_N = N
    k = softmax(4096, 1024, block_N)
    x = torch.randn(4096, 1024)
    print("ok", torch.allclose(k(x)[:N], x[:N]))
"""


def test_a_name_computed_with_inside_print_is_still_a_shared_size():
    # `x[:N]` inside print() slices data: N is a size the file shares, not display text
    inv = inventory.inventory(PRINTED)
    assert not inv.knobs
    (why,) = [d.reason for d in inv.dropped if d.name == "block_N"]
    assert "also reads" in why
    # a name only shown as it is stays display text: the knob is planned at N's literal
    shown = PRINTED.replace('print("ok", torch.allclose(k(x)[:N], x[:N]))', 'print("N =", N)')
    (knob,) = inventory.inventory(shown).knobs
    assert knob.name == "block_N" and knob.site.line == 5
