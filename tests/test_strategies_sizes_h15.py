"""Sizes that reach a kernel only through the file's test drivers (h15f), each on a small kernel
written for the test: a `**d` splat of dicts the file spells out (bot/strategies/splats.py,
read by bot/strategies/callsizes.py). A rule must hold for every size the op runs with."""

from __future__ import annotations

from bot.strategies import knobs

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)

# a row kernel tiled by block_M in full tiles (`M // block_M`); {RUN} drives it
ROWS = """\
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def rows(M, N, block_M=32):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M, N), "float16")
            T.copy(A[cid * block_M, 0], buf)
            T.copy(buf, B[cid * block_M, 0])

    return main


{RUN}
"""


def _legal(run: str) -> tuple[tuple[int, ...], dict[int, str]]:
    legal, refused = knobs.legal_values(ROWS.replace("{RUN}", run), "block_M", BS)
    return legal, dict(refused)


# the tno_sparse_attn_hp shape: the host function reads its sizes from a tensor it is handed
# by `**inputs`, built by a helper that is itself called with `**kwargs` from each entry of a
# module list of test-case dicts
SPLATTED_INPUTS = """\
def run(x, scale=None):
    M, N = x.size()
    return rows(M, N, 32)


def make_inputs(rows_, cols, seed=0):
    torch.manual_seed(seed)
    x = torch.randn((rows_, cols), dtype=torch.float16)
    return {"x": x, "scale": 0.5}


CASES = [
    {"case_id": 0, "params": {"rows_": 512, "cols": 64}},
    {"case_id": 1, "params": {"rows_": 128, "cols": 64}},
]


def run_test():
    for case in CASES:
        kwargs = case["params"]
        inputs = make_inputs(**kwargs)
        run(**inputs)


if __name__ == "__main__":
    run_test()
"""


def test_sizes_behind_a_splat_of_a_helpers_dict_over_test_case_dicts():
    legal, refused = _legal(SPLATTED_INPUTS)
    # every case's M counts: 512 alone would allow 256 and 512, 128 caps the block at 128
    assert legal == (8, 16, 32, 64, 128)
    assert "does not divide 128" in refused[256]
    assert "could not resolve" not in refused[256]


def test_a_dict_changed_after_it_is_written_is_not_read():
    changed = SPLATTED_INPUTS.replace(
        "        inputs = make_inputs(**kwargs)\n",
        "        inputs = make_inputs(**kwargs)\n        inputs.update(x=None)\n",
    )
    legal, _ = _legal(changed)
    assert legal == (8, 16, 32)  # only divisors of the current value are safe


def test_factory_called_with_each_dict_a_loop_walks():
    legal, refused = _legal(
        'CONFIGS = [{"M": 128, "N": 64}, {"M": 512, "N": 64}]\n\n\n'
        "def main():\n"
        "    for cfg in CONFIGS:\n"
        "        rows(block_M=32, **cfg)\n\n\n"
        'if __name__ == "__main__":\n'
        "    main()\n"
    )
    assert legal == (8, 16, 32, 64, 128)
    assert "does not divide 128" in refused[256]


def test_a_dict_literal_passed_to_the_host_function():
    legal, refused = _legal(
        "def run(x):\n"
        "    M, N = x.shape\n"
        "    return rows(M, N, 32)\n\n\n"
        'if __name__ == "__main__":\n'
        "    inputs = {'x': torch.randn(256, 64)}\n"
        "    run(**inputs)\n"
    )
    assert legal == (8, 16, 32, 64, 128, 256)
    assert "does not divide 256" in refused[512]


def test_keywords_a_forwarding_helper_is_called_with():
    legal, refused = _legal(
        "def run(x):\n"
        "    M, N = x.shape\n"
        "    return rows(M, N, 32)\n\n\n"
        "def launch(**kw):\n"
        "    return run(**kw)\n\n\n"
        'if __name__ == "__main__":\n'
        "    launch(x=torch.randn(128, 64))\n"
        "    launch(x=torch.randn(512, 64))\n"
    )
    assert legal == (8, 16, 32, 64, 128)
    assert "does not divide 128" in refused[256]


