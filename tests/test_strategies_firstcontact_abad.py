"""Classes of failure the first contacts with heldout_ab, heldout_ac and heldout_ad found
(tests/data/upstream_kernels/README.md), each on a kernel written here:

- a grid size the kernel reads only as the grid of a launch whose core index it never reads
  (every core runs the whole kernel) is dropped, not tuned (corecount.unread_grid);
- a name with the word block inside, not first (`MX_SCALE_BLOCK = 32`), that a kernel reads is
  listed with why it is not tuned (inventory._inner_block_words);
- `T.gemm_mx` (an MX-format matrix multiply with block scales) is a matrix multiply whose
  operands stay whole cube fractals (placement.GEMMS, fractal.py);
- an operation on a fixed literal part of every knob-sized tile (`A_frag[0:32]`) pins the
  knob: another value changes which elements the part covers (fixedslice.py);
- block-named names read only by an expression that sets a dropped knob (`block_M =
  max_block if rows % max_block == 0 else 32`) are listed too (inventory._expression_inputs)."""

from __future__ import annotations

from bot.strategies import inventory

BARRIER = """
import tilelang
import tilelang.language as T


def barrier(M, N, dtype="float16"):
    BLOCK_SIZE = 20

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype)):
        with T.Kernel(BLOCK_SIZE, is_npu=True) as ({INDEX}, _):
            T.pipe_barrier("PIPE_MTE2"){USE}

    return main


kernel = tilelang.compile(barrier(512, 512), target="npuir")
"""


def _names(src: str) -> tuple[list[str], dict[str, str]]:
    inv = inventory.inventory(src)
    return [k.name for k in inv.knobs], {d.name: d.reason for d in inv.dropped}


def test_a_grid_whose_core_index_is_never_read_is_dropped():
    knobs, dropped = _names(BARRIER.replace("{INDEX}", "cid").replace("{USE}", ""))
    assert "BLOCK_SIZE" not in knobs
    why = dropped["BLOCK_SIZE"]
    assert "T.Kernel(BLOCK_SIZE) as (cid, _)" in why and "never reads" in why
    # spelled `_`: the same
    knobs, dropped = _names(BARRIER.replace("{INDEX}", "_").replace("{USE}", ""))
    assert "BLOCK_SIZE" not in knobs and "never reads" in dropped["BLOCK_SIZE"]


def test_a_grid_whose_core_index_the_kernel_reads_stays_a_knob():
    use = "\n            T.copy(A[cid, 0], A[cid, 0])"
    knobs, dropped = _names(BARRIER.replace("{INDEX}", "cid").replace("{USE}", use))
    assert "BLOCK_SIZE" in knobs and "BLOCK_SIZE" not in dropped


def test_a_grid_size_also_read_elsewhere_in_the_kernel_stays_a_knob():
    use = "\n            for i in T.serial(BLOCK_SIZE):\n                T.pipe_barrier('PIPE_V')"
    knobs, _ = _names(BARRIER.replace("{INDEX}", "cid").replace("{USE}", use))
    assert "BLOCK_SIZE" in knobs


def test_a_core_index_read_through_an_intrinsic_keeps_the_grid_a_knob():
    use = "\n            bid = T.get_block_idx()\n            T.copy(A[bid, 0], A[bid, 0])"
    knobs, _ = _names(BARRIER.replace("{INDEX}", "cid").replace("{USE}", use))
    assert "BLOCK_SIZE" in knobs


MX = """
import tilelang
import tilelang.language as T

MX_SCALE_BLOCK = 32


@tilelang.jit(out_idx=[-1], target="pto")
def mx_matmul(M, N, K, block_M, block_N, K_L1):
    m_num = M // block_M
    n_num = N // block_N
    slabs = K_L1 // MX_SCALE_BLOCK

    @T.prim_func
    def main(
        A: T.Tensor((M, K), "e5m2_float8"),
        B: T.Tensor((K, N), "e5m2_float8"),
        sA: T.Tensor((M, K // MX_SCALE_BLOCK), "uint8"),
        sB: T.Tensor((K // MX_SCALE_BLOCK, N), "uint8"),
        C: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, _):
            bx = cid // n_num
            by = cid % n_num
            A_L1 = T.alloc_L1((block_M, K_L1), "e5m2_float8")
            B_L1 = T.alloc_L1((K_L1, block_N), "e5m2_float8")
            sA_L1 = T.alloc_L1((block_M, slabs), "uint8")
            sB_L1 = T.alloc_L1((slabs, block_N), "uint8")
            C_L0 = T.alloc_L0C((block_M, block_N), "float32")
            with T.Scope("C"):
                for k in T.serial(T.ceildiv(K, K_L1)):
                    T.copy(A[bx * block_M, k * K_L1], A_L1)
                    T.copy(B[k * K_L1, by * block_N], B_L1)
                    T.copy(sA[bx * block_M, k * slabs], sA_L1)
                    T.copy(sB[k * slabs, by * block_N], sB_L1)
                    T.gemm_mx(A_L1, B_L1, C_L0, sA_L1, sB_L1, init=(k == 0))
                T.copy(C_L0, C[bx * block_M, by * block_N])

    return main


func = mx_matmul(1024, 1024, 1024, 128, 128, 128)
"""


