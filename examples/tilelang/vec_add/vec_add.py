# Element-wise C = A + B on the vector cores (TileLang-NPUIR, Expert mode).
# Each core walks its share of row tiles; a tile is copied GM -> UB, added
# with the vector unit and copied back. Tunable: BLOCK_N (columns per tile).
import argparse
import os

import torch
import tilelang
import tilelang.language as T

os.environ["TILELANG_ASCEND_MODE"] = "Expert"

M, N = 4096, 4096
BLOCK_M = 32  # rows per tile
BLOCK_N = 1024  # columns per tile; UB holds 3 tiles of BLOCK_M x BLOCK_N
CORE_NUM = 40  # vector cores of an Atlas A2


@tilelang.jit(out_idx=[-1], target="npuir")
def vec_add(M, N, block_M, block_N, dtype="float16"):
    m_num = T.ceildiv(M, block_M)
    n_num = T.ceildiv(N, block_N)
    tiles_per_core = T.ceildiv(m_num * n_num, CORE_NUM)

    @T.prim_func
    def vecAdd(
        A: T.Tensor((M, N), dtype),
        B: T.Tensor((M, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(CORE_NUM, is_npu=True) as (cid, _):
            a_ub = T.alloc_ub((block_M, block_N), dtype)
            b_ub = T.alloc_ub((block_M, block_N), dtype)
            c_ub = T.alloc_ub((block_M, block_N), dtype)

            for i in T.serial(tiles_per_core):
                tile = cid * tiles_per_core + i
                if tile < m_num * n_num:
                    bx = tile // n_num * block_M
                    by = tile % n_num * block_N
                    T.copy(A[bx, by], a_ub, size=[block_M, block_N])
                    T.copy(B[bx, by], b_ub, size=[block_M, block_N])
                    T.npuir_add(a_ub, b_ub, c_ub)
                    T.copy(c_ub, C[bx, by], size=[block_M, block_N])

    return vecAdd


def get_inputs(seed: int = 0):
    torch.manual_seed(seed)
    a = torch.randn(M, N, dtype=torch.float16).npu()
    b = torch.randn(M, N, dtype=torch.float16).npu()
    return a, b


def reference(a, b):
    return a + b


def kernel(a, b):
    return vec_add(M, N, BLOCK_M, BLOCK_N)(a, b)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--level", default="L0")
    args = parser.parse_args()
    torch.npu.set_device(0)
    tilelang.cache.clear_cache()
    inputs = get_inputs()
    torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-2, atol=1e-2)
    print(f"{args.level} passed")
