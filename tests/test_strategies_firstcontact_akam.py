"""Classes of failure the first contacts with heldout_ak, heldout_al and heldout_am found
(tests/data/upstream_kernels/README.md), each on a kernel written here:

- TileLang's own Ascend backend (tile-ai/tilelang examples/ascend) writes auto-scheduled
  kernels with `tilelang.language`, compiled for "ascend" / "pto" and launched without
  `is_npu`: the scheduler's per-stage versions and limits apply to them too
  (dialect.auto_scheduled), while tilelang-ascend files on the same targets, whose launches
  pass `is_npu=True`, keep their own model;
- a buffer whose dims are chosen per call (`TILE_M if not trans_a else TILE_K` with trans_a
  looped over both values) counts with its smaller arm, so a deeper pipeline whose versions
  overflow L1 for every layout is refused (capacity.least_bytes)."""

from __future__ import annotations

from bot.strategies.base import Refusal, Variant
from bot.strategies.pipeline import set_depth

MAINLINE = """
import tilelang
import tilelang.language as T


def add(N):
    TILE = 8192
    TILES = N // (TILE * 64)

    @T.prim_func
    def main(A: T.Buffer((N,), "float32"), C: T.Buffer((N,), "float32")):
        with T.Kernel(64{NPU}) as bx:
            w = T.alloc_shared((TILE,), "float32")
            a = T.alloc_shared((TILE,), "float32")
            c = T.alloc_shared((TILE,), "float32")
            T.copy(A[0:TILE], w)
            for i in T.Pipelined(TILES, num_stages=2):
                T.copy(A[i * TILE : (i + 1) * TILE], a)
                for j in T.Parallel(TILE):
                    c[j] = a[j] + w[j]
                T.copy(c, C[i * TILE : (i + 1) * TILE])

    return main


kernel = tilelang.compile(add(2**30), target="{TARGET}")
"""


def test_tilelangs_own_ascend_target_keeps_versions_per_stage():
    r = set_depth(MAINLINE.replace("{NPU}", "").replace("{TARGET}", "pto"), 3)
    assert isinstance(r, Refusal), r
    assert "a x3" in r.reason and "c x3" in r.reason and "216 KB" in r.reason
    ascend = MAINLINE.replace("{NPU}", "").replace("{TARGET}", "ascend")
    assert isinstance(set_depth(ascend, 3), Refusal)


def test_tilelang_ascend_launches_and_other_targets_keep_their_model():
    npu = MAINLINE.replace("{NPU}", ", is_npu=True").replace("{TARGET}", "pto")
    assert isinstance(set_depth(npu, 3), Variant)
    npuir = MAINLINE.replace("{NPU}", "").replace("{TARGET}", "npuir")
    assert isinstance(set_depth(npuir, 3), Variant)


LAYOUTS = """
import tilelang
import tilelang.language as T


def gemm(M, N, K, trans_a=False):
    TILE_M = 256
    TILE_K = 256
    TILE_N = 256
    STAGES = 2
    a_rows = TILE_M if not trans_a else TILE_K
    a_cols = TILE_K if not trans_a else TILE_M

    @T.prim_func
    def main(A: T.Buffer((M, K), "bfloat16"), B: T.Buffer((N, K), "bfloat16"), C: T.Buffer((M, N), "float32")):
        with T.Kernel(32) as bx:
            a_l1 = T.alloc_l1((a_rows, a_cols), "bfloat16")
            b_l1 = T.alloc_l1((TILE_N, TILE_K), "bfloat16")
            acc = T.alloc_l0c((TILE_M, TILE_N), "float32")
            T.annotate_buffer_versions({a_l1: STAGES, b_l1: STAGES})
            for k in T.Pipelined(K // TILE_K, num_stages=STAGES):
                T.copy(A[0:TILE_M, k * TILE_K : (k + 1) * TILE_K], a_l1)
                T.copy(B[0:TILE_N, k * TILE_K : (k + 1) * TILE_K], b_l1)
                T.gemm(a_l1, b_l1, acc, transpose_B=True)

    return main


for ta in (False, True):
    kernel = tilelang.compile(gemm(2048, 2048, 2048, trans_a=ta), target="ascend")
"""


def test_a_dim_chosen_per_call_counts_with_its_smaller_arm():
    r = set_depth(LAYOUTS, 3)
    assert isinstance(r, Refusal), r
    # (256 x 256 bf16) x 3 versions each: 786432 bytes, past the scheduler's 512 KB of L1
    assert "a_l1 x3" in r.reason and "at least" in r.reason and "786432" in r.reason, r
    # an arm small enough to fit: a_l1 at least 64 x 64, 24576 + 393216 bytes in 3 versions
    small = LAYOUTS.replace("a_cols = TILE_K if not trans_a else TILE_M", "a_cols = 64")
    small = small.replace(
        "a_rows = TILE_M if not trans_a else TILE_K", "a_rows = TILE_M if not trans_a else 64"
    )
    assert isinstance(set_depth(small, 3), Variant)


TILE_NAMED = """
import tilelang
import tilelang.language as T


def lse(M, N, tile_n, block_m=8):
    @tilelang.jit(target="npuir")
    def build():
        @T.prim_func
        def main(X: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(M, block_m), is_npu=True) as (cid, _):
                x = T.alloc_ub((block_m, tile_n), "float32")
                for t in T.serial(T.ceildiv(N, tile_n)):
                    T.copy(X[cid * block_m, t * tile_n], x)

        return main

    return build()


for M, N, tile_n in [(64, 4096, 1024), (64, 8192, 2048)]:
    lse(M, N, tile_n)
"""


