# LayerNorm over the last dimension (TileLang-NPUIR, Developer mode).
# Developer mode places buffers itself (T.alloc_shared) and turns on automatic
# multi-buffering; the row loop is software-pipelined with T.Pipelined.
import argparse
import os

import torch
import tilelang
import tilelang.language as T

os.environ["TILELANG_ASCEND_MODE"] = "Developer"

ROWS, HIDDEN = 4096, 2048
EPS = 1e-5

pass_configs = {
    "tl.enable_plan_and_update_buffer_allocation": True,
}


@tilelang.jit(out_idx=[-1], target="npuir", pass_configs=pass_configs)
def layer_norm(rows, hidden, block_M, eps=EPS, dtype="float32"):
    core_num = 40
    row_tiles = T.ceildiv(rows, block_M)
    tiles_per_core = T.ceildiv(row_tiles, core_num)

    @T.prim_func
    def layerNorm(
        X: T.Tensor((rows, hidden), dtype),
        Gamma: T.Tensor((hidden,), dtype),
        Beta: T.Tensor((hidden,), dtype),
        Y: T.Tensor((rows, hidden), dtype),
    ):
        with T.Kernel(core_num, is_npu=True) as (cid, _):
            gamma = T.alloc_shared((1, hidden), dtype)
            beta = T.alloc_shared((1, hidden), dtype)
            T.copy(Gamma, gamma)
            T.copy(Beta, beta)

            for t in T.Pipelined(tiles_per_core, num_stages=2):
                x = T.alloc_shared((block_M, hidden), dtype)
                centered = T.alloc_shared((block_M, hidden), dtype)
                mean = T.alloc_shared((block_M, 1), dtype)
                var = T.alloc_shared((block_M, 1), dtype)

                row = (cid * tiles_per_core + t) * block_M
                T.copy(X[row : row + block_M, :], x)
                T.reduce_sum(x, mean, dim=1)
                T.npuir_mul(mean, 1.0 / hidden, mean)
                T.npuir_sub(x, mean, centered)
                T.npuir_mul(centered, centered, x)
                T.reduce_sum(x, var, dim=1)
                T.npuir_mul(var, 1.0 / hidden, var)
                T.npuir_add(var, eps, var)
                T.npuir_rsqrt(var, var)
                T.npuir_mul(centered, var, centered)
                T.npuir_mul(centered, gamma, centered)
                T.npuir_add(centered, beta, centered)
                T.copy(centered, Y[row : row + block_M, :])

    return layerNorm


def get_inputs(seed: int = 0):
    torch.manual_seed(seed)
    x = torch.randn(ROWS, HIDDEN, dtype=torch.float32).npu()
    gamma = torch.randn(HIDDEN, dtype=torch.float32).npu()
    beta = torch.randn(HIDDEN, dtype=torch.float32).npu()
    return x, gamma, beta


def reference(x, gamma, beta):
    return torch.nn.functional.layer_norm(x, (HIDDEN,), gamma, beta, EPS)


def kernel(x, gamma, beta):
    return layer_norm(ROWS, HIDDEN, block_M=8)(x, gamma, beta)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--level", default="L0")
    args = parser.parse_args()
    torch.npu.set_device(0)
    tilelang.cache.clear_cache()
    inputs = get_inputs()
    torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-4, atol=1e-4)
    print(f"{args.level} passed")
