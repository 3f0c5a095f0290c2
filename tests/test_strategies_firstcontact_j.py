"""heldout_j first-contact failures, each on a small kernel written for the test."""

from __future__ import annotations

from bot.strategies import inventory
from bot.strategies.base import Refusal, Variant

DEFAULT_ON_ONE_PATH = """
import argparse

import tilelang.language as T


def scale(n, block_n):
    @T.prim_func
    def main(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(n // block_n) as bx:
            buf = T.alloc_shared((block_n,), "float16")
            T.copy(X[bx * block_n], buf)
            T.copy(buf, Y[bx * block_n])

    return main


def run(n, block_n=256):
    return scale(n, block_n)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        run(1024, block_n=64)
    else:
        run(4096)
"""


def test_a_keyword_one_call_passes_is_not_the_value_a_call_leaving_the_default_runs():
    # the default run leaves block_n at 256; only --quick passes 64: two values, no one literal
    inv = inventory.inventory(DEFAULT_ON_ONE_PATH)
    assert inv.knobs == []
    (why,) = [d.reason for d in inv.dropped if d.name == "block_n"]
    assert "default 256 (line 18)" in why and "line 29" in why and "27" in why


def test_a_default_every_run_call_leaves_alone_is_the_knob():
    src = DEFAULT_ON_ONE_PATH.replace("run(1024, block_n=64)", "run(1024)")
    (knob,) = inventory.inventory(src).knobs
    assert knob.name == "block_n" and knob.site.line == 18 and knob.value == 256


ENV_DEFAULT = """
import argparse
import os

import tilelang.language as T


def env_int(name, default):
    value = os.environ.get(name)
    return default if value is None else int(value)


def rows(n, block_M):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block_M), is_npu=True) as (bx, _):
            start = bx * block_M
            valid = T.min(block_M, n - start)
            buf = T.alloc_ub((block_M,), "float32")
            T.copy(X[start : start + valid], buf[0:valid])
            T.copy(buf[0:valid], Y[start : start + valid])

    return main


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=env_int("ROWS_N", 4096))
    parser.add_argument("--block-m", type=int, default=env_int("ROWS_BLOCK_M", 256))
    args = parser.parse_args()
    rows(args.n, args.block_m)
"""


def test_the_fallback_of_an_environment_override_helper_is_the_knob():
    (knob,) = inventory.inventory(ENV_DEFAULT).knobs
    assert knob.name == "block_M" and knob.value == 256 and knob.site.line == 29
    ok, refused = knob.legal((128, 4096, 8192))
    assert ok == (128, 4096) and "4096" in refused[0][1]  # n = 4096 from the other fallback


def test_a_helper_that_does_not_read_the_environment_is_no_fallback():
    src = ENV_DEFAULT.replace("value = os.environ.get(name)", "value = None")
    assert inventory.inventory(src).knobs == []


ONE_TILE_OF_LANES = """
import tilelang.language as T


def gather(n, block):
    @T.prim_func
    def main(LUT: T.Tensor((256,), "float32"), OUT: T.Tensor((n,), "float32")):
        with T.Kernel(1, is_npu=True) as (pid, vid):
            o = T.alloc_ub((block,), "float32")
            for m in T.Parallel(block):
                if m < n:
                    o[m] = LUT[m]
            T.copy(o[0:n], OUT[0:n])

    return main


gather(128, 256)
"""


def test_one_guarded_tile_of_lanes_must_cover_the_extent_and_may_idle_past_it():
    (knob,) = inventory.inventory(ONE_TILE_OF_LANES).knobs
    ok, refused = knob.legal((64, 128, 256, 512))
    assert ok == (128, 256, 512)
    assert [v for v, _ in refused] == [64] and "extent of 128" in refused[0][1]


FIXED_WIDTH_SLICE = """
import tilelang.language as T


def scores(S, D=64, block_N=64, block_K=64):
    @T.prim_func
    def main(Q: T.Tensor((64, D), "float16"), K: T.Tensor((S, D), "float16"), C: T.Tensor((64, S), "float32")):
        with T.Kernel(S // block_N) as n:
            q = T.alloc_L1((64, block_K), "float16")
            k = T.alloc_L1((block_N, block_K), "float16")
            c = T.alloc_L0C((64, block_N), "float32")
            T.copy(Q[0:64, 0:D], q)
            T.copy(K[n * block_N : (n + 1) * block_N, 0:D], k)
            T.gemm_v0(q, k, c, transpose_B=True, init=True)
            T.copy(c, C[0:64, n * block_N : (n + 1) * block_N])

    return main


scores(4096)
"""