def test_a_tile_named_size_the_kernel_reads_is_listed_with_how_to_tune_it():
    from bot.strategies import inventory

    dropped = {d.name: d.reason for d in inventory.inventory(TILE_NAMED).dropped}
    assert "named as a tile size" in dropped["tile_n"], dropped
    assert "declare it in tune.yaml" in dropped["tile_n"]
    # a name read nowhere in a kernel is not listed
    unread = (
        TILE_NAMED.replace("(block_m, tile_n)", "(block_m, 1024)")
        .replace("T.ceildiv(N, tile_n)", "T.ceildiv(N, 1024)")
        .replace("t * tile_n", "t * 1024")
    )
    assert "tile_n" not in {d.name for d in inventory.inventory(unread).dropped}


LAUNCH_2D = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def add(M, N, block_M=64, block_N=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), is_npu=True) as (bx, by):
            a = T.alloc_ub((block_M, block_N), "float16")
            T.copy(A[{ROW} * block_M, {COL} * block_N], a)
            T.copy(a, B[{ROW} * block_M, {COL} * block_N])

    return main


kernel = add(1024, 1024)
"""


def test_a_two_dimensional_launch_that_swaps_its_axes_pins_both_blocks():
    from bot.config.schema import Knob
    from bot.strategies import knobs

    def move(src: str, name: str, value: int) -> Variant | Refusal:
        return knobs.set_knob(src, Knob(name, "block_size", (16, 32, 64, 128)), value)

    # bx runs over N's tiles but places rows: right only while block_M == block_N
    swapped = LAUNCH_2D.replace("{ROW}", "bx").replace("{COL}", "by")
    for name in ("block_M", "block_N"):
        r = move(swapped, name, 32)
        assert isinstance(r, Refusal) and "swaps its axes" in r.reason, r
        assert "`bx` times block_M" in r.reason
    usual = LAUNCH_2D.replace("{ROW}", "by").replace("{COL}", "bx")
    assert isinstance(move(usual, "block_M", 32), Variant)
    assert isinstance(move(usual, "block_N", 32), Variant)


def test_one_square_block_of_a_swapped_launch_moves_both_together():
    from bot.config.schema import Knob
    from bot.strategies import knobs

    square = (
        LAUNCH_2D.replace("block_M=64, block_N=64", "block=64")
        .replace("block_M", "block")
        .replace("block_N", "block")
        .replace("{ROW}", "bx")
        .replace("{COL}", "by")
    )
    assert isinstance(knobs.set_knob(square, Knob("block", "block_size", (32, 64)), 32), Variant)


def test_a_tile_named_knob_tune_yaml_declares_is_still_tuned_with_its_rules():
    from bot.config.schema import Knob
    from bot.strategies import knobs

    declared = MAINLINE.replace("{NPU}", "").replace("{TARGET}", "pto").replace("TILE", "TILE_N")
    from bot.strategies import inventory

    listed = {d.name for d in inventory.inventory(declared).dropped}
    assert "TILE_N" in listed  # listed as not tuned by discovery ...
    knob = Knob("TILE_N", "block_size", (4096, 8192, 16384, 2**30))  # ... yet tunable when declared
    assert isinstance(knobs.set_knob(declared, knob, 4096), Variant)
    r = knobs.set_knob(declared, knob, 2**30)  # the kernel's own rules still apply
    assert isinstance(r, Refusal), r


def test_a_target_named_through_a_default_or_an_option_is_read():
    src = MAINLINE.replace("{NPU}", "")
    by_default = src.replace(
        'kernel = tilelang.compile(add(2**30), target="{TARGET}")',
        'def build(target="ascend"):\n    return tilelang.compile(add(2**30), target=target)\n',
    )
    by_option = src.replace(
        'kernel = tilelang.compile(add(2**30), target="{TARGET}")',
        "import argparse\np = argparse.ArgumentParser()\n"
        'p.add_argument("--target", default="pto")\n'
        "kernel = tilelang.compile(add(2**30), target=p.parse_args().target)\n",
    )
    for text in (by_default, by_option):
        r = set_depth(text, 3)
        assert isinstance(r, Refusal) and "216 KB" in r.reason, r


BUILDERS = """
import tilelang
import tilelang.language as T


def add(N, TILE):
    TILES = N // (TILE * 64)

    @T.prim_func
    def main(A: T.Buffer((N,), "float32"), C: T.Buffer((N,), "float32")):
        with T.Kernel(64) as bx:
            a = T.alloc_shared((TILE,), "float32")
            c = T.alloc_shared((TILE,), "float32")
            for i in T.Pipelined(TILES, num_stages=2):
                T.copy(A[i * TILE : (i + 1) * TILE], a)
                for j in T.Parallel(TILE):
                    c[j] = a[j] + a[j]
                T.copy(c, C[i * TILE : (i + 1) * TILE])

    return main


VARIANTS = {"big": ("big tiles", add)}
for key in ("big",):
    label, build = VARIANTS[key]
    kernel = tilelang.compile(build(2**30, 12288), target="pto")
"""


def test_a_factory_called_through_a_table_of_builders_is_sized_by_that_call():
    # (12288 fp32) x 2 buffers x 3 stages = 294912 bytes, past 216 KB (2 stages fit): the size
    # is read only through the call
    r = set_depth(BUILDERS, 3)
    assert isinstance(r, Refusal) and "216 KB" in r.reason, r
    small = BUILDERS.replace("build(2**30, 12288)", "build(2**30, 4096)")
    assert isinstance(set_depth(small, 3), Variant)
