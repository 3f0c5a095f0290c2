# RMSNorm over the last dimension: y = x / sqrt(mean(x^2) + eps) * gamma
# (TileLang-NPUIR, Expert mode, vector cores). One core normalises a band of
# block_M rows at a time; the weight multiply is still a scalar T.Parallel
# loop (a candidate for the "vectorize" strategy).
import argparse
import os

import torch
import tilelang
import tilelang.language as T

os.environ["TILELANG_ASCEND_MODE"] = "Expert"

ROWS, HIDDEN = 8192, 1024
EPS = 1e-6


@tilelang.jit(out_idx=[-1], target="npuir")
def rms_norm(rows, hidden, block_M=16, eps=EPS, dtype="float32"):
    row_tiles = T.ceildiv(rows, block_M)

    @T.prim_func
    def rmsNorm(
        X: T.Tensor((rows, hidden), dtype),
        Gamma: T.Tensor((hidden,), dtype),
        Y: T.Tensor((rows, hidden), dtype),
    ):
        with T.Kernel(row_tiles, is_npu=True) as (cid, _):
            x_ub = T.alloc_ub((block_M, hidden), dtype)
            sq_ub = T.alloc_ub((block_M, hidden), dtype)
            sum_ub = T.alloc_ub((block_M, 1), dtype)
            gamma_ub = T.alloc_ub((1, hidden), dtype)

            T.copy(Gamma, gamma_ub)
            for _ in T.Pipelined(1):
                row = cid * block_M
                T.copy(X[row, 0], x_ub, size=[block_M, hidden])
                T.npuir_mul(x_ub, x_ub, sq_ub)
                T.reduce_sum(sq_ub, sum_ub, dim=1)
                T.npuir_mul(sum_ub, 1.0 / hidden, sum_ub)
                T.npuir_add(sum_ub, eps, sum_ub)
                T.npuir_rsqrt(sum_ub, sum_ub)
                T.npuir_mul(x_ub, sum_ub, x_ub)  # broadcast over the row
                for i, j in T.Parallel(block_M, hidden):
                    x_ub[i, j] = x_ub[i, j] * gamma_ub[0, j]
                T.copy(x_ub, Y[row, 0], size=[block_M, hidden])

    return rmsNorm


def get_inputs(seed: int = 0):
    torch.manual_seed(seed)
    x = torch.randn(ROWS, HIDDEN, dtype=torch.float32).npu()
    gamma = torch.randn(HIDDEN, dtype=torch.float32).npu()
    return x, gamma


def reference(x, gamma):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * gamma


def kernel(x, gamma):
    return rms_norm(ROWS, HIDDEN, block_M=16)(x, gamma)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--level", default="L0")
    args = parser.parse_args()
    torch.npu.set_device(0)
    tilelang.cache.clear_cache()
    inputs = get_inputs()
    torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-4, atol=1e-4)
    print(f"{args.level} passed")
