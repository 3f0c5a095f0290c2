"""Classes of failure the review of the fourteenth session's rules and the first contacts with
heldout_ah, heldout_ai and heldout_aj found (tests/data/upstream_kernels/README.md), each on a
kernel written here:

- a pipeline depth a factory takes and its kernel never reads is listed under pipeline_depth,
  the strategy that would have tuned it, not under block_size;
- a launch whose body calls a function the file does not hold (an imported helper, a method)
  may read the core index there: its grid stays a knob (corecount._index_call);
- a core index split by one axis's tile count that places the other axis (`bx = (cid %
  T.ceildiv(N, block_N)) * block_M`, swapped row and column offsets) pins both blocks: the
  tiles cover the tensor only at the file's own values (crossed.py);
- a block-named default that every call in the file overrides is listed with the call
  (inventory._overridden_defaults);
- a stage tile the kernel reads (`K_L1`) is listed with how to tune it."""

from __future__ import annotations

from bot.strategies import inventory

DEAD_STAGES = """
import tilelang
import tilelang.language as T


def gemm(M, N, K, block_M=64, block_N=64, num_stages=2):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M) * T.ceildiv(N, block_N), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, block_N), "float16")
            T.copy(A[cid * block_M, 0], a)
            T.copy(a, C[cid * block_M, 0])

    return main


kernel = gemm(1024, 1024, 1024)
"""


def test_a_dead_pipeline_depth_is_listed_under_pipeline_depth():
    dropped = {d.name: d for d in inventory.inventory(DEAD_STAGES).dropped}
    assert dropped["num_stages"].strategy == "pipeline_depth"
    assert "never read by the kernel" in dropped["num_stages"].reason
    live = DEAD_STAGES.replace(
        "            T.copy(a, C[cid * block_M, 0])",
        "            for k in T.Pipelined(4, num_stages=num_stages):\n"
        "                T.copy(a, C[cid * block_M, 0])",
    )
    assert "num_stages" not in {d.name for d in inventory.inventory(live).dropped}


BARRIER = """
import tilelang
import tilelang.language as T
{IMPORT}

def barrier(M, N, dtype="float16"):
    BLOCK_SIZE = 20

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype)):
        with T.Kernel(BLOCK_SIZE, is_npu=True) as (cid, _):
            T.pipe_barrier("PIPE_MTE2"){USE}

    return main


kernel = tilelang.compile(barrier(512, 512), target="npuir")
"""


def _knobs(src: str) -> list[str]:
    return [k.name for k in inventory.inventory(src).knobs]


def test_a_launch_calling_a_helper_the_file_does_not_hold_keeps_the_grid_a_knob():
    # `tile_body` comes from another module: it may read the core index itself
    use = "\n            tile_body(A)"
    src = BARRIER.replace("{IMPORT}", "from my_kernels.helpers import tile_body").replace(
        "{USE}", use
    )
    assert "BLOCK_SIZE" in _knobs(src)
    # a method of a helper object: the same
    src = BARRIER.replace("{IMPORT}", "import my_kernels").replace(
        "{USE}", "\n            my_kernels.tile_body(A)"
    )
    assert "BLOCK_SIZE" in _knobs(src)


def test_language_operations_and_builtins_do_not_keep_an_unread_grid():
    use = "\n            for i in range(min(4, 8)):\n                T.pipe_barrier('PIPE_V')"
    src = BARRIER.replace("{IMPORT}", "").replace("{USE}", use)
    assert "BLOCK_SIZE" not in _knobs(src)
    # the language under another name
    src = BARRIER.replace("{IMPORT}", "import tilelang.language as tll").replace(
        "{USE}", "\n            tll.pipe_barrier('PIPE_V')"
    )
    assert "BLOCK_SIZE" not in _knobs(src)


