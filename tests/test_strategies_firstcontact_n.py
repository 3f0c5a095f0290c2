"""heldout_n first-contact failures, each on a small kernel written for the test."""

from __future__ import annotations

from bot.strategies import inventory, pipeline
from bot.strategies.base import Refusal, Variant


def _line(src: str, text: str) -> int:
    return next(i for i, line in enumerate(src.splitlines(), 1) if text in line)


def _knob(src: str, name: str) -> inventory.KnobInfo:
    (knob,) = [k for k in inventory.inventory(src).knobs if k.name == name]
    return knob


# A split count computed with `DataType(dtype).bits` and unwrapped with `.value` sizes an L0C
# accumulator: a smaller block_N gives fewer splits, so a wider accumulator.
SPLIT_COUNT = """
import tilelang
from tilelang import DataType, language as T

L0_MAX_SIZE = 64 * 1024


@tilelang.jit(out_idx=[2])
def pv(seq_len, dim):
    block_M, block_N = 64, 128
    dtype = "float16"
    n_num = T.max(T.ceildiv(block_N * dim * DataType(dtype).bits // 8, L0_MAX_SIZE), 1).value
    block_D = T.ceildiv(dim, n_num)

    @T.prim_func
    def main(
        P: T.Tensor((seq_len, seq_len), dtype),
        V: T.Tensor((seq_len, dim), dtype),
        O: T.Tensor((seq_len, dim), "float"),
    ):
        with T.Kernel(seq_len // block_M, is_npu=True) as (cid, vid):
            p_l1 = T.alloc_L1([block_M, block_N], dtype)
            v_l1 = T.alloc_L1([block_N, block_D], dtype)
            acc_s = T.alloc_L0C([block_M, 64], "float")
            acc_o = T.alloc_L0C([block_M, block_D], "float")
            T.tile.fill(acc_s, 0.0)
            for k in T.serial(seq_len // block_N):
                T.copy(P[cid * block_M, k * block_N], p_l1)
                for n_i in T.serial(n_num):
                    T.copy(V[k * block_N, n_i * block_D], v_l1)
                    T.gemm_v0(p_l1, v_l1, acc_o, init=True)
                    T.copy(acc_o, O[cid * block_M, n_i * block_D])

    return main


if __name__ == "__main__":
    pv(4096, 512)
"""


def test_a_split_count_from_the_dtype_width_sizes_the_accumulator():
    ok, refused = _knob(SPLIT_COUNT, "block_N").legal((64, 128, 256))
    # 128: two splits of 256 columns (64 KiB of fp32); 64: one split of 512 (128 KiB) + acc_s
    assert ok == (128, 256)
    assert [v for v, _ in refused] == [64]
    assert "L0C" in refused[0][1] and "acc_o" in refused[0][1]