def test_a_name_with_block_inside_that_the_kernel_reads_is_listed():
    knobs, dropped = _names(MX)
    assert "MX_SCALE_BLOCK" not in knobs
    why = dropped["MX_SCALE_BLOCK"]
    assert "'MX_SCALE_BLOCK' = 32 (line 5, module)" in why and "tune.yaml" in why


def test_a_name_with_block_inside_that_no_kernel_reads_is_not_listed():
    unread = MX.replace("slabs = K_L1 // MX_SCALE_BLOCK", "slabs = K_L1 // 32").replace(
        "K // MX_SCALE_BLOCK", "K // 32"
    )
    _, dropped = _names(unread)
    assert "MX_SCALE_BLOCK" not in dropped


def test_gemm_mx_operands_stay_whole_fractals():
    knob = next(k for k in inventory.inventory(MX).knobs if k.name == "block_M")
    ok, refused = knob.legal((8, 16, 64))
    assert ok == (16, 64)
    why = dict(refused)[8]
    assert "gemm operand" in why and "not a multiple of 16" in why


PART = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def copy_1d(L, block_L, dtype="float16"):
    @T.prim_func
    def main(In: T.Tensor((L,), dtype), A: T.Tensor((L,), dtype)):
        with T.Kernel(T.ceildiv(L, block_L), is_npu=True) as (cid, _):
            A_frag = T.alloc_ub((block_L,), dtype)
            T.copy(In[cid * block_L], A_frag)
            T.npuir_add(A_frag[{SLICE}], A_frag[{SLICE}], A_frag[{SLICE}])
            T.copy(A_frag, A[cid * block_L])

    return main


kernel = copy_1d(1024, 64)
"""


def test_a_fixed_part_of_every_tile_pins_the_knob():
    knob = next(k for k in inventory.inventory(PART.replace("{SLICE}", "0:32")).knobs)
    ok, refused = knob.legal((32, 64, 128))
    assert ok == (64,)
    why = dict(refused)[32]
    assert "`A_frag[0:32]` (line 13)" in why and "fixed part of every block_L-sized tile" in why
    # an omitted lower bound is a literal 0
    knob = next(k for k in inventory.inventory(PART.replace("{SLICE}", ":32")).knobs)
    assert knob.legal((32, 64, 128))[0] == (64,)


def test_a_part_written_with_the_knob_is_left_to_the_other_rules():
    knob = next(k for k in inventory.inventory(PART.replace("{SLICE}", "0:block_L")).knobs)
    ok, _ = knob.legal((32, 64, 128))
    assert ok == (32, 64, 128)


CHOSEN = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def scale(M, N, block_M, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, N), dtype)
            T.copy(A[cid * block_M, 0], a)
            T.copy(a, B[cid * block_M, 0])

    return main


def run(rows, dtype):
    max_block = 32 if dtype == "float" else 64
    block_M = max_block if rows % max_block == 0 else 32
    return scale(rows, 256, block_M, dtype)


run(1024, "float16")
"""


def test_a_name_that_feeds_a_knob_set_by_an_expression_is_listed():
    knobs, dropped = _names(CHOSEN)
    assert knobs == []
    assert "computed at line 20" in dropped["block_M"]
    why = dropped["max_block"]
    assert "feeds block_M through the expression at line 20" in why


WHOLE = """
import tilelang
import tilelang.language as T


def atomic_gemm(num_blocks=4, block_M=16, block_N=16, block_K=16, dtype="float16"):
    @T.prim_func
    def main(
        A: T.Tensor((block_M, block_K), dtype),
        B: T.Tensor((block_K, block_N), dtype),
        C: T.Tensor((block_M, block_N), "float"),
    ):
        with T.Kernel(num_blocks, is_npu=True) as (cid, vid):
            A_L1 = T.alloc_L1((block_M, block_K), dtype)
            B_L1 = T.alloc_L1((block_K, block_N), dtype)
            C_L0 = T.alloc_L0C((block_M, block_N), "float")
            T.copy(A, A_L1)
            T.copy(B, B_L1)
            T.gemm_v0(A_L1, B_L1, C_L0, init=True)
            T.tile.atomic_add(C, C_L0)

    return main


kernel = tilelang.compile(atomic_gemm(block_M=16), target="ascendc")
"""