SWAPPED = """
import tilelang
import tilelang.language as T


def vadd(M, N, block_M, block_N, dtype="float16"):
    grid_M = (M + block_M - 1) // block_M
    grid_N = (N + block_N - 1) // block_N

    @T.prim_func
    def main(B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(grid_M * grid_N, is_npu=True) as (cid, _):
            blockx = cid {ROW} T.ceildiv(N, block_N)
            bx = blockx * block_M
            blocky = cid {COL} T.ceildiv(N, block_N)
            by = blocky * block_N
            b = T.alloc_shared([block_M, block_N], dtype)
            T.copy(B[bx : bx + block_M, by : by + block_N], b)
            T.copy(b, C[bx : bx + block_M, by : by + block_N])

    return main


kernel = vadd(128, 128, 32, 32)
"""


def _legal(src: str, name: str, values: tuple[int, ...]) -> tuple[tuple[int, ...], list[str]]:
    knob = inventory.inventory(src).knob(name)
    assert knob is not None, name
    ok, refused = knob.legal(values)
    return ok, [why for _, why in refused]


def test_a_core_index_split_by_one_axis_count_placing_the_other_axis_pins_both_blocks():
    src = SWAPPED.replace("{ROW}", "%").replace("{COL}", "//")
    for name in ("block_M", "block_N"):
        ok, why = _legal(src, name, (16, 32, 64))
        assert ok == (32,)
        assert "swaps its axes" in why[0] and "cid % T.ceildiv(N, block_N)" in why[0]


def test_the_usual_split_of_the_core_index_leaves_the_blocks_free():
    src = SWAPPED.replace("{ROW}", "//").replace("{COL}", "%")
    for name in ("block_M", "block_N"):
        ok, _ = _legal(src, name, (16, 32, 64))
        assert ok == (16, 32, 64)


OVERRIDDEN = """
import tilelang
import tilelang.language as T

BLOCK_N_FWD = 64


def fwd(M, N, block_M=64, block_N=64):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M) * T.ceildiv(N, block_N), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, block_N), "float16")
            T.copy(A[cid // T.ceildiv(N, block_N) * block_M, cid % T.ceildiv(N, block_N) * block_N], a)

    return main


kernel = fwd(1024, 1024, {ARGS})
"""


def test_a_block_default_every_call_overrides_is_listed_with_the_call():
    src = OVERRIDDEN.replace("{ARGS}", "block_N=BLOCK_N_FWD")
    dropped = {d.name: d.reason for d in inventory.inventory(src).dropped}
    assert "never runs" in dropped["block_N"] and "fwd()" in dropped["block_N"]
    assert "block_M" not in dropped  # the call leaves block_M's default running: a knob
    assert inventory.inventory(src).knob("block_M") is not None
    # a call that leaves the default running: nothing listed
    src = OVERRIDDEN.replace("{ARGS}", "64")
    assert "block_N" not in {d.name for d in inventory.inventory(src).dropped}


STAGED_TILE = """
import tilelang
import tilelang.language as T


def mm(M, K, block_M, K_L1):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            a = T.alloc_L1((block_M, K_L1), "float16")
            for k in T.serial(T.ceildiv(K, K_L1)):
                T.copy(A[cid * block_M, k * K_L1], a)

    return main


kernel = mm(1024, 1024, 64, {K_L1})
"""


def test_a_stage_tile_the_kernel_reads_is_listed_with_how_to_tune_it():
    for bound in ("64", "k_l1_from_a_list"):
        inv = inventory.inventory(STAGED_TILE.replace("{K_L1}", bound))
        dropped = {d.name: d.reason for d in inv.dropped}
        assert "tune.yaml" in dropped["K_L1"] and "memory level" in dropped["K_L1"]
        assert inv.knob("block_M") is not None


SQUARE = """
import tilelang
import tilelang.language as T


def vadd(M, N, block_size, dtype="float16"):
    @T.prim_func
    def main(B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_size) * T.ceildiv(N, block_size), is_npu=True) as (
            cid,
            _,
        ):
            bx = (cid // T.ceildiv(N, block_size)) * block_size
            by = (cid % T.ceildiv(N, block_size)) * block_size
            b = T.alloc_shared([block_size, block_size], dtype)
            T.copy(B[bx : bx + block_size, by : by + block_size], b)

    return main


kernel = vadd(256, 128, 32)
"""


