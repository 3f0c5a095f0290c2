"""A kernel whose buffers, summed as allocated, already overflow a memory at the file's own
values runs only because its compiler reuses memory (memory planning). How far that reuse
reaches is not in the file, so a value that grows those buffers is refused with that reason,
and values that do not grow them stay planned (bot/strategies/capacity.py)."""

from __future__ import annotations

from bot.strategies import knobs

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)

# an epilogue with eight (block_M // 2, block_N) fp32 tiles per vector core: 16 x block_M x
# block_N bytes, 256 KiB at the file's own 16 x 1024, past the 192 KiB of UB
EPILOGUE = """\
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1], pass_configs={{"tl.ascend.memory_planning": True}})
def scaled_gelu(M, N, block_M={BM}, block_N={BN}):
    sub = block_M // 2

    @T.prim_func
    def main(A: T.Tensor((M, N), "float"), B: T.Tensor((M, N), "float")):
        with T.Kernel(T.ceildiv(M, block_M) * T.ceildiv(N, block_N), is_npu=True) as (cid, vid):
            bx = cid // T.ceildiv(N, block_N)
            by = cid % T.ceildiv(N, block_N)
            x = T.alloc_ub((sub, block_N), "float")
            y = T.alloc_ub((sub, block_N), "float")
            sq = T.alloc_ub((sub, block_N), "float")
            cube = T.alloc_ub((sub, block_N), "float")
            u = T.alloc_ub((sub, block_N), "float")
            u2 = T.alloc_ub((sub, block_N), "float")
            s = T.alloc_ub((sub, block_N), "float")
            out = T.alloc_ub((sub, block_N), "float")
            T.copy(A[bx * block_M + vid * sub, by * block_N], x)
            T.tile.mul(sq, x, x)
            T.tile.mul(cube, sq, x)
            T.tile.add(u, x, cube)
            T.tile.mul(u2, u, 0.79788456)
            T.tile.sigmoid(s, u2)
            T.tile.mul(y, x, s)
            T.copy(y, out)
            T.copy(out, B[bx * block_M + vid * sub, by * block_N])

    return main


if __name__ == "__main__":
    scaled_gelu(64, 4096)
"""


def test_growing_buffers_that_already_overflow_on_paper_is_refused():
    src = EPILOGUE.format(BM=16, BN=1024)
    legal, refused = knobs.legal_values(src, "block_N", BS)
    reasons = dict(refused)
    assert 2048 not in legal and 4096 not in legal
    reason = reasons[2048]
    assert "already take 262144 bytes at block_N=1024" in reason, reason
    assert "192 KiB" in reason and "buffers share memory" in reason
    assert "only values that do not grow them are planned" in reason
    # smaller tiles only shrink what already runs
    assert {256, 512} <= set(legal)
    legal_m, refused_m = knobs.legal_values(src, "block_M", BS)
    assert 32 not in legal_m and "already take" in dict(refused_m)[32]
    assert 8 in legal_m


def test_a_kernel_that_fits_at_its_own_values_grows_up_to_the_memory():
    src = EPILOGUE.format(BM=16, BN=256)  # 64 KiB as allocated
    legal, refused = knobs.legal_values(src, "block_N", BS)
    assert 512 in legal and 1024 not in legal  # 128 KiB fits; 256 KiB is past 192 KiB
    reason = dict(refused)[1024]
    assert "would take 262144 bytes" in reason and "already" not in reason
