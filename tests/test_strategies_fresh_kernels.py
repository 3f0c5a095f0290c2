"""Readings found missing on fresh upstream kernels (heldout_an / ao / ap / aq) and on the corpus
rewritten (benchmarks/corpus_rewrites.py kwargs, kilo): each kernel below is a small stand-in
for the upstream pattern, and each test fails without its reading."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from bot.config.schema import OpConfig
from bot.strategies.facts import reaching
from bot.strategies.planner import Planner
from bot.strategies.source import int_value

STRATEGIES = ["block_size", "pipeline_depth", "multi_buffer", "vprefix"]


def _plan(src: str) -> tuple[dict[str, tuple], list[str]]:
    op = OpConfig(project="p", name="k", dir=Path("examples/p/k"))
    specs, skipped = Planner(op).specs(textwrap.dedent(src).lstrip(), STRATEGIES)
    return {s.key: tuple(s.values) for s in specs if s.kind == "knob"}, skipped


# zhaojiqiao/tilelang-npu flash_attn_npuir.py: each tail computed in three steps; the K tile
# [tail_n, tail_k] is loaded into l1_b of [block_m, block_k], so block_n <= block_m.
STEPPED = """
import tilelang
import tilelang.language as T


def attn(seq_len, dim, block_m, block_n, block_k, dtype="float16"):
    @T.prim_func
    def main(K: T.Tensor([seq_len, dim], dtype), O: T.Tensor([seq_len, dim], dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_m), is_npu=True) as (cid, subid):
            l1_b = T.alloc_L1([block_m, block_k], dtype)
            for i in T.serial(T.ceildiv(seq_len, block_n)):
                tail_n = i * block_n
                tail_n = seq_len - tail_n
                tail_n = T.min(block_n, tail_n)
                for k in T.serial(T.ceildiv(dim, block_k)):
                    tail_k = T.min(block_k, dim - k * block_k)
                    T.npuir_load_nd2nz(K[i * block_n, k * block_k], l1_b, [tail_n, tail_k])

    return main


if __name__ == "__main__":
    tilelang.compile(attn(4096, 128, 128, 128, 64), target="npuir")
"""


def test_a_tail_computed_in_steps_still_bounds_the_copy():
    knobs, skipped = _plan(STEPPED)
    assert "block_m" in knobs and "block_n" in knobs
    assert 64 not in knobs["block_m"] and 256 not in knobs["block_n"]
    assert any("block_m=64" in s and "`l1_b`" in s for s in skipped), skipped
    assert any("block_n=256" in s and "`l1_b`" in s for s in skipped), skipped


def _use(src: str, name: str) -> tuple[cst.FunctionDef, cst.Name]:
    module = cst.parse_module(textwrap.dedent(src))
    fn = module.body[0]
    assert isinstance(fn, cst.FunctionDef)
    found: list[cst.Name] = []

    class Uses(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "use":
                found.extend(a.value for a in node.args if isinstance(a.value, cst.Name))

    fn.visit(Uses())
    return fn, found[0]


def test_reaching_is_the_last_plain_binding_and_nothing_when_unclear():
    fn, use = _use("def f(n):\n    t = 1\n    t = min(n, t)\n    use(t)\n", "t")
    assert cst.Module([]).code_for_node(reaching("t", use, fn)) == "min(n, t)"
    branchy = "def f(n):\n    t = min(n, 4)\n    if n:\n        t = 2 * n\n    use(t)\n"
    assert reaching("t", _use(branchy, "t")[1], _use(branchy, "t")[0]) is None
    carried = "def f(n):\n    t = min(n, 4)\n    for i in n:\n        use(t)\n        t = 2 * n\n"
    fn, use = _use(carried, "t")
    assert reaching("t", use, fn) is None


# the corpus's rms_norm with its helper called by keyword (`_align_up(n=N, alignment=...)`)
PADDED = """
import tilelang
import tilelang.language as T