# A size set in each arm of an `if` whose test the factory can decide (`REPLICATE_H`), read
# through a derived name (`H_per_block`) as the rows of a gemm operand.
ARMS = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def scores(heads, dim, topk):
    block_H = 16
    if heads > block_H:
        assert heads % block_H == 0
        REPLICATE_H = heads // block_H
    else:
        REPLICATE_H = 1
    H_per_block = heads if REPLICATE_H == 1 else block_H
    dtype = "float16"

    @T.prim_func
    def main(
        Q: T.Tensor((heads, dim), dtype),
        K: T.Tensor((topk, dim), dtype),
        S: T.Tensor((heads, topk), "float"),
    ):
        with T.Kernel(REPLICATE_H, is_npu=True) as (cid, vid):
            q_l1 = T.alloc_L1([H_per_block, dim], dtype)
            k_l1 = T.alloc_L1([64, dim], dtype)
            s_l0c = T.alloc_L0C([H_per_block, 64], "float")
            T.copy(Q[cid * H_per_block, 0], q_l1)
            for i in T.serial(topk // 64):
                T.copy(K[i * 64, 0], k_l1)
                T.gemm_v0(q_l1, k_l1, s_l0c, transpose_B=True, init=True)
                T.copy(s_l0c, S[cid * H_per_block, i * 64])

    return main


if __name__ == "__main__":
    scores(128, 128, 2048)
"""


def test_a_size_set_in_both_arms_of_an_if_is_the_arm_the_run_takes():
    ok, refused = _knob(ARMS, "block_H").legal((8, 16, 32))
    assert ok == (16, 32)
    assert [v for v, _ in refused] == [8]
    assert "q_l1" in refused[0][1] and "fractal" in refused[0][1]


# The B operand's reduction axis is the knob (`P @ KV` with KV [BI, 512]): below 128 the one
# slice gemm_v0 copies into L0B grows with it.
REDUCTION_SLICE = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def pv(heads, topk, block_I=64):
    dtype = "bfloat16"
    BI = block_I

    @T.prim_func
    def main(
        P: T.Tensor((heads, topk), dtype),
        KV: T.Tensor((topk, 512), dtype),
        O: T.Tensor((heads, 512), "float"),
    ):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            p_l1 = T.alloc_L1([16, BI], dtype)
            kv_l1 = T.alloc_L1([BI, 512], dtype)
            o_l0c = T.alloc_L0C([16, 512], "float")
            for i in T.serial(topk // BI):
                T.copy(P[0, i * BI], p_l1)
                T.copy(KV[i * BI, 0], kv_l1)
                T.gemm_v0(p_l1, kv_l1, o_l0c, init=(i == 0))
            T.copy(o_l0c, O[0, 0])

    return main


if __name__ == "__main__":
    pv(16, 2048)
"""


def test_a_reduction_axis_below_one_slice_lengthens_the_l0b_slice():
    ok, refused = _knob(REDUCTION_SLICE, "block_I").legal((32, 64, 128))
    assert ok == (32, 64)  # 64 x 512 bf16 = 64 KiB: L0B exactly
    assert [v for v, _ in refused] == [128]
    assert "L0B" in refused[0][1] and "kv_l1" in refused[0][1]


# A test function pytest calls once per parametrize entry passes the dtype; a tile passed
# under a block name (`block_K`) lands in a factory parameter named for what it is (`K_L1`).
PYTEST_GEMM = """
import pytest
import tilelang
import tilelang.language as T

DTYPE_CASES = [("float16", "float32")]


def matmul(M, N, K, block_M, block_N, K_L1, in_dtype, out_dtype):
    @T.prim_func
    def gemm(
        A: T.Tensor((M, K), in_dtype),
        B: T.Tensor((K, N), in_dtype),
        C: T.Tensor((M, N), out_dtype),
    ):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, _):
            bx = cid // (N // block_N) * block_M
            by = cid % (N // block_N) * block_N
            A_buf = T.alloc_L1((block_M, K_L1), in_dtype)
            B_buf = T.alloc_L1((K_L1, block_N), in_dtype)
            C_buf = T.alloc_L0C((block_M, block_N), out_dtype)
            for ki in T.serial(K // K_L1):
                T.load_nd2nz(A[bx, ki * K_L1], A_buf, [block_M, K_L1])
                T.load_nd2nz(B[ki * K_L1, by], B_buf, [K_L1, block_N])
                T.gemm(A_buf, B_buf, C_buf, initC=ki == 0, b_transpose=False)
            T.store_fixpipe(C_buf, C[bx, by], size=[block_M, block_N], enable_nz2nd=True)

    return gemm


@pytest.mark.parametrize("in_dtype,out_dtype", DTYPE_CASES)
def test_matmul(in_dtype, out_dtype):
    block_K = 32
    program = matmul(256, 256, 512, 32, 32, block_K, in_dtype, out_dtype)
    tilelang.compile(program, target="npuir")
"""


def test_a_dtype_from_a_parametrize_list_is_read_for_the_gemm_operands():
    ok, refused = _knob(PYTEST_GEMM, "block_M").legal((8, 16, 32, 64))
    assert ok == (16, 32, 64)
    assert [v for v, _ in refused] == [8] and "A_buf" in refused[0][1]


def test_a_parametrize_list_the_file_does_not_spell_out_reads_no_dtype():
    unknown = PYTEST_GEMM.replace("DTYPE_CASES)", "load_cases())")
    ok, _ = _knob(unknown, "block_M").legal((8, 16))
    assert ok == (8, 16)  # no dtype, no buffer read: nothing refused on a guess


def test_a_tile_passed_under_a_block_name_is_a_knob_under_that_name():
    knob = _knob(PYTEST_GEMM, "block_K")
    assert knob.site.line == _line(PYTEST_GEMM, "block_K = 32")
    ok, refused = knob.legal((8, 16, 64))
    assert ok == (16, 64)
    assert [v for v, _ in refused] == [8] and "reduction axis" in refused[0][1]
    # a parameter passed a name that is not block-like stays out
    plain = PYTEST_GEMM.replace("block_K", "k_tile")
    assert not [k for k in inventory.inventory(plain).knobs if k.site.name == "k_tile"]


# The cube half reads a GM workspace the vector half writes later in the body, at a region
# that does not move with the loop variable: trip i reads what the stage split makes visible.
CARRIED = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2], workspace_idx=[3])
def gather_scores(topk, block_I=64):
    NI = topk // block_I

    @T.prim_func
    def main(
        Q: T.Tensor((16, 128), "float16"),
        KV: T.Tensor((4096, 128), "float16"),
        S: T.Tensor((16, topk), "float"),
        workspace: T.Tensor((block_I, 128), "float16"),
    ):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            q_l1 = T.alloc_L1([16, 128], "float16")
            kv_l1 = T.alloc_L1([block_I, 128], "float16")
            s_l0c = T.alloc_L0C([16, block_I], "float")
            kv_ub = T.alloc_ub([128], "float16")
            T.copy(Q[0, 0], q_l1)
            for i_i in T.Pipelined(NI, num_stages=2):
                T.copy(workspace[0:block_I, 0:128], kv_l1)
                T.gemm_v0(q_l1, kv_l1, s_l0c, transpose_B=True, init=True)
                T.copy(s_l0c, S[0, i_i * block_I])
                for r in range(block_I):
                    T.copy(KV[i_i * block_I + r, :], kv_ub)
                    T.copy(kv_ub, workspace[r, :])

    return main