def test_one_square_block_in_the_usual_layout_is_not_read_as_swapped():
    ok, _ = _legal(SQUARE, "block_size", (16, 32, 64))
    assert ok == (16, 32, 64)


def test_a_swap_written_as_a_point_copy_or_through_a_factory_local_count_is_read():
    point = (
        SWAPPED.replace("{ROW}", "%")
        .replace("{COL}", "//")
        .replace("B[bx : bx + block_M, by : by + block_N]", "B[bx, by]")
    )
    assert _legal(point, "block_M", (16, 32, 64))[0] == (32,)
    local = (
        SWAPPED.replace("{ROW}", "%")
        .replace("{COL}", "//")
        .replace(
            "    grid_N = (N + block_N - 1) // block_N\n", "    grid_N = T.ceildiv(N, block_N)\n"
        )
        .replace("cid % T.ceildiv(N, block_N)", "cid % grid_N")
        .replace("cid // T.ceildiv(N, block_N)", "cid // grid_N")
    )
    assert _legal(local, "block_N", (16, 32, 64))[0] == (32,)


def test_locals_with_comments_continuations_or_attribute_names_do_not_crash_the_swap_rule():
    base = SWAPPED.replace("{ROW}", "%").replace("{COL}", "//")
    commented = base.replace(
        "            bx = blockx * block_M\n",
        "            bx = (\n                blockx  # row tile\n            ) * block_M\n",
    )
    continued = base.replace(
        "            bx = blockx * block_M\n",
        "            bx = blockx \\\n                * block_M\n",
    )
    shadowing = base.replace(
        "            b = T.alloc_shared", "            ceildiv = 3\n            b = T.alloc_shared"
    )
    for src in (commented, continued, shadowing):
        assert _legal(src, "block_M", (16, 32, 64))[0] == (32,)


def test_a_default_the_harness_or_a_call_through_a_value_may_use_is_not_listed():
    harness = OVERRIDDEN.replace("def fwd(", "def kernel(").replace(
        "kernel = fwd(1024, 1024, {ARGS})", "out = kernel(1024, 1024, block_N=BLOCK_N_FWD)"
    )
    assert "block_N" not in {d.name for d in inventory.inventory(harness).dropped}
    for extra in (
        "import functools\nlater = functools.partial(fwd, 512, 512)\n",
        "g = fwd\n",
        "jitted = tilelang.jit(fwd)\n",
    ):
        src = OVERRIDDEN.replace("{ARGS}", "block_N=BLOCK_N_FWD") + extra
        assert "block_N" not in {d.name for d in inventory.inventory(src).dropped}, extra
    posonly = OVERRIDDEN.replace(
        "def fwd(M, N, block_M=64, block_N=64):", "def fwd(M, N, block_M=64, block_N=64, /, **kw):"
    ).replace("{ARGS}", "block_N=BLOCK_N_FWD")
    assert "block_N" not in {d.name for d in inventory.inventory(posonly).dropped}


def test_calls_of_the_language_by_any_import_or_of_the_standard_library_leave_an_unread_grid():
    cases = (
        ("from tilelang.language import pipe_barrier", "pipe_barrier('PIPE_V')"),
        ("from tilelang.language import *", "pipe_barrier('PIPE_V')"),
        ("import math", "x = math.sqrt(4.0)"),
    )
    for imported, call in cases:
        src = BARRIER.replace("{IMPORT}", imported).replace("{USE}", "\n            " + call)
        assert "BLOCK_SIZE" not in _knobs(src), imported


def test_a_remainder_placing_an_axis_sized_from_its_own_extent_is_no_swap():
    # `Acc` holds D + 1 rows: D's tiles placed along them are that axis's own
    src = (
        SWAPPED.replace("{ROW}", "%")
        .replace("{COL}", "//")
        .replace("T.Tensor((M, N), dtype)", "T.Tensor((N + 1, N), dtype)")
    )
    assert _legal(src, "block_M", (16, 32, 64))[0] == (16, 32, 64)