def test_a_buffer_filled_from_a_fixed_width_slice_and_read_whole_keeps_that_width():
    inv = inventory.inventory(FIXED_WIDTH_SLICE)
    knob = inv.knob("block_K")
    assert knob is not None
    ok, refused = knob.legal((32, 64, 128))
    assert ok == (64,)
    reasons = dict(refused)
    assert "would hold 32" in reasons[32] and "unwritten" in reasons[128]
    first = "            T.copy(Q[0:64, 0:D], q)\n"
    cleared = FIXED_WIDTH_SLICE.replace(
        first, "            T.clear(q)\n            T.clear(k)\n" + first
    )
    knob = inventory.inventory(cleared).knob("block_K")
    assert knob is not None
    reasons = dict(knob.legal((32, 64, 128))[1])
    assert "would hold 32" in reasons[32]
    assert "unwritten" not in reasons.get(128, "")  # zero columns add nothing to the product


RUNNER_BUILDS = """
import tilelang
import tilelang.language as T

ROWS = 4096
BLOCK = 512


def build_copy(target):
    @tilelang.jit(target=target)
    def k(rows, block_R):
        @T.prim_func
        def main(x: T.Tensor((rows,), "float32"), y: T.Tensor((rows,), "float32")):
            with T.Kernel(rows // block_R, is_npu=True) as (cid, vid):
                b = T.alloc_ub([block_R], "float32")
                T.copy(x[cid * block_R], b)
                T.copy(b, y[cid * block_R])
        return main
    return k


def run(builder):
    for tgt in ["ascendc", "pto"]:
        kern = builder(tgt)(ROWS, BLOCK)


run(build_copy)
"""


def test_a_factory_an_outer_builder_returns_is_bound_through_the_runner_that_calls_it():
    (knob,) = inventory.inventory(RUNNER_BUILDS).knobs
    assert knob.site.name == "BLOCK" and knob.site.line == 6 and knob.value == 512


RING_BUFFERS = """
import tilelang
import tilelang.ascend.language as T


def add(N, NUM_STAGES=2):
    TILE = 8192
    TILES = N // (TILE * 64)

    @T.prim_func
    def main(A: T.Buffer((N,), "float32"), C: T.Buffer((N,), "float32")):
        with T.Kernel(64) as bx:
            w = T.alloc_shared((TILE,), "float32")
            a = T.alloc_shared((TILE,), "float32")
            c = T.alloc_shared((TILE,), "float32")
            T.copy(A[0:TILE], w)
            for i in T.Pipelined(TILES, num_stages=NUM_STAGES):
                T.copy(A[i * TILE : (i + 1) * TILE], a)
                for j in T.Parallel(TILE):
                    c[j] = a[j] + w[j]
                T.copy(c, C[i * TILE : (i + 1) * TILE])

    return main


add(2**30)
"""


def test_auto_scheduled_stages_multiply_the_buffers_the_loop_writes():
    from bot.strategies.pipeline import set_depth

    r = set_depth(RING_BUFFERS, 3)
    assert isinstance(r, Refusal)
    assert "a x3" in r.reason and "c x3" in r.reason and "w x1" in r.reason
    assert "229376 bytes" in r.reason and "216 KB" in r.reason
    assert isinstance(set_depth(RING_BUFFERS, 1), Variant)
    fixed = RING_BUFFERS.replace(
        "            T.copy(A[0:TILE], w)\n",
        "            T.copy(A[0:TILE], w)\n            T.annotate_buffer_versions({a: 1, c: 1})\n",
    )
    assert isinstance(set_depth(fixed, 3), Variant)  # one version each, whatever the depth
    unlimited = RING_BUFFERS.replace(
        "            T.copy(A[0:TILE], w)\n",
        '            T.copy(A[0:TILE], w)\n            T.annotate_unlimit_memory("shared")\n',
    )
    assert isinstance(set_depth(unlimited, 3), Variant)


