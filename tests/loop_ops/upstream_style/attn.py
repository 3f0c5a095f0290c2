# An upstream-style TileLang-NPUIR file (written for tunebot's tests): argparse
# defaults, a strict parse_args() without --level, an assert on the block size,
# a dead factory parameter, and a pipelined K loop. The `tilelang` package next
# to it is a stand-in so the file runs on a CPU; the latency comes from
# bench.py, a stand-in benchmark with a known optimum.
import argparse

import tilelang
import tilelang.language as T

parser = argparse.ArgumentParser(description="stand-in kernel")
parser.add_argument("--M", type=int, default=768)
parser.add_argument("--block_M", type=int, default=64)


@tilelang.jit(out_idx=[-1], target="npuir")
def attention(M, block_M, block_K, num_stages=1):
    assert M % block_M == 0, "M must be a multiple of block_M"
    m_num = M // block_M

    @T.prim_func
    def main(Q: T.Tensor((M, 128), "float16"), O: T.Tensor((M, 128), "float16")):
        with T.Kernel(m_num, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M, 128), "float16")
            for k in T.Pipelined(T.ceildiv(128, 32), num_stages=num_stages):
                T.copy(Q[cid * block_M, k * 32], buf)
            T.copy(buf, O[cid * block_M, 0])

    return main


def run(args):
    kernel = attention(args.M, args.block_M, 32)
    assert kernel is not None
    print("All check passed.")


if __name__ == "__main__":
    run(parser.parse_args())
