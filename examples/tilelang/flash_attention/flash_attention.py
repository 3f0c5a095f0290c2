# Flash attention forward, O = softmax(Q K^T * scale) V, per (batch, head)
# (TileLang-NPUIR, Developer mode: a mix kernel, cube for the two GEMMs and
# vector for the online softmax). KV blocks are streamed with T.Pipelined;
# Developer mode inserts the cube/vector synchronisation itself.
import argparse
import os

import torch
import tilelang
import tilelang.language as T

os.environ["TILELANG_ASCEND_MODE"] = "Developer"

BATCH, HEADS, SEQ_LEN, DIM = 1, 16, 4096, 128


@tilelang.jit(out_idx=[3], target="npuir")
def flash_attention_fwd(batch, heads, seq_len, dim):
    block_M, block_N = 64, 128  # query rows per core, KV rows per step

    dtype = "float16"
    accum_dtype = "float32"
    scale = (1.0 / dim) ** 0.5
    shape = [batch, heads, seq_len, dim]
    q_blocks = T.ceildiv(seq_len, block_M)

    @T.prim_func
    def flashAttnFwd(
        Q: T.Tensor(shape, dtype),
        K: T.Tensor(shape, dtype),
        V: T.Tensor(shape, dtype),
        Output: T.Tensor(shape, dtype),
    ):
        with T.Kernel(q_blocks * heads * batch, is_npu=True) as (cid, _):
            bx = cid % q_blocks
            by = cid // q_blocks % heads
            bz = cid // q_blocks // heads

            q = T.alloc_shared([block_M, dim], dtype)
            k = T.alloc_shared([block_N, dim], dtype)
            v = T.alloc_shared([block_N, dim], dtype)
            scores = T.alloc_fragment([block_M, block_N], accum_dtype)
            probs = T.alloc_shared([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            pv = T.alloc_fragment([block_M, dim], accum_dtype)
            m_i = T.alloc_shared([block_M, 1], accum_dtype)
            m_prev = T.alloc_shared([block_M, 1], accum_dtype)
            l_i = T.alloc_shared([block_M, 1], accum_dtype)
            l_blk = T.alloc_shared([block_M, 1], accum_dtype)

            T.npuir_brc(0.0, acc_o)
            T.npuir_brc(0.0, l_i)
            T.npuir_brc(-(2.0**30), m_i)
            T.copy(Q[bz, by, bx * block_M : (bx + 1) * block_M, :], q)

            for j in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=2):
                T.copy(K[bz, by, j * block_N : (j + 1) * block_N, :], k)
                T.copy(V[bz, by, j * block_N : (j + 1) * block_N, :], v)
                T.gemm(q, k, scores, initC=True, b_transpose=True)
                T.npuir_mul(scores, scale, scores)

                # online softmax: rescale what was accumulated with the new row max
                T.copy(m_i, m_prev)
                T.reduce_max(scores, m_i, dim=1)
                T.npuir_max(m_i, m_prev, m_i)
                T.npuir_sub(scores, m_i, scores)
                T.npuir_exp(scores, scores)
                T.npuir_sub(m_prev, m_i, m_prev)
                T.npuir_exp(m_prev, m_prev)
                T.reduce_sum(scores, l_blk, dim=1)
                T.npuir_mul(l_i, m_prev, l_i)
                T.npuir_add(l_i, l_blk, l_i)
                T.npuir_mul(acc_o, m_prev, acc_o)

                T.copy(scores, probs)
                T.gemm(probs, v, pv, initC=True)
                T.npuir_add(acc_o, pv, acc_o)

            T.npuir_div(acc_o, l_i, acc_o)
            T.copy(acc_o, Output[bz, by, bx * block_M : (bx + 1) * block_M, :])

    return flashAttnFwd


def get_inputs(seed: int = 0):
    torch.manual_seed(seed)
    shape = (BATCH, HEADS, SEQ_LEN, DIM)
    return tuple(torch.randn(shape, dtype=torch.float16).npu() for _ in range(3))


def reference(q, k, v):
    scores = torch.einsum("bhsd,bhkd->bhsk", q.float(), k.float()) * (1.0 / DIM) ** 0.5
    return torch.einsum("bhsk,bhkd->bhsd", scores.softmax(dim=-1), v.float()).half()


def kernel(q, k, v):
    return flash_attention_fwd(BATCH, HEADS, SEQ_LEN, DIM)(q, k, v)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--level", default="L0")
    args = parser.parse_args()
    torch.npu.set_device(0)
    tilelang.cache.clear_cache()
    inputs = get_inputs()
    torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-2, atol=1e-2)
    print(f"{args.level} passed")