def test_a_fixed_tile_that_is_the_tensor_itself_says_the_problem_changes():
    knob = next(k for k in inventory.inventory(WHOLE).knobs if k.name == "block_M")
    ok, refused = knob.legal((16, 32))
    assert ok == (16,)
    why = dict(refused)[32]
    assert "the kernel's own tensor A (line 9)" in why and "changes the problem" in why
    assert "uncomputed" not in why


def test_a_part_whose_bound_is_a_run_time_choice_between_literals_pins_the_knob():
    chosen = PART.replace(
        "            T.npuir_add(A_frag[{SLICE}], A_frag[{SLICE}], A_frag[{SLICE}])",
        "            idx = T.if_then_else(In[0] > 0, 16, 32)\n"
        "            T.npuir_add(A_frag[0:idx], A_frag[0:idx], A_frag[0:idx])",
    )
    knob = next(k for k in inventory.inventory(chosen).knobs)
    ok, refused = knob.legal((32, 64, 128))
    assert ok == (64,)
    assert "`A_frag[0:idx]`" in dict(refused)[128]


ROWS = """
import tilelang
import tilelang.language as T

BLOCK_M, BLOCK_N = 8, 128
TILES = 4  # M // BLOCK_M, written out


def scatter():
    @T.prim_func
    def main(CP: T.Tensor((TILES, BLOCK_M, BLOCK_N), "float32"), C2: T.Tensor((64, BLOCK_N), "float32")):
        with T.Kernel(TILES, is_npu=True) as (cid, vid):
            ub = T.alloc_ub((BLOCK_N,), "float32")
            for rr in T.serial(BLOCK_M):
                T.copy(CP[cid, rr, 0:BLOCK_N], ub)
                T.copy(ub, C2[cid * BLOCK_M + rr, 0:BLOCK_N])

    return main


kernel = tilelang.compile(scatter(), target="ascendc")
"""


def test_a_knob_that_only_shapes_the_tensors_with_no_count_of_its_tiles_changes_the_problem():
    knob = next(k for k in inventory.inventory(ROWS).knobs if k.name == "BLOCK_M")
    ok, refused = knob.legal((8, 16))
    assert ok == (8,)
    why = dict(refused)[16]
    assert "the kernel's own tensor CP (line 11)" in why and "buffer" not in why


def test_a_macro_the_launch_calls_may_read_the_core_index():
    macro = BARRIER.replace(
        "    @T.prim_func",
        "    @T.macro\n    def load(A):\n        bid = T.get_block_idx()\n"
        "        T.copy(A[bid, 0], A[bid, 0])\n\n    @T.prim_func",
    ).replace('T.pipe_barrier("PIPE_MTE2"){USE}', "load(A)")
    knobs, _ = _names(macro.replace("{INDEX}", "cid"))
    assert "BLOCK_SIZE" in knobs


def test_a_grid_size_that_also_shapes_a_tensor_is_not_only_the_grid():
    shaped = BARRIER.replace("A: T.Tensor((M, N), dtype)", "A: T.Tensor((BLOCK_SIZE, N), dtype)")
    _, dropped = _names(shaped.replace("{INDEX}", "cid").replace("{USE}", ""))
    assert "read only as the grid" not in dropped.get("BLOCK_SIZE", "")


def test_a_fixed_halo_beside_the_tile_is_no_fixed_part_of_it():
    halo = PART.replace(
        "A_frag = T.alloc_ub((block_L,), dtype)", "A_frag = T.alloc_ub((32 + block_L,), dtype)"
    )
    knob = next(k for k in inventory.inventory(halo.replace("{SLICE}", "0:32")).knobs)
    assert knob.legal((32, 64, 128))[0] == (32, 64, 128)


def test_a_fixed_part_bounded_by_a_module_constant_or_a_unit_step_pins_the_knob():
    const = PART.replace("@tilelang.jit", "HALF = 32\n\n\n@tilelang.jit")
    knob = next(k for k in inventory.inventory(const.replace("{SLICE}", "0:HALF")).knobs)
    assert knob.legal((32, 64, 128))[0] == (64,)
    knob = next(k for k in inventory.inventory(PART.replace("{SLICE}", "0:32:1")).knobs)
    assert knob.legal((32, 64, 128))[0] == (64,)


def test_a_slice_up_to_the_knob_itself_is_the_whole_tile_even_as_a_constant():
    # the knob a module constant: `0:BLOCK_L` reads the knob, whatever literal sets it
    const = (
        PART.replace("def copy_1d(L, block_L,", "def copy_1d(L,")
        .replace("block_L", "BLOCK_L")
        .replace("@tilelang.jit", "BLOCK_L = 64\n\n\n@tilelang.jit")
        .replace("kernel = copy_1d(1024, 64)", "kernel = copy_1d(1024)")
    )
    knob = next(k for k in inventory.inventory(const.replace("{SLICE}", "0:BLOCK_L")).knobs)
    assert knob.name == "BLOCK_L"
    assert knob.legal((32, 64, 128))[0] == (32, 64, 128)
