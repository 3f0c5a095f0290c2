# GEMM C = A @ B (TileLang-NPUIR, Expert mode, cube cores).
# Expert mode: buffers are placed by hand in L1 / L0C, the K loop rotates over
# `multi_l1` L1 slots (the multiplicity knob), and the compiler's automatic
# multi-buffering is switched off so it does not fight the manual slots.
import argparse
import os

import torch
import tilelang
import tilelang.language as T

os.environ["TILELANG_ASCEND_MODE"] = "Expert"

M, N, K = 1024, 1024, 4096

pass_configs = {
    tilelang.PassConfigKey.NPUIR_ENABLE_AUTO_MULTI_BUFFER: False,
}


@tilelang.jit(out_idx=[-1], target="npuir", pass_configs=pass_configs)
def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float32"):
    m_num = M // block_M
    n_num = N // block_N

    multi_l1 = 2  # L1 slots the K loop rotates over (2 = double buffering)

    @T.prim_func
    def gemmExpert(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), accum_dtype),
    ):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, _):
            bx = cid // n_num * block_M
            by = cid % n_num * block_N

            A_l1 = T.alloc_L1((multi_l1, block_M, block_K), dtype)
            B_l1 = T.alloc_L1((multi_l1, block_K, block_N), dtype)
            C_l0 = T.alloc_L0C((block_M, block_N), accum_dtype)

            with T.Scope("Cube"):
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    slot = k % multi_l1
                    T.copy(A[bx : bx + block_M, k * block_K : (k + 1) * block_K], A_l1[slot, :, :])
                    T.copy(B[k * block_K : (k + 1) * block_K, by : by + block_N], B_l1[slot, :, :])
                    T.gemm(A_l1[slot, :, :], B_l1[slot, :, :], C_l0, initC=(k == 0))
                T.copy(C_l0, C[bx : bx + block_M, by : by + block_N])

    return gemmExpert


def get_inputs(seed: int = 0):
    torch.manual_seed(seed)
    a = torch.randn(M, K, dtype=torch.float16).npu()
    b = torch.randn(K, N, dtype=torch.float16).npu()
    return a, b


def reference(a, b):
    return a.float() @ b.float()


def kernel(a, b):
    return matmul(M, N, K, block_M=128, block_N=128, block_K=64)(a, b)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--level", default="L0")
    args = parser.parse_args()
    torch.npu.set_device(0)
    tilelang.cache.clear_cache()
    inputs = get_inputs()
    torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-2, atol=1e-2)
    print(f"{args.level} passed")
