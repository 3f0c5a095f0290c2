"""Sizes a host function reads from its tensors (`M, N = x.shape`, `x.shape[1]`, `x.size(0)`)
are followed to where the run path builds them with literal sizes
(bot/strategies/tensorshapes.py): the true extent feeds the kernel's rules, per call path
when several calls build different tensors (bot/strategies/callsizes.py), and a symbolic
shape takes the sizes of the tensors the compiled kernel is called with. Where the tensor is
not built in the file, the honest reason stays."""

from __future__ import annotations

from bot.strategies import knobs

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)

# a row kernel tiled by block_M with full tiles (`M // block_M`); {RUN} calls it
ROWS = """\
import sys

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


def test_a_shape_unpacked_from_a_tensor_main_builds_is_the_extent():
    legal, refused = _legal(
        "def run(x):\n"
        "    M, N = x.shape\n"
        "    return rows(M, N, block_M=32)\n\n\n"
        'if __name__ == "__main__":\n'
        "    x = torch.randn(96, 128, dtype=torch.float16).npu()\n"
        "    run(x)\n"
    )
    assert legal == (8, 16, 32)
    assert "does not divide 96" in refused[64]
    assert "could not resolve" not in refused[64]


def test_shape_index_and_size_call_with_a_size_tuple_and_constants():
    legal, refused = _legal(
        "ROWS, COLS = 192, 64\n\n\n"
        "def run(x):\n"
        "    return rows(x.shape[0], x.size(-1), block_M=32)\n\n\n"
        'if __name__ == "__main__":\n'
        "    x = torch.empty((ROWS, COLS), dtype=torch.float16).contiguous()\n"
        "    run(x)\n"
    )
    assert legal == (8, 16, 32, 64)
    assert "does not divide 192" in refused[128]


def test_each_call_path_builds_its_own_tensor_through_a_helper():
    legal, refused = _legal(
        "def run(x):\n"
        "    M, N = x.shape\n"
        "    return rows(M, N, block_M=32)\n\n\n"
        "def make(shape):\n"
        "    t = torch.randn(shape, dtype=torch.float32)\n"
        "    t = t.to(torch.float16)\n"
        "    return t.npu() * 0.5 + 1.0\n\n\n"
        "def check(m, n):\n"
        "    x = make((m, n))\n"
        "    run(x)\n\n\n"
        'if __name__ == "__main__":\n'
        "    check(128, 256)\n"
        "    check(96, 128)\n"
    )
    assert legal == (8, 16, 32)
    assert "does not divide 96" in refused[64]


def test_a_size_from_argparse_defaults_reaches_the_tensor():
    legal, refused = _legal(
        "import argparse\n\n\n"
        "def run(x):\n"
        "    return rows(x.shape[0], x.shape[1], block_M=32)\n\n\n"
        'if __name__ == "__main__":\n'
        "    parser = argparse.ArgumentParser()\n"
        '    parser.add_argument("--m", type=int, default=160)\n'
        "    args = parser.parse_args()\n"
        "    run(torch.zeros(args.m, 64))\n"
    )
    assert legal == (8, 16, 32)
    assert "does not divide 160" in refused[64]


def test_a_tensor_the_file_does_not_build_keeps_the_honest_reason():
    legal, refused = _legal(
        "def run(x):\n"
        "    M, N = x.shape\n"
        "    return rows(M, N, block_M=32)\n\n\n"
        'if __name__ == "__main__":\n'
        "    run(torch.load(sys.argv[1]))\n"
    )
    assert legal == (8, 16, 32)
    assert "could not resolve its extent from this file" in refused[64]


def test_a_tensor_off_the_run_path_sets_no_extent():
    legal, refused = _legal(
        "def run(x):\n"
        "    M, N = x.shape\n"
        "    return rows(M, N, block_M=32)\n\n\n"
        "def unused():\n"
        "    run(torch.randn(4096, 64))\n\n\n"
        'if __name__ == "__main__":\n'
        "    run(torch.load(sys.argv[1]))\n"
    )
    assert "could not resolve its extent from this file" in refused[64]


# M is symbolic: the compiled kernel takes it from the tensor it is called with
SYMBOLIC = """\
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def rows(N, block_M=32):
    M = T.symbolic("M")

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M, N), "float16")
            T.copy(A[cid * block_M, 0], buf)
            T.copy(buf, B[cid * block_M, 0])

    return main


def run(a):
    m, n = a.shape
    kernel = rows(n, block_M=32)
    b = torch.empty((m, n), dtype=a.dtype)
    kernel(a, b)
    return b


def case(m, n):
    run(torch.randn((m, n), dtype=torch.float16))


if __name__ == "__main__":
    case(128, 64)
    case(96, 64)
"""


def test_a_symbolic_shape_takes_the_sizes_of_the_tensors_the_kernel_is_called_with():
    legal, refusals = knobs.legal_values(SYMBOLIC, "block_M", BS)
    refused = dict(refusals)
    assert legal == (8, 16, 32)
    assert "does not divide 96" in refused[64]
    assert "does not divide 128" in refused[256]


def test_a_size_passed_beside_a_computed_argument_keeps_its_argparse_default():
    # `tuple(sizes)` is followed per call path; K beside it still reaches `args.K`'s default
    src = ROWS.replace("def rows(M, N, block_M=32):", "def rows(groups, M, N, block_M=32):")
    src = src.replace(
        "{RUN}",
        "import argparse\n\n\n"
        "def run(sizes, M, N):\n"
        "    return rows(tuple(sizes), M, N, block_M=32)\n\n\n"
        "def check():  # off the run path\n"
        "    run([3], 160, 64)\n\n\n"
        'if __name__ == "__main__":\n'
        "    parser = argparse.ArgumentParser()\n"
        '    parser.add_argument("--M", type=int, default=96)\n'
        "    args = parser.parse_args()\n"
        "    M = args.M\n"
        "    run([1, 2], M, 64)\n",
    )
    legal, refused = knobs.legal_values(src, "block_M", BS)
    assert legal == (8, 16, 32)
    assert "does not divide 96" in dict(refused)[64]


def test_a_minus_one_in_a_reshape_is_the_inferred_size_never_an_extent_of_minus_one():
    # 4 x 24 x 128 flattened to (-1, 128): 96 rows
    legal, refused = _legal(
        "def run(x):\n"
        "    flat = x.reshape(-1, x.size(-1))\n"
        "    M, N = flat.shape\n"
        "    return rows(M, N, block_M=32)\n\n\n"
        'if __name__ == "__main__":\n'
        "    run(torch.randn(4, 24, 128, dtype=torch.float16))\n"
    )
    assert legal == (8, 16, 32)
    assert "does not divide 96" in refused[64]
    assert not any("-1" in why for why in refused.values())


def test_a_minus_one_over_a_tensor_of_unknown_size_leaves_the_extent_unknown():
    legal, refused = _legal(
        "def run(x):\n"
        "    flat = x.view(-1, 128)\n"
        "    M, N = flat.shape\n"
        "    return rows(M, N, block_M=32)\n\n\n"
        'if __name__ == "__main__":\n'
        "    run(torch.load(sys.argv[1]))\n"
    )
    assert legal == (8, 16, 32)
    assert "could not resolve" in refused[64]
    assert not any("-1" in why for why in refused.values())
