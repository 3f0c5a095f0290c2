# GEMM C = A @ B (TileLang-NPUIR, Developer mode, cube cores).
# Developer mode infers buffer scopes from T.alloc_shared / T.alloc_fragment,
# synchronises automatically and multi-buffers on its own; the K loop is
# software-pipelined with T.Pipelined.
import argparse
import os

import torch
import tilelang
import tilelang.language as T

os.environ["TILELANG_ASCEND_MODE"] = "Developer"

M, N, K = 2048, 2048, 2048


@tilelang.jit(out_idx=[-1], target="npuir")
def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float32"):
    m_num = T.ceildiv(M, block_M)
    n_num = T.ceildiv(N, block_N)

    @T.prim_func
    def gemmDev(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, _):
            bx = cid // n_num * block_M
            by = cid % n_num * block_N

            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            for k in T.Pipelined(T.ceildiv(K, block_K)):
                T.copy(A[bx : bx + block_M, k * block_K : (k + 1) * block_K], A_shared)
                T.copy(B[k * block_K : (k + 1) * block_K, by : by + block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, initC=(k == 0))

            T.copy(C_local, C[bx : bx + block_M, by : by + block_N])

    return gemmDev


def get_inputs(seed: int = 0):
    torch.manual_seed(seed)
    a = torch.randn(M, K, dtype=torch.float16).npu()
    b = torch.randn(K, N, dtype=torch.float16).npu()
    return a, b


def reference(a, b):
    return (a.float() @ b.float()).half()


def kernel(a, b):
    return matmul(M, N, K, 128, 256, 64)(a, b)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--level", default="L0")
    args = parser.parse_args()
    torch.npu.set_device(0)
    tilelang.cache.clear_cache()
    inputs = get_inputs()
    torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-2, atol=1e-2)
    print(f"{args.level} passed")
