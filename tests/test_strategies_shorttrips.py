"""Pipeline depth past a loop's trip count (kernels written for these tests).

A pipeline of s stages keeps s iterations of a `T.Pipelined` loop in flight; a loop that runs
n iterations with every size the op runs with has nothing more to overlap past n stages.
"""

from __future__ import annotations

from bot.strategies.base import Refusal, Variant
from bot.strategies.pipeline import set_depth

# a K loop of K / block_K = 256 / 128 = 2 iterations at depth 2, and a row loop of 4
TWO_TRIPS = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def scaled_gemm(M, N, K, block_M=32, block_N=128, block_K=128, dtype="float16"):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((N, K), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(M, block_M) * T.ceildiv(N, block_N), is_npu=True) as (cid, _):
            bx = cid % T.ceildiv(N, block_N)
            by = cid // T.ceildiv(N, block_N)
            a_l1 = T.alloc_shared((block_M, block_K), dtype)
            b_l1 = T.alloc_shared((block_N, block_K), dtype)
            c_l0 = T.alloc_fragment((block_M, block_N), "float32")
            c_ub = T.alloc_shared((block_M // 4, block_N), dtype)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], a_l1)
                T.copy(B[bx * block_N, k * block_K], b_l1)
                T.gemm(a_l1, b_l1, c_l0, initC=(k == 0), b_transpose=True)
            for r in T.Pipelined(4, num_stages=2):
                T.copy(c_l0[r * (block_M // 4), 0], c_ub)
                T.copy(c_ub, C[by * block_M + r * (block_M // 4), bx * block_N])

    return main


def run(m):
    kernel = scaled_gemm(m, 256, 256)
    return kernel


if __name__ == "__main__":
    run(128)
    run(96)
"""


def test_a_depth_past_a_two_iteration_loop_is_refused():
    r = set_depth(TWO_TRIPS, 3, index=0)
    assert isinstance(r, Refusal), r
    assert "deeper than the loop runs" in r.reason and "2 iterations" in r.reason, r.reason
    # the current depth and shallower ones stay allowed
    assert isinstance(set_depth(TWO_TRIPS, 1, index=0), Variant)
    assert isinstance(set_depth(TWO_TRIPS, 0, index=0), Variant)


def test_a_depth_up_to_the_trip_count_stays_allowed():
    assert isinstance(set_depth(TWO_TRIPS, 3, index=1), Variant)
    assert isinstance(set_depth(TWO_TRIPS, 4, index=1), Variant)


# top_k is a run-time size (T.symbolic); the row reduction reads top_k columns of a 256-wide
# on-chip score buffer, so top_k <= 256: the score loop runs at most 256 / 128 = 2 iterations
SYMBOLIC = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def topk_scores(heads, dim, block_k=128, block_g=32, max_k=256, dtype="float16"):
    top_k = T.symbolic("topK")
    rows = T.symbolic("rows")

    @T.prim_func
    def main(
        Q: T.Tensor((rows, heads, dim), dtype),
        KV: T.Tensor((rows, top_k, dim), dtype),
        Out: T.Tensor((rows, heads), "float32"),
    ):
        with T.Kernel(rows, is_npu=True) as (cid, _):
            q = T.alloc_shared((heads, dim), dtype)
            kv = T.alloc_shared((block_k, dim), dtype)
            g = T.alloc_shared((block_g, dim), dtype)
            s = T.alloc_fragment((heads, block_k), "float32")
            scores = T.alloc_fragment((heads, max_k), "float32")
            m = T.alloc_fragment((heads, 1), "float32")
            T.copy(Q[cid, 0, 0], q)
            for k in T.Pipelined(T.ceildiv(top_k, block_g), num_stages=2):
                T.copy(KV[cid, k * block_g, 0], g)
            for k in T.Pipelined(T.ceildiv(top_k, block_k), num_stages=2):
                T.copy(KV[cid, k * block_k, 0], kv)
                T.gemm(q, kv, s, initC=True, b_transpose=True)
                T.copy(s, scores[0, k * block_k])
            T.reduce_max(scores, m, dim=1, size=[heads, top_k])
            T.copy(m, Out[cid, 0])

    return main


if __name__ == "__main__":
    topk_scores(16, 128)
"""


def test_a_run_time_size_bounded_by_an_on_chip_buffer_bounds_the_trip_count():
    r = set_depth(SYMBOLIC, 3, index=1)
    assert isinstance(r, Refusal), r
    assert "at most 2 iterations" in r.reason and "top_k <= 256" in r.reason, r.reason
    assert "scores" in r.reason, r.reason
    # the gather loop runs up to 256 / 32 = 8 iterations: deeper stays allowed
    assert isinstance(set_depth(SYMBOLIC, 3, index=0), Variant)


def test_an_unbounded_run_time_size_leaves_the_depth_alone():
    unbounded = SYMBOLIC.replace("size=[heads, top_k]", "size=[heads, max_k]")
    assert isinstance(set_depth(unbounded, 3, index=1), Variant)


# the wrapper adds the batch dimension to the tensors it is given (`idx = idx.unsqueeze(0)`)
# and reads top_k from the result; __main__ builds idx as (32, 1, 16): NI = 16 / 16 = 1
UNSQUEEZED = """\
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def gather_rows(dim, topk, block_I=16, num_stages=2):
    NI = tilelang.cdiv(topk, block_I)
    batch = T.symbolic("batch")
    seq = T.symbolic("seq")

    @T.prim_func
    def main(
        KV: T.Tensor((batch, seq, dim), "float16"),
        Idx: T.Tensor((batch, seq, 1, topk), "int32"),
        Out: T.Tensor((batch, seq, dim), "float16"),
    ):
        with T.Kernel(seq, is_npu=True) as (cid, _):
            rows = T.alloc_shared((block_I, dim), "float16")
            acc = T.alloc_fragment((block_I, dim), "float32")
            for i_i in T.Pipelined(NI, num_stages=num_stages):
                T.copy(KV[0, i_i * block_I, 0], rows)
                T.vadd(acc, rows, acc)
            T.copy(acc[0, 0], Out[0, cid, 0], size=[1, dim])

    return main


def gather(kv, idx, block_I=16, num_stages=2):
    kv = kv.unsqueeze(0)
    idx = idx.unsqueeze(0)
    _, _, _, topk = idx.shape
    kernel = gather_rows(kv.shape[-1], topk, block_I=block_I, num_stages=num_stages)
    return kernel(kv, idx)


if __name__ == "__main__":
    kv = torch.randn(32, 128, dtype=torch.float16)
    idx = torch.zeros(32, 1, 16, dtype=torch.int32)
    gather(kv, idx)
"""


def test_a_parameter_rebound_through_unsqueeze_keeps_its_sizes():
    r = set_depth(UNSQUEEZED, 3)
    assert isinstance(r, Refusal), r
    assert "(1 iteration (`NI`" in r.reason, r.reason


def test_a_read_before_the_rebinding_leaves_the_size_unknown():
    # `idx` is read as passed before it is rebound: its shape is not one value in the function
    read_first = UNSQUEEZED.replace(
        "    kv = kv.unsqueeze(0)\n", "    kv = kv.unsqueeze(0)\n    print(idx.shape)\n"
    )
    assert isinstance(set_depth(read_first, 3), Variant)


def test_unsqueeze_and_squeeze_shapes():
    import libcst as cst

    from bot.strategies.binding import Resolver
    from bot.strategies.evaluate import Env
    from bot.strategies.facts import facts
    from bot.strategies.tensorshapes import shape_of

    src = "import torch\n"
    env = Env(Resolver(facts(src)), ())

    def shape(code: str):
        return shape_of(cst.parse_expression(code), env)

    assert shape("torch.zeros(32, 1, 16).unsqueeze(0)") == (1, 32, 1, 16)
    assert shape("torch.zeros(32, 1, 16).unsqueeze(-1)") == (32, 1, 16, 1)
    assert shape("torch.zeros(32, 1, 16).squeeze(1)") == (32, 16)
    assert shape("torch.zeros(32, 1, 16).squeeze(0)") == (32, 1, 16)
    assert shape("torch.zeros(32, 1, 16).squeeze()") is None


# the gemm's M is block_Q * heads, and heads comes from a tensor the file never builds
UNKNOWN_HEADS = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def score_kernel(heads, dim, block_Q=16, block_N=64):
    rows = T.symbolic("rows")
    keys = T.symbolic("keys")

    @T.prim_func
    def main(
        Q: T.Tensor((rows * heads, dim), "float16"),
        K: T.Tensor((keys, dim), "float16"),
        S: T.Tensor((rows * heads, keys), "float32"),
    ):
        with T.Kernel(T.ceildiv(rows, block_Q), is_npu=True) as (cid, _):
            q = T.alloc_shared((block_Q * heads, dim), "float16")
            k = T.alloc_shared((block_N, dim), "float16")
            s = T.alloc_fragment((block_Q * heads, block_N), "float32")
            T.copy(Q[cid * block_Q * heads, 0], q, size=[block_Q * heads, dim])
            for j in T.serial(T.ceildiv(keys, block_N)):
                T.copy(K[j * block_N, 0], k, size=[block_N, dim])
                T.gemm(q, k, s, initC=True, b_transpose=True)
                T.copy(s, S[cid * block_Q * heads, j * block_N], size=[block_Q * heads, block_N])

    return main


def scores(q, k, block_Q=16):
    rows, heads, dim = q.shape
    kernel = score_kernel(heads, dim, block_Q=block_Q)
    return kernel(q.view(-1, dim), k)
"""


def _block(src: str, value: int):
    from bot.config.schema import Knob
    from bot.strategies import knobs

    return knobs.set_knob(src, Knob("block_Q", "block_size", (8, 16, 32)), value, "block_size")


def test_a_gemm_dimension_times_an_unfixed_size_keeps_whole_fractals():
    r = _block(UNKNOWN_HEADS, 8)
    assert isinstance(r, Refusal), r
    assert "8 x heads" in r.reason and "only when heads is a multiple of 2" in r.reason, r.reason
    # 32 x heads is whole for every heads (32 is refused only because rows is unknown)
    r32 = _block(UNKNOWN_HEADS, 32)
    assert isinstance(r32, Variant) or "fractal" not in r32.reason, r32


def test_an_operand_already_part_fractal_with_an_unfixed_size_is_left_alone():
    already = UNKNOWN_HEADS.replace("block_Q=16, block_N", "block_Q=8, block_N").replace(
        "block_Q=16):", "block_Q=8):"
    )
    r = _block(already, 4)
    assert isinstance(r, Variant) or "fractal" not in r.reason, r


# the debug dump copies block_n columns out of an accumulator only dim = 16 wide
SOURCE_TOO_NARROW = """\
import tilelang
import tilelang.language as T

seq_len = 512
dim = 16


@tilelang.jit(target="npuir")
def attn_debug(block_m, block_n):
    @T.prim_func
    def main(
        P: T.Tensor((seq_len, seq_len), "float16"),
        V: T.Tensor((seq_len, dim), "float16"),
        DEBUG: T.Tensor((seq_len, seq_len), "float32"),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_m), is_npu=True) as (cid, _):
            p_l1 = T.alloc_shared([block_m, block_n], "float16")
            v_l1 = T.alloc_shared([block_n, dim], "float16")
            acc_o = T.alloc_fragment([block_m, dim], "float32")
            for k in T.serial(T.ceildiv(seq_len, block_n)):
                T.copy(P[cid * block_m, k * block_n], p_l1, size=[block_m, block_n])
                T.copy(V[k * block_n, 0], v_l1, size=[block_n, dim])
                T.gemm(p_l1, v_l1, acc_o, initC=True)
                T.copy(acc_o, DEBUG[cid * block_m, k * block_n], size=[block_m, block_n])

    return main


def main():
    block_m = 16
    block_n = 16
    attn_debug(block_m, block_n)


if __name__ == "__main__":
    main()
"""


def test_a_sized_copy_out_of_an_on_chip_buffer_must_fit_it():
    from bot.config.schema import Knob
    from bot.strategies import knobs

    r = knobs.set_knob(SOURCE_TOO_NARROW, Knob("block_n", "block_size", (16, 32)), 32, "block_size")
    assert isinstance(r, Refusal), r
    assert "out of `acc_o`" in r.reason and "holds 16 there" in r.reason, r.reason