ALIGNMENT = 16


def _align_up(n, alignment):
    return (n + alignment - 1) // alignment * alignment


def rms(M, N, block_m=64):
    N_padded = _align_up({call})

    @T.prim_func
    def main(x: T.Tensor((M, N_padded), "float16")):
        with T.Kernel(T.ceildiv(M, block_m), is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_m, N_padded), "float16")
            T.copy(x[cid * block_m, 0], buf)

    return main


if __name__ == "__main__":
    tilelang.compile(rms(4096, 1000), target="npuir")
"""


def test_a_helper_called_by_keyword_sizes_as_called_by_position():
    positional = _plan(PADDED.replace("{call}", "N, ALIGNMENT"))
    keyword = _plan(PADDED.replace("{call}", "n=N, alignment=ALIGNMENT"))
    assert any("block_m=" in s and "UB" in s for s in positional[1]), positional[1]
    assert keyword == positional


# CeleNewYear/tilelang-mlir-ascend test_cmp_select_dev.py: one factory built four times, another once
TWO_FACTORIES = """
import tilelang
import tilelang.language as T

M = N = 256


def full(M, N, block_M, block_N, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype)):
        with T.Kernel(M // block_M * (N // block_N), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, block_N), dtype)
            T.copy(A[cid // (N // block_N) * block_M, cid % (N // block_N) * block_N], a)

    return main


def partial(M, N, block_M, block_N, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype)):
        with T.Kernel(M // block_M * (N // block_N), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, block_N), dtype)
            T.copy(A[cid // (N // block_N) * block_M, cid % (N // block_N) * block_N], a)

    return main


def test():
    tilelang.compile(full(M, N, 32, 64, dtype="float16"), target="npuir")
    tilelang.compile(full(M, N, 16, 64, dtype="float32"), target="npuir")
    tilelang.compile(partial(M, N, 32, 64), target="npuir")


if __name__ == "__main__":
    test()
"""


def test_a_factory_whose_binding_cannot_be_tuned_is_listed_beside_the_one_that_can():
    knobs, skipped = _plan(TWO_FACTORIES)
    assert set(knobs) == {"partial.block_M", "partial.block_N"}, knobs
    assert any(s.startswith("block_size: full.block_M: ") for s in skipped), skipped


# ShareableXue/tilelang-ascend sparse_fa_v5.py: `test(**config)` over written configurations
# none of which names block_M, so its default runs every time
CONFIGS = """
import tilelang
import tilelang.language as T


def kernel(N, block_M):
    @T.prim_func
    def main(A: T.Tensor((N,), "float16")):
        with T.Kernel(T.ceildiv(N, block_M), is_npu=True) as (cid, _):
            a = T.alloc_ub((1, block_M), "float16")
            T.copy(A[cid * block_M], a)

    return main


def test(N, block_M=128):
    tilelang.compile(kernel(N, block_M), target="npuir")


if __name__ == "__main__":
    test_configs = [{"N": 1024}, {"N": 4096}]
    for config in test_configs:
        test(**config)
"""


def test_configurations_that_leave_a_parameter_out_keep_its_default():
    knobs, skipped = _plan(CONFIGS)
    assert "block_M" in knobs and 128 in knobs["block_M"], (knobs, skipped)
    named = CONFIGS.replace('{"N": 4096}', '{"N": 4096, "block_M": 64}')
    knobs, skipped = _plan(named)
    assert "block_M" not in knobs
    assert any("block_M" in s and "**config" in s for s in skipped), skipped


def test_a_tile_word_inside_a_name_is_listed_with_how_to_tune_it():
    src = CONFIGS.replace("block_M", "inner_tile")
    knobs, skipped = _plan(src)
    assert not knobs
    assert any(s.startswith("block_size: inner_tile: ") and "tune.yaml" in s for s in skipped)


# vec_add_2d_multi_buffer rewritten by `kilo`: sizes written as arithmetic on literals
SIZED = """
import argparse

import tilelang
import tilelang.language as T

parser = argparse.ArgumentParser()
parser.add_argument("--M", type=int, default={M})
args = parser.parse_args()


def add(M, block_M, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M,), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M,), dtype)
            T.copy(A[cid * block_M], a)
            T.copy(a, B[cid * block_M])

    return main


tilelang.compile(add(args.M, 64), target="npuir")
"""


def test_a_size_written_as_arithmetic_on_literals_is_read_as_its_value():
    assert int_value(cst.parse_expression("8 * 1024")) == 8192
    assert int_value(cst.parse_expression("2 ** 13 + (1 << 4) - 16 // 4")) == 8204
    expected = {
        "8 * N": None,
        "1 // 0": None,
        "2 ** 100": None,
        "8 / 2": None,
        "-(4 * 1024)": -4096,
    }
    for text, value in expected.items():
        assert int_value(cst.parse_expression(text)) == value, text
    assert _plan(SIZED.replace("{M}", "256")) == _plan(SIZED.replace("{M}", "2 ** 8"))
    knobs, skipped = _plan(SIZED.replace("{M}", "4 * 64"))
    assert knobs == {"block_M": (8, 16, 32, 64, 128, 256)}, skipped


# sonokeyu example_level2_083_conv3d_groupnorm_min_clamp_dropout.py: rows guarded by `if oh < OH`
GUARDED = """
import tilelang
import tilelang.language as T


def zero_rows(H, W, K, dtype="float32"):
    OH = H - K + 1
    block_OH = 8
    oh_num = T.ceildiv(OH, block_OH)

    @T.prim_func
    def main(Y: T.Tensor((OH, W), dtype)):
        with T.Kernel(oh_num, is_npu=True) as (cid, _):
            zero = T.alloc_ub((1, W), dtype)
            for r in T.serial(block_OH):
                oh = cid * block_OH + r
                if oh < OH:
                    T.copy(zero, Y[oh : oh + 1, 0:W])

    return main


zero_rows({H}, 64, 2)
"""


def test_a_guarded_tile_past_the_extent_is_refused_as_idle():
    knobs, skipped = _plan(GUARDED.replace("{H}", "40"))  # OH = 39: any value is correct
    assert knobs == {"block_OH": (8, 16, 32)}, skipped
    assert any("block_OH=64 exceeds the extent 39" in s for s in skipped), skipped
    knobs, skipped = _plan(GUARDED.replace("{H}", "4"))  # OH = 3: the current 8 covers it
    assert knobs == {"block_OH": (8,)}
    assert any("the current 8 already covers it in one tile" in s for s in skipped), skipped


def test_a_block_written_as_arithmetic_is_read_but_not_tuned():
    # tns_clamp_expr: `block_size = 64 * 1024`, the author's own arithmetic, stays as written
    knobs, skipped = _plan(
        SIZED.replace("{M}", "256").replace("add(args.M, 64)", "add(args.M, 8 * 8)")
    )
    assert "block_M" not in knobs
    assert any("block_M' is set by an expression at line" in s for s in skipped), skipped


# sonokeyu example_level2_real_p2_batch.py: three kernels, each built with its own defaults
OWN_DEFAULTS = """
import tilelang
import tilelang.language as T


def {name}(M, N, block_M={bm}, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, N), dtype)
            T.copy(A[cid * block_M, 0], a)

    return main
"""


def test_each_kernels_own_default_is_listed_as_such_not_tuned():
    src = "".join(
        OWN_DEFAULTS.replace("{name}", n).replace("{bm}", bm)
        for n, bm in (("scale", "16"), ("tanh", "32"))
    )
    knobs, skipped = _plan(src + "\n\nscale(64, 64)\ntanh(64, 64)\n")
    assert not knobs
    why = next(s for s in skipped if s.startswith("block_size: block_M: "))
    assert "each the default of its own kernel factory" in why, why