def test_a_depth_past_the_loops_trip_count_is_refused():
    from bot.strategies.pipeline import set_depth

    short = RING_BUFFERS.replace("add(2**30)", "add(64 * 8192)").replace(
        "import tilelang.ascend.language as T", "import tilelang.language as T"
    )
    r = set_depth(short, 3)
    assert isinstance(r, Refusal) and "deeper than the loop runs" in r.reason
    assert "(1 iteration (`TILES`))" in r.reason
    assert isinstance(set_depth(short, 1), Variant)


def test_a_start_stop_loop_counts_stop_minus_start():
    from bot.strategies.pipeline import set_depth

    # T.Pipelined(start, stop): the first argument is where it starts, not how often it runs
    ranged = (
        RING_BUFFERS.replace("T.Pipelined(TILES,", "T.Pipelined(0, TILES,")
        .replace("add(2**30)", "add(64 * 8192 * 16)")
        .replace("import tilelang.ascend.language as T", "import tilelang.language as T")
    )
    assert isinstance(set_depth(ranged, 3), Variant)
    one = ranged.replace("T.Pipelined(0, TILES,", "T.Pipelined(TILES - 1, TILES,")
    r = set_depth(one, 3)
    assert isinstance(r, Refusal) and "(1 iteration (`TILES - 1, TILES`))" in r.reason


def test_one_short_test_shape_does_not_rule_out_depth_for_the_long_ones():
    from bot.strategies.pipeline import set_depth

    both = RING_BUFFERS.replace("add(2**30)", "add(64 * 8192)\nadd(64 * 8192 * 16)").replace(
        "import tilelang.ascend.language as T", "import tilelang.language as T"
    )
    assert isinstance(set_depth(both, 3), Variant)  # 16 iterations with the second size