# Sizes pytest passes: a test function no call in the file names runs once per pass of its
# `@pytest.mark.parametrize` lists, and each pass's integers are sizes the op runs with.
def test_sizes_a_parametrize_list_passes_the_test_that_builds_the_kernel():
    legal, refused = _legal(
        "import pytest\n\n"
        "CASES = [(512, 64), (128, 64)]\n\n\n"
        '@pytest.mark.parametrize("dtype", ["float16"])\n'
        '@pytest.mark.parametrize("M, N", CASES)\n'
        "def test_rows(dtype, M, N):\n"
        "    rows(M, N, 32)\n"
    )
    assert legal == (8, 16, 32, 64, 128)
    assert "does not divide 128" in refused[256]


# the tno_if_dev shape: a symbolic N the kernel clips its last tile at, sized only by a tensor
# an imported helper builds; the test's own parameter N (same name) takes each listed int
SYMBOLIC_N = """\
import pytest
import tilelang
import tilelang.language as T

from testcommon import gen_tensor

N_CASES = [64, 133, 499]
BLOCK_N = 32


@tilelang.jit(target="npuir")
def copy_rows(M, block_N, dtype="float16"):
    N = T.symbolic("N")

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, _):
            buf = T.alloc_ub((1, block_N), dtype)
            for i in T.serial(M):
                for j in T.serial(T.ceildiv(N, block_N)):
                    rest = T.min(N - j * block_N, block_N)
                    T.copy(A[i : i + 1, j * block_N : j * block_N + rest], buf[0, 0:rest])
                    T.copy(buf[0, 0:rest], B[i : i + 1, j * block_N : j * block_N + rest])

    return main


@pytest.mark.parametrize("N", N_CASES)
def test_copy_rows(N):
    kernel = copy_rows(20, BLOCK_N)
    a = gen_tensor((20, N), "float16")
    b = gen_tensor((20, N), "float16")
    kernel(a, b)
"""


def test_a_symbolic_extent_takes_the_ints_a_parametrize_list_gives_its_name():
    legal, refused = knobs.legal_values(SYMBOLIC_N, "BLOCK_N", BS)
    reasons = dict(refused)
    # a block past 499, the largest N the test runs, idles in every run; 256 tiles the 499 one
    assert legal == (16, 32, 64, 128, 256)
    assert "32-byte blocks" in reasons[8]  # 16-byte fp16 rows (ubrows.py)
    assert "extent 499" in reasons[512] and "N=499" in reasons[512]


# NPUIR's own spelling of its matrix multiply, `T.npuir_dot`, is a gemm: its A/B operands are
# placed in L1 and its accumulator in L0C, never in UB for the `npuir_` prefix of vector ops.
NPUIR_DOT = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def mm(M, N, K, block_M, dtype="float16", accum_dtype="float32"):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum_dtype)
    ):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            A_s = T.alloc_shared((block_M, K), dtype)
            B_s = T.alloc_shared((K, N), dtype)
            C_f = T.alloc_fragment((block_M, N), accum_dtype)
            T.copy(A[cid * block_M, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.npuir_dot(A_s, B_s, C_f, initC=True)
            T.copy(C_f, C[cid * block_M, 0])

    return main


if __name__ == "__main__":
    mm(4096, 128, 256, 64)
"""


def test_npuir_dot_operands_are_placed_as_a_gemms():
    legal, refused = knobs.legal_values(NPUIR_DOT, "block_M", BS[:-1])
    reasons = dict(refused)
    # L0C holds the [256, 128] fp32 accumulator (128 KiB); UB would not have held all three
    assert legal == (16, 32, 64, 128, 256)
    assert "L0C" in reasons[512] and "C_f" in reasons[512]
    assert "L1" in reasons[1024] and "UB" not in reasons[1024]
    # and the cube's 16-row fractal applies to its A operand
    assert "fractal" in reasons[8] and "A_s" in reasons[8]