if __name__ == "__main__":
    gather_scores(2048)
"""


def test_a_depth_change_is_refused_on_a_loop_carrying_data_through_global_memory():
    for depth in (0, 1, 3):
        r = pipeline.set_depth(CARRIED, depth)
        assert isinstance(r, Refusal), depth
        read = _line(CARRIED, "T.copy(workspace[0:block_I")
        write = _line(CARRIED, "T.copy(kv_ub, workspace[r, :])")
        assert f"workspace at line {read} before line {write}" in r.reason


def test_a_region_that_moves_with_the_loop_variable_is_not_carried():
    # the vector half writes the trip's own rows: no trip reads another trip's write
    moving = CARRIED.replace("T.copy(kv_ub, workspace[r, :])", "T.copy(kv_ub, S[r, i_i])")
    assert isinstance(pipeline.set_depth(moving, 3), Variant)
    # written before it is read in the same trip: not carried either
    before = CARRIED.replace(
        "            for i_i in T.Pipelined(NI, num_stages=2):\n"
        "                T.copy(workspace[0:block_I, 0:128], kv_l1)\n",
        "            for i_i in T.Pipelined(NI, num_stages=2):\n",
    ).replace(
        "                    T.copy(kv_ub, workspace[r, :])\n",
        "                    T.copy(kv_ub, workspace[r, :])\n"
        "                T.copy(workspace[0:block_I, 0:128], kv_l1)\n",
    )
    assert isinstance(pipeline.set_depth(before, 3), Variant)


# UB already past 192 KiB as allocated at the current block_N, used by a depth-2 pipeline.
OVER_PAPER = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def rows(seq_len):
    block_M, block_N = 64, 128
    accum_dtype = "float"

    @T.prim_func
    def main(X: T.Tensor((seq_len, seq_len), "float"), Y: T.Tensor((seq_len, 512), "float")):
        with T.Kernel(seq_len // block_M, is_npu=True) as (cid, vid):
            acc_o = T.alloc_ub([block_M // 2, 512], accum_dtype)
            acc_o_ub = T.alloc_ub([block_M // 2, 512], accum_dtype)
            s_ub = T.alloc_ub([block_M // 2, block_N], accum_dtype)
            s2_ub = T.alloc_ub([block_M // 2, block_N], accum_dtype)
            s3_ub = T.alloc_ub([block_M // 2, block_N], accum_dtype)
            s4_ub = T.alloc_ub([block_M // 2, block_N], accum_dtype)
            s5_ub = T.alloc_ub([block_M // 2, block_N], accum_dtype)
            T.tile.fill(acc_o, 0.0)
            for k in T.Pipelined(seq_len // block_N, num_stages=2):
                T.copy(X[cid * block_M, k * block_N], s_ub)
                T.tile.exp(s2_ub, s_ub)
                T.tile.add(s3_ub, s2_ub, s_ub)
                T.tile.mul(s4_ub, s3_ub, s2_ub)
                T.tile.exp(s5_ub, s4_ub)
                T.copy(Y[cid * block_M, 0], acc_o_ub)
                T.tile.add(acc_o, acc_o, acc_o_ub)
            T.copy(acc_o, Y[cid * block_M, 0])

    return main


if __name__ == "__main__":
    rows(4096)
"""


def test_a_pipelined_kernel_past_ub_on_paper_does_not_grow_past_its_own_need():
    ok, refused = _knob(OVER_PAPER, "block_N").legal((64, 128, 256))
    assert ok == (64, 128)  # 208 KiB as allocated at 128 (the file runs), 168 KiB at 64
    assert [v for v, _ in refused] == [256]
    why = refused[0][1]
    assert "UB" in why and "already" in why and "num_stages=2" in why


def test_without_a_pipelined_loop_the_lifetime_rules_alone_judge():
    serial = OVER_PAPER.replace(
        "T.Pipelined(seq_len // block_N, num_stages=2)", "T.serial(seq_len // block_N)"
    )
    ok, _ = _knob(serial, "block_N").legal((64, 128, 256))
    assert 256 in ok
    shallow = OVER_PAPER.replace("num_stages=2", "num_stages=1")
    ok, _ = _knob(shallow, "block_N").legal((64, 128, 256))
    assert 256 in ok


TWO_FACTORIES = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def rows(M, N):
    block_M = 64

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, N), "float16")
            T.copy(A[cid * block_M, 0], a)
            T.copy(a, B[cid * block_M, 0])

    return main


@tilelang.jit(target="npuir")
def cols(M, N):
    block_M = 64

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, N), "float16")
            T.copy(A[cid * block_M, 0], a)
            T.copy(a, B[cid * block_M, 0])

    return main


rows(1024, 64)
cols(1024, 64)
"""


def test_each_factorys_own_block_keeps_its_factory_name():
    # a name passed under another block name is renamed to the literal's name; a knob named
    # after its factory (`rows.block_M`) is not such a pass and keeps its own name
    names = sorted(k.name for k in inventory.inventory(TWO_FACTORIES).knobs)
    assert names == ["cols.block_M", "rows.block_M"]