INNER_TILES = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def vec_add(M, N, block_M, block_N, dtype="float"):
    inner = 32

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, vid):
            bx = cid // (N // block_N)
            by = cid % (N // block_N)
            a = T.alloc_ub((block_M, inner), dtype)
            for n_i in T.serial(T.ceildiv(block_N, inner)):
                T.copy(A[bx * block_M, by * block_N + n_i * inner], a)
                T.copy(a, C[bx * block_M, by * block_N + n_i * inner])

    return main


vec_add(1024, 1024, 128, 256)
"""


def test_a_knob_walked_in_whole_tiles_of_another_size_is_a_multiple_of_it():
    knob = inventory.inventory(INNER_TILES).knob("block_N")
    assert knob is not None
    ok, refused = knob.legal((8, 16, 32, 64, 512))
    assert ok == (32, 64, 512)
    assert "not a multiple of 32" in dict(refused)[16]


COMPUTED_AT_THE_CALL = """
import tilelang
import tilelang.language as T


def build(rows, hidden, block=1024, block_rows=4):
    @T.prim_func
    def main(X: T.Tensor((rows, hidden), "float32"), Y: T.Tensor((rows, hidden), "float32")):
        with T.Kernel(T.ceildiv(rows, block_rows), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_rows, block), "float32")
            b = T.alloc_ub((block_rows, block), "float32")
            r = cid * block_rows
            n = T.min(block_rows, rows - r)
            for c in T.serial(hidden // block):
                T.copy(X[r : r + n, c * block : (c + 1) * block], a[0:n, 0:block])
                T.vexp(a, b)
                T.copy(b[0:n, 0:block], Y[r : r + n, c * block : (c + 1) * block])

    return tilelang.compile(main, target="npuir")


def run(x):
    h = x.shape[1]
    block = min(1024, h)
    while h % block:
        block -= 16
    return build(x.shape[0], h, block)
"""


def test_a_size_the_caller_computes_as_min_of_a_literal_is_checked_at_that_literal():
    (knob,) = inventory.inventory(COMPUTED_AT_THE_CALL).knobs
    assert knob.name == "block_rows"
    ok, refused = knob.legal((8, 16, 32))
    assert ok == (8, 16)  # 2 x 4 B x 16 x 1024 = 128 KiB; 32 rows: 256 KiB
    assert "block=1024" in dict(refused)[32]


REUSED_UB = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1], target="npuir")
def dist(M, N, block_M, block_N=256):
    @T.prim_func
    def main(B: T.Tensor((M, N), "bfloat16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            r = cid * block_M
            m = T.min(block_M, M - r)
            b16 = T.alloc_shared((block_M, block_N), "bfloat16")
            b32 = T.alloc_shared((block_M, block_N), "float32")
            d = T.alloc_shared((block_M, block_N), "float32")
            e = T.alloc_shared((block_M, block_N), "float32")
            T.copy(B[r : r + m, 0:N], b16[0:m, 0:N])
            T.vcast(b16, b32, round_mode="rint")
            T.vmul(b32, b32, d)
            T.vexp(d, e)
            T.copy(e[0:m, 0:N], C[r : r + m, 0:N])

    return main


dist(4096, 256, 64)
"""


def test_a_kernel_past_ub_as_allocated_is_held_to_the_buffers_live_at_once():
    # 64 x 256: 224 KiB allocated (it runs by reusing memory); at the cast 32 + 64 KiB are live
    knob = inventory.inventory(REUSED_UB).knob("block_M")
    assert knob is not None
    ok, refused = knob.legal((32, 64, 128, 256))
    assert ok == (32, 64, 128)  # 128 x 256 x 6 B = 192 KiB at the cast: it fits exactly
    assert "line 18" in dict(refused)[256] and "(b16, b32)" in dict(refused)[256]


def test_live_ub_in_the_auto_scheduled_dialect_keeps_its_size_and_its_lifted_limit():
    a5 = REUSED_UB.replace("import tilelang.language as T", "import tilelang.ascend.language as T")
    knob = inventory.inventory(a5).knob("block_M")
    assert knob is not None
    _, refused = knob.legal((32, 64, 128, 256))
    assert "216 KiB" in dict(refused)[256]  # that dialect's UB, not A2/A3's 192 KiB
    lifted = a5.replace(
        "            r = cid * block_M\n",
        '            T.annotate_unlimit_memory("shared")\n            r = cid * block_M\n',
    )
    knob = inventory.inventory(lifted).knob("block_M")
    assert knob is not None
    ok, refused = knob.legal((32, 64, 128, 256))
    assert 256 in ok, refused


UNLIMITED_L1 = """
import tilelang
import tilelang.ascend.language as T


def gemm(M, N, K, block_M, block_N, block_K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            T.annotate_unlimit_memory("shared.l1")
            a_l1 = T.alloc_l1((block_M, block_K), "float16")
            b_l1 = T.alloc_l1((block_N, block_K), "float16")
            c = T.alloc_l0c((block_M, block_N), "float32")
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[bx * block_M : (bx + 1) * block_M, k * block_K : (k + 1) * block_K], a_l1)
                T.copy(B[0:block_N, k * block_K : (k + 1) * block_K], b_l1)
                T.gemm(a_l1, b_l1, c, transpose_B=True, clear_accum=(k == 0))
            T.copy(c, C[bx * block_M : (bx + 1) * block_M, 0:block_N])

    return main


gemm(4096, 256, 4096, 256, 256, 512)
"""


def test_the_auto_scheduled_dialect_keeps_its_own_limits_and_lifts_the_ones_it_annotates():
    inv = inventory.inventory(UNLIMITED_L1)
    block_k = inv.knob("block_K")
    assert block_k is not None
    assert block_k.legal((1024, 2048))[0] == (1024, 2048)  # L1 is unlimited for this kernel
    block_m = inv.knob("block_M")
    assert block_m is not None
    (why,) = [r for v, r in block_m.legal((512,))[1]]
    assert "L0C" in why and "256 KiB" in why and "tilelang.ascend.language" in why
    limited = UNLIMITED_L1.replace('            T.annotate_unlimit_memory("shared.l1")\n', "")
    (why,) = [r for v, r in inventory.inventory(limited).knob("block_K").legal((1024,))[1]]  # type: ignore[union-attr]
    assert "L1" in why and "512 KiB" in why


def test_a_call_on_a_side_the_run_path_never_takes_does_not_bind_the_default():
    # `--tune` is store_true with no default: False, so `run(4096)` under it never runs
    src = DEFAULT_ON_ONE_PATH.replace(
        '"--quick", action="store_true"', '"--tune", action="store_true"'
    )
    src = src.replace("if args.quick:", "if not args.tune:")
    (knob,) = inventory.inventory(src).knobs
    assert knob.site.kind == "keyword" and knob.value == 64
