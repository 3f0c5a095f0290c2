"""Readings found missing on fresh upstream kernels (heldout_an / ao / ap / aq) and on the corpus
rewritten (benchmarks/corpus_rewrites.py kwargs, kilo): each kernel below is a small stand-in
for the upstream pattern, and each test fails without its reading."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from bot.config.schema import Knob, OpConfig
from bot.strategies import knobs
from bot.strategies.base import Refusal, Variant
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


# sonokeyu example_level2_real_p2_batch.py / _p5_batch.py: kernels, each built once with the
# defaults of its own signature, whose grid and row split come from a module helper
GRID = """
import tilelang
import tilelang.language as T


def grid(M, bm): return T.ceildiv(M, bm), bm // 2
"""
OWN_DEFAULTS = """

def {name}(M, N, block_M={bm}, dtype="float32"):
    mn, sub = grid(M, block_M)

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype)):
        with T.Kernel(mn, is_npu=True) as (cid, vid):
            rs = cid * block_M + vid * sub
            a = T.alloc_ub((sub, N), dtype)
            T.copy(A[rs : rs + sub, 0:N], a)

    return main
"""


def _own_defaults(calls: str) -> str:
    kernels = (("scale", "16"), ("tanh", "8"))
    return (
        GRID
        + "".join(OWN_DEFAULTS.replace("{name}", n).replace("{bm}", bm) for n, bm in kernels)
        + calls
    )


def test_each_kernel_with_its_own_defaults_gets_its_own_knob_and_rules():
    knobs, skipped = _plan(_own_defaults("\n\nscale(64, 2048)\ntanh(64, 2048)\n"))
    assert set(knobs) == {"scale.block_M", "tanh.block_M"}, skipped
    # the helper's `T.ceildiv(M, bm)` tiles M = 64 (slices clip the tail): past 64 only idles;
    # its `bm // 2` rows per vector core are a UB tile of sub x 2048 fp32: 48 rows at most
    for key in knobs:
        assert knobs[key] == (8, 16, 32), (key, knobs[key], skipped)
    assert any("block_M=128 exceeds the extent 64" in s for s in skipped), skipped
    assert any("block_M=64: the kernel's UB buffers" in s for s in skipped), skipped


def test_a_factory_the_file_never_calls_keeps_its_defaults_out_of_the_per_kernel_knobs():
    # a library's factory: its callers are elsewhere, so its default is no knob of this file
    knobs, _ = _plan(_own_defaults("\n\nscale(64, 2048)\n"))
    assert "tanh.block_M" not in knobs


# tag_alloc_splice_codegen: one tile per batch row over a `T.symbolic` batch; the block sizes
# the splice (the tile and the kernel's own output), not a part of a tiled extent
SYMBOLIC_COUNT = """
import tilelang
import tilelang.language as T


def splice(dim, block_N=128):
    batch = T.symbolic("batch")

    @T.prim_func
    def main(Live: T.Tensor([batch, 64, dim], "bfloat16"), Out: T.Tensor([batch, block_N, dim], "bfloat16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            k = T.alloc_L1([block_N, dim], "bfloat16")
            for b in T.serial(batch):
                T.copy(Live[b, 0:64, :], k[0:64, :])

    return main


def test():
    splice(dim=64)
"""


def test_a_count_of_symbolic_rows_does_not_count_the_knobs_tiles():
    knobs, skipped = _plan(SYMBOLIC_COUNT)
    assert knobs.get("block_N", (128,)) == (128,), knobs
    assert any("block_N=64: block_N sizes the kernel's own tensor Out" in s for s in skipped), (
        skipped
    )


# tile-ai sparse flash attention mask_pa / MTGR ragged-segment attention: the paged KV cache
# is declared [block_num, block_size, D]; the kernel reads it page by page through the block
# table (`index // block_size`, `index % block_size`) and sizes no buffer with either
PAGED = """
import tilelang
import tilelang.language as T


@tilelang.jit(workspace_idx=[3])
def attn(heads, dim, block_num=516, block_size=128, block_I=64, block_W=16, dtype="float16"):
    batch = T.symbolic("batch")
    table_len = T.symbolic("table_len")
    kv_shape = [block_num, block_size, dim]

    @T.prim_func
    def main(
        KV: T.Tensor(kv_shape, dtype),
        Idx: T.Tensor([batch, block_I], "int32"),
        Table: T.Tensor([batch, table_len], "int32"),
        Work: T.Tensor([block_W, dim], dtype),
    ):
        with T.Kernel(batch, is_npu=True) as (cid, vid):
            kv = T.alloc_ub([block_I, dim], dtype)
            for i in T.serial(block_I):
                page = Table[cid, Idx[cid, i] // block_size]
                T.copy(KV[page, Idx[cid, i] % block_size, 0:dim], kv[i, 0:dim])

    return main


attn(8, 128)
"""


def test_a_paged_caches_page_length_and_count_are_sizes_of_the_data_not_tiles():
    knobs, skipped = _plan(PAGED)
    assert "block_I" in knobs, skipped
    for name in ("block_size", "block_num"):
        assert name not in knobs
        why = next(s for s in skipped if s.startswith(f"block_size: {name}: "))
        assert "shapes the kernel's tensor KV" in why and "not a tile" in why, why
    # a workspace the runtime allocates from its declared shape is scratch, not data
    assert not any(s.startswith("block_size: block_W: ") and "not a tile" in s for s in skipped)


# tile-ai example_mtgr_ragged_segment_attn_nokv_v2.py: the only call passes more positional
# arguments than the wrapper takes (a TypeError before any kernel is built)
BROKEN_CALL = """
import tilelang
import tilelang.language as T


def kernel(M, block_M):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M,), "float32")
            T.copy(A[cid * block_M : cid * block_M + block_M], a)

    return main


def wrapper(x, M, block_M=128):
    return kernel(M, block_M)(x)


def test():
    wrapper({args})
"""


def test_a_call_that_raises_type_error_binds_nothing():
    for args, why in (
        ("1, 1024, 0, block_M=64", "'block_M' given by position and by keyword"),
        ("1, 1024, 7, 9", "4 positional arguments to 3 parameters"),
    ):
        knobs, skipped = _plan(BROKEN_CALL.replace("{args}", args))
        assert "block_M" not in knobs, (args, knobs)
        line = next(s for s in skipped if s.startswith("block_size: block_M: "))
        assert f"which raises TypeError before wrapper() runs ({why})" in line, line
    knobs, _ = _plan(BROKEN_CALL.replace("{args}", "1, 1024, block_M=64"))
    assert "block_M" in knobs  # the same call, valid: its keyword is the live value


def test_a_factory_the_run_never_builds_beside_those_it_does_is_listed_apart():
    # sonokeyu example_level2_real_next_batch.py: four kernels built in __main__, a fifth never
    src = _own_defaults("") + OWN_DEFAULTS.replace("{name}", "unused").replace("{bm}", "16")
    src += '\n\nif __name__ == "__main__":\n    scale(64, 2048)\n    tanh(64, 2048)\n'
    knobs, skipped = _plan(src)
    assert set(knobs) == {"scale.block_M", "tanh.block_M"}, skipped
    why = next(s for s in skipped if s.startswith("block_size: unused.block_M: "))
    assert "the run never builds it" in why, why


# tile-ai/tilelang examples/ascend example_dsa.py / flash_attention/core.py: the tiles are
# fields of a settings dataclass, copied to locals the asserts read
SETTINGS = """
from dataclasses import dataclass

import tilelang
import tilelang.language as T


@dataclass
class FwdTiling:
    block_topk: int = 128


def dsa(top_k, tiling=None):
    tiling = tiling or FwdTiling()
    BLOCK_TOP_K = tiling.block_topk
    assert BLOCK_TOP_K == 128, "the SIMD softmax packing requires block_topk == 128"

    @T.prim_func
    def main(Idx: T.Tensor((top_k,), "int32")):
        with T.Kernel(top_k // BLOCK_TOP_K, is_npu=True) as (cid, _):
            ids = T.alloc_ub((BLOCK_TOP_K,), "int32")
            T.copy(Idx[cid * BLOCK_TOP_K], ids)

    return main


def _pack(v):
    return v * 2


def quantize_ref(x, block_size=32):
    k = x.shape[-1]
    assert k % block_size == 0
    y = x.float().reshape(-1, k // block_size, block_size)
    return _pack(y)  # a helper of the file that builds no kernel


dsa(2048)
"""


def test_a_settings_field_copied_to_a_local_is_held_by_the_asserts_on_that_local():
    knobs, skipped = _plan(SETTINGS)
    assert knobs.get("block_topk") == (128,), (knobs, skipped)
    assert any("breaks the kernel's assert" in s and "BLOCK_TOP_K == 128" in s for s in skipped)


def test_a_host_functions_own_block_default_is_listed_as_host_only():
    _, skipped = _plan(SETTINGS)
    why = next(s for s in skipped if s.startswith("block_size: block_size: "))
    assert "default of the host function quantize_ref() (block_size=32, line" in why, why


# cases found in review: the new readings must not fire on the ordinary forms around them
ORDINARY = """
import tilelang
import tilelang.language as T


def grid(M, bm, cores=2):
    return M // (bm * cores)


@tilelang.jit
def kern(M, N, ref, block_M=64):
    other = ref.block_M
    assert other <= 64, "the reference's own tile"

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16")):
        with T.Kernel(grid(M, block_M), is_npu=True) as (cid, _):
            a = T.alloc_shared((block_M, N), "float16")
            T.copy(A[cid * block_M, 0], a)

    return main


kern(4096, 64, None)
"""
HOST_RUN = """

def run(M=4096, N=64, block_size=32):
    bm = block_size * 2
    return kern(M, N, None, bm)


run()
"""


def test_an_attribute_of_the_knobs_name_is_no_alias_without_a_settings_class():
    knobs, skipped = _plan(ORDINARY)
    assert not any("other <= 64" in s for s in skipped), skipped


def test_a_helper_read_at_its_call_takes_its_own_defaults():
    # grid(M, block_M) leaves cores=2: M // (block_M * 2) full tiles of 4096, all readable
    knobs, skipped = _plan(ORDINARY)
    assert not any("could not resolve its extent" in s for s in skipped), skipped
    assert 128 in knobs.get("block_M", ()), (knobs, skipped)


def test_a_host_default_that_reaches_a_kernel_through_a_local_is_not_called_host_only():
    _, skipped = _plan(ORDINARY + HOST_RUN)
    host_only = [s for s in skipped if "so a move could not change a kernel's tile" in s]
    assert not any(s.startswith("block_size: block_size: ") for s in host_only), host_only


# tile-ai/tilelang-ascend sparse_fa_v4.py: test()'s own page length sizes the host's cache
# tensors and fills a block table row by row, both read only by the host's reference; the
# kernel is built with block_M alone.
PAGED_HOST = """
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def attn(N, D, block_M=64):
    @T.prim_func
    def main(Q: T.Tensor((N, D), "float16"), Cache: T.Tensor((N, D), "float16")):
        with T.Kernel(N // block_M, is_npu=True) as (cid, _):
            q = T.alloc_shared((block_M, D), "float16")
            T.copy(Q[cid * block_M, 0], q)

    return main


def test(N=4096, D=64, block_M=64, block_size=128):
    pages = (N + block_size - 1) // block_size
    cache = torch.zeros(pages, block_size, D, dtype=torch.float16)
    table = []
    for p in range(pages):
        row = []
        row.append(p * block_size)
        table.append(row)
    kernel = attn(N, D, block_M)
    return kernel(torch.randn(N, D), torch.randn(N, D)), reference(cache, table)


def reference(cache, table):
    return cache.sum() + len(table)


test()
"""
# the same value handed on through a list the host fills: it may reach the factory
LISTED_RUN = """

def sweep(N=4096, D=64, block_len=128):
    sizes = []
    sizes.append(block_len // 2)
    for bm in sizes:
        attn(N, D, bm)


sweep()
"""


def test_a_host_default_that_sizes_only_host_tensors_is_listed_as_a_size_of_the_data():
    knobs, skipped = _plan(PAGED_HOST)
    why = next(s for s in skipped if s.startswith("block_size: block_size: "))
    assert "default of the host function test() (block_size=128, line" in why, why
    assert "it sizes tensors the host builds (cache)" in why, why
    assert 128 in knobs.get("block_M", ()), (knobs, skipped)


def test_a_host_default_filled_into_a_list_the_factory_reads_is_not_called_host_only():
    _, skipped = _plan(PAGED_HOST.replace("test()\n", "") + LISTED_RUN)
    host_only = [s for s in skipped if "default of the host function sweep()" in s]
    assert not host_only, host_only


# tile-ai/tilelang-ascend testing/python/language/parallel: each test binds its own sizes and
# builds its own kernel.
COPY_FACTORY = """

@tilelang.jit(out_idx=[-1])
def NAME(M, N, block_M, block_N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, block_N), "float32")
            T.copy(A[(cid // (N // block_N)) * block_M, (cid % (N // block_N)) * block_N], a)
            T.copy(a, B[(cid // (N // block_N)) * block_M, (cid % (N // block_N)) * block_N])

    return main
"""
SUITE = (
    "import tilelang\nimport tilelang.language as T\n"
    + "".join(COPY_FACTORY.replace("NAME", n) for n in ("fill", "narrow"))
    + """

def test_fill():
    M, N, block_M, block_N = 1024, 1024, 128, 128
    fill(M, N, block_M, block_N)


def test_fill_narrow():
    M, N, block_M, block_N = 1024, 64, 32, 64
    narrow(M, N, block_M, block_N)
"""
)


def test_each_tests_own_sizes_are_a_knob_of_that_test():
    knobs, skipped = _plan(SUITE)
    assert set(knobs) >= {"test_fill.block_M", "test_fill_narrow.block_N"}, (knobs, skipped)
    # each is held by the extent of its own test: 64 columns in the narrow one
    assert max(knobs["test_fill_narrow.block_N"]) == 64, knobs
    assert 256 in knobs["test_fill.block_N"], knobs
    assert not any("different places" in s for s in skipped), skipped


# looo000ooong/tilelang-mlir-ascend testing/npuir_a5/test_reduce_ops.py: one core walks row
# blocks of a ceil-divided count; each lane is kept below what is left of the extent.
REMAINDER = """
import tilelang
import tilelang.language as T


def rows(M, N, dtype="float32"):
    BLOCK_M = 8

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, _):
            a = T.alloc_shared((BLOCK_M, N), dtype)
            for mo in T.serial(0, (M + BLOCK_M - 1) // BLOCK_M):
                remain_m = M - mo * BLOCK_M
                for i, j in T.Parallel(BLOCK_M, N):
                    if i < remain_m and j < N:
                        a[i, j] = A[mo * BLOCK_M + i, j]
                for i, j in T.Parallel(BLOCK_M, N):
                    if i < remain_m:
                        B[mo * BLOCK_M + i, j] = a[i, j]

    return main


rows(1000, 128)
"""


def test_a_lane_kept_below_what_is_left_of_the_extent_guards_the_tail():
    knobs, skipped = _plan(REMAINDER)
    # 16 and 128 do not divide 1000: the last block is partial, and the guard covers it
    assert {16, 128} <= set(knobs.get("BLOCK_M", ())), (knobs, skipped)
    assert not any("needs full tiles" in s for s in skipped), skipped


# looo000ooong/tilelang-mlir-ascend testing/npuir_a5/test_cmp_ops.py: main walks shape tuples,
# dtypes and ops in nested loops, each a module list, and runs one test per combination.
NESTED_CASES = """
import tilelang
import tilelang.language as T

SHAPE_CASES = [(1024, 4096), (1024, 10240)]
DTYPE_CASES = ["float16", "float32"]


def make(M, N, dtype):
    block_M = 32
    block_N = 256

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, _):
            a = T.alloc_shared((block_M, block_N), dtype)
            c = T.alloc_shared((block_M, block_N), dtype)
            T.copy(A[(cid // (N // block_N)) * block_M, (cid % (N // block_N)) * block_N], a)
            T.copy(a, C[(cid // (N // block_N)) * block_M, (cid % (N // block_N)) * block_N])

    return main


def run(M, N, dtype, op):
    tilelang.compile(make(M, N, dtype), target="npuir")


def main():
    for M, N in SHAPE_CASES:
        for dtype in DTYPE_CASES:
            for op in ["eq", "ne"]:
                run(M, N, dtype, op)


main()
"""


def test_sizes_and_dtypes_from_nested_configuration_loops_bound_the_tiles():
    knobs, skipped = _plan(NESTED_CASES)
    # M = 1024 in every case: block_M divides it; two float32 tiles of (block_M, 256) fit 192 KiB
    # up to block_M 64 (128 KiB), not 128 (256 KiB)
    assert knobs.get("block_M") == (8, 16, 32, 64), (knobs, skipped)
    assert any(
        s.startswith("block_size: block_M=128 refused") and "a (line" in s and "c (line" in s
        for s in skipped
    ), skipped
    assert not any("could not resolve its extent" in s for s in skipped), skipped


# Two shape loops in one function, and a loop whose body shifts its size before the call: the
# sizes a kernel runs with are the loop around its own call, as the body leaves them.
LOOPED_KERNEL = """
import tilelang
import tilelang.language as T

SMALL = [(1024, 4096)]
BIG = [(1000, 4096), (2048, 4096)]


def make(M, N, dtype):
    block_M = 8
    block_N = 256

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, _):
            a = T.alloc_shared((block_M, block_N), dtype)
            T.copy(A[(cid // (N // block_N)) * block_M, (cid % (N // block_N)) * block_N], a)
            T.copy(a, C[(cid // (N // block_N)) * block_M, (cid % (N // block_N)) * block_N])

    return main


def check(M, N):
    print(M, N)

"""

SECOND_LOOP_BUILDS = (
    LOOPED_KERNEL
    + """
def main():
    for M, N in SMALL:
        check(M, N)
    for M, N in BIG:
        tilelang.compile(make(M, N, "float16"), target="npuir")


main()
"""
)

BODY_SHIFTS_THE_SIZE = (
    LOOPED_KERNEL
    + """
def main():
    for M, N in [(1024, 4096), (2048, 4096)]:
        M = M - 24
        tilelang.compile(make(M, N, "float16"), target="npuir")


main()
"""
)


def test_the_loop_around_the_call_gives_the_sizes_not_the_first_loop_of_that_name():
    knobs, skipped = _plan(SECOND_LOOP_BUILDS)
    # M = 1000 (= 8 * 125) and 2048: only block_M 8 divides both; SMALL's 1024 feeds check()
    assert knobs.get("block_M") == (8,), (knobs, skipped)
    assert any(
        s.startswith("block_size: block_M=16 refused") and "does not divide 1000" in s
        for s in skipped
    ), skipped


def test_a_loop_target_the_body_rebinds_is_read_as_rebound():
    knobs, skipped = _plan(BODY_SHIFTS_THE_SIZE)
    # M runs as 1000 and 2024 (= 8 * 253), never 1024 or 2048, nor 1024 - 24 applied twice
    assert knobs.get("block_M") == (8,), (knobs, skipped)
    refusal = next(s for s in skipped if s.startswith("block_size: block_M=16 refused"))
    assert "does not divide 1000" in refusal and "976" not in refusal, refusal


# tile-ai/tilelang examples/ascend/example_per_token_cast_to_fp8.py: the group tile is picked
# by the factory's own branches on the problem size.
BRANCH_PICKED = """
import tilelang
import tilelang.language as T


def cast(M, N):
    groups = N // 128
    if groups % 64 == 0:
        group_block = 64
    elif groups % 32 == 0:
        group_block = 32
    else:
        group_block = 8

    @T.prim_func
    def main(S: T.Tensor((M, groups), "float32")):
        with T.Kernel(T.ceildiv(groups, group_block), is_npu=True) as (cid, _):
            s = T.alloc_ub((M, group_block), "float32")
            T.copy(S[0, cid * group_block], s)

    return main


cast(16, 8192)
"""


def test_a_group_tile_picked_by_the_kernels_own_branches_is_listed():
    knobs, skipped = _plan(BRANCH_PICKED)
    assert "group_block" not in knobs, knobs
    why = next(s for s in skipped if s.startswith("block_size: group_block: "))
    assert "one of 3 literals (lines 8, 10, 12, cast())" in why, why


# Fanerly/tilelang-ascend tail-block suite: a ceil-divided grid whose current tile already leaves
# a partial last tile (64 columns of 69); the copies are clamped where they are lowered. Two
# tests bind their own sizes; a third kernel takes its block from a parametrize list.
KERNEL = """

def NAME(M, N, block_M, block_N, dtype="float"):
    m_num = T.ceildiv(M, block_M)
    n_num = T.ceildiv(N, block_N)

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, _):
            a_ub = T.alloc_ub((block_M, block_N), dtype)
            T.copy(A[(cid // n_num) * block_M, (cid % n_num) * block_N], a_ub)
            T.copy(a_ub, C[(cid // n_num) * block_M, (cid % n_num) * block_N])

    return main
"""
TAILS = (
    "import pytest\nimport tilelang\nimport tilelang.language as T\n"
    + "".join(KERNEL.replace("NAME", n) for n in ("sel", "wide", "other"))
    + """

def test_sel():
    M, N, block_M, block_N = 5, 69, 4, 64
    sel(M, N, block_M, block_N)


def test_wide():
    M, N, block_M, block_N = 64, 1024, 16, 128
    wide(M, N, block_M, block_N)


@pytest.mark.parametrize("block_N", [32, 64])
def test_other(block_N):
    other(64, 64, 16, block_N)
"""
)


def test_a_tile_past_the_extent_is_idle_where_a_partial_tile_already_runs():
    knobs, skipped = _plan(TAILS)
    assert knobs.get("test_sel.block_N") == (8, 16, 32, 64), (knobs, skipped)
    assert any(
        s.startswith("block_size: test_sel.block_N=128 refused") and "exceeds the extent 69" in s
        for s in skipped
    ), skipped


def test_a_factory_whose_block_comes_from_a_list_is_listed_beside_the_tests_knobs():
    knobs, skipped = _plan(TAILS)
    assert {"test_sel.block_N", "test_wide.block_N"} <= set(knobs), (knobs, skipped)
    assert any(s.startswith("block_size: other.block_N: ") for s in skipped), skipped


def test_a_remaining_extent_guards_only_its_own_lane_strictly():
    # `i <= remain_m` lets lane remain_m past the end; `j < remain_m` bounds another lane
    for guard in ("i <= remain_m", "j < remain_m"):
        src = REMAINDER.replace("if i < remain_m and j < N:", f"if {guard}:").replace(
            "if i < remain_m:", f"if {guard}:"
        )
        knobs, skipped = _plan(src)
        assert 16 not in knobs.get("BLOCK_M", ()), (guard, knobs)


# a wrapper reads the page length back from the tensor the host built with it
SHAPE_READ = """
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def paged(pages, page, D):
    @T.prim_func
    def main(Cache: T.Tensor((pages * page, D), "float16")):
        with T.Kernel(pages, is_npu=True) as (cid, _):
            p = T.alloc_shared((page, D), "float16")
            T.copy(Cache[cid * page, 0], p)

    return main


def run(cache):
    pages, page, D = cache.shape
    return paged(pages, page, D)


def test(N=4096, D=64, block_size=128):
    cache = torch.randn(N // block_size, block_size, D, dtype=torch.float16)
    return run(cache)


test()
"""


def test_a_host_tensor_handed_to_a_function_that_builds_a_kernel_is_not_called_host_only():
    _, skipped = _plan(SHAPE_READ)
    assert not any("default of the host function test()" in s for s in skipped), skipped


# tile-ai/tilelang examples/ascend/example_gemm.py: main runs the GEMM over a list of cases, one
# of them in torch's float8 spelling; every case runs, so the largest stage must fit L1.
FP8_CASES = """
import tilelang
import tilelang.language as T


def gemm(M, N, K, dtype="bfloat16"):
    TILE = 256
    NUM_STAGES = 2

    @T.prim_func
    def main(X: T.Buffer((M, K), dtype), W: T.Buffer((N, K), dtype)):
        with T.Kernel(32) as bx:
            x_l1 = T.alloc_l1((TILE, TILE), dtype)
            w_l1 = T.alloc_l1((TILE, TILE), dtype)
            for kt in T.Pipelined(K // TILE, num_stages=NUM_STAGES):
                T.copy(X[0, kt * TILE], x_l1)
                T.copy(W[0, kt * TILE], w_l1)

    return main


cases = [("fp8", "float8_e4m3fn"), ("bf16", "bfloat16")]
for label, dt in cases:
    tilelang.compile(gemm(8192, 8192, 8192, dtype=dt), target="ascend")
"""


def test_a_float8_dtype_in_torchs_spelling_keeps_its_buffers_in_the_stage_count():
    from bot.strategies import pipeline

    src = textwrap.dedent(FP8_CASES).lstrip()
    # bf16: 2 x 256 x 256 x 2 bytes = 256 KiB per stage, 512 KiB of L1 at 2 stages
    refused = pipeline.set_depth(src, 3, 0, "gemm.py")
    assert "L1 buffers" in getattr(refused, "reason", ""), refused


# tile-ai/tilelang examples/ascend/example_simdvf_scalar_topk.py: the A5 backend named by a
# parameter default (`def make_kernel(backend="asc")` ... `@tilelang.jit(target=backend)`).
A5_BACKEND_PARAM = """
import tilelang
import tilelang.language as T


def make_kernel(backend="asc"):
    n = T.dynamic("n")

    @tilelang.jit(out_idx=-1, target=backend)
    def _build():
        @T.prim_func
        def main(x: T.Tensor[(n, 128), T.float32], y: T.Tensor[(n, 128), T.float32]):
            with T.Kernel(32) as core_id:
                ub = T.alloc_shared((128,), T.float32)
                for w in T.Pipelined(T.ceildiv(n, 32), num_stages=STAGES):
                    T.copy(x[w * 32 + core_id, :], ub)
                    T.copy(ub, y[w * 32 + core_id, :])

        return main

    return _build()
"""


def test_depth_zero_is_refused_in_the_auto_scheduled_dialect_only():
    from bot.strategies import dialect, pipeline

    a5 = A5_BACKEND_PARAM.replace("STAGES", "1")
    assert dialect.auto_scheduled(a5)
    refused = pipeline.set_depth(a5, 0, 0, "topk.py")
    assert isinstance(refused, Refusal) and "auto-scheduled" in refused.reason, refused
    assert not isinstance(pipeline.set_depth(a5, 2, 0, "topk.py"), Refusal)
    # the same loop for a GPU-style target: 0 (no pipelining) stays a depth to try
    cuda = a5.replace('backend="asc"', 'backend="cuda"')
    assert not dialect.auto_scheduled(cuda)
    assert not isinstance(pipeline.set_depth(cuda, 0, 0, "topk.py"), Refusal)


# tile-ai/tilelang-ascend unittest/npuir/test_sync_wait.py: every core only waits on a flag
# picked from its index; the kernel's tensors are never read.
IDLE_GRID = """
import tilelang
import tilelang.language as T


def barrier(M, N, dtype="float16"):
    BLOCK_SIZE = 20

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(BLOCK_SIZE, is_npu=True) as (cid, _):
            flag_id = cid % 2 + 5
            with T.rs("PIPE_MTE2"):
                T.sync_block_wait(flag_id)

    return main


func = barrier(512, 512)
"""


def test_a_grid_whose_body_touches_no_tensor_is_not_tuned():
    knobs, skipped = _plan(IDLE_GRID)
    assert "BLOCK_SIZE" not in knobs, knobs
    assert any(
        s.startswith("block_size: BLOCK_SIZE:") and "reads none of the kernel's tensors (A, C)" in s
        for s in skipped
    ), skipped
    # the same grid splitting the rows among its cores is a knob
    working = IDLE_GRID.replace(
        '            with T.rs("PIPE_MTE2"):\n                T.sync_block_wait(flag_id)\n',
        "            ub = T.alloc_ub((1, N), dtype)\n"
        "            T.copy(A[cid, 0], ub)\n"
        "            T.copy(ub, C[cid, 0])\n",
    )
    assert "BLOCK_SIZE" in _plan(working)[0]


# tile-ai/tilelang-ascend testing/npuir/shape_manipulation_ops/test_copy_simple_dev.py: one
# test passes its blocks as literals of the call, another binds locals of the same names.
CALL_LITERAL_AND_LOCAL = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def copy_2d(M, N, block_M, block_N, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N) * T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            by = cid // T.ceildiv(N, block_N)
            bx = cid % T.ceildiv(N, block_N)
            a = T.alloc_ub((block_M, block_N), dtype)
            T.copy(A[by * block_M, bx * block_N], a)
            T.copy(a, B[by * block_M, bx * block_N])

    return main


@tilelang.jit(target="npuir")
def copy_3d(M, N, K, block_M, block_N, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, N, K), dtype), B: T.Tensor((M, N, K), dtype)):
        with T.Kernel(T.ceildiv(M, block_M) * T.ceildiv(N, block_N), is_npu=True) as (cid, _):
            bm = cid // T.ceildiv(N, block_N)
            bn = cid % T.ceildiv(N, block_N)
            a = T.alloc_ub((block_M, block_N, K), dtype)
            T.copy(A[bm * block_M, bn * block_N, 0], a)
            T.copy(a, B[bm * block_M, bn * block_N, 0])

    return main


def test_copy_2d():
    kernel = copy_2d(1024, 1024, 128, 128)


def test_copy_3d():
    M, N, K = 64, 128, 32
    block_M, block_N = 16, 32
    kernel = copy_3d(M, N, K, block_M, block_N)
"""


def test_a_literal_of_the_one_call_building_a_factory_is_that_factorys_knob():
    knobs, skipped = _plan(CALL_LITERAL_AND_LOCAL)
    assert {"copy_2d.block_M", "copy_2d.block_N", "test_copy_3d.block_M"} <= set(knobs), (
        knobs,
        skipped,
    )
    assert 2048 not in knobs["copy_2d.block_M"] and 128 in knobs["copy_2d.block_M"]
    assert max(knobs["test_copy_3d.block_M"]) <= 64  # divides M = 64
    assert not any("bound at 2 different places" in s for s in skipped), skipped


# A test's own local feeding two kernels, one of which other tests build with other literals.
LOCAL_FEEDS_TWO = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def fill(M, N, block_M, block_N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, block_N), "float32")
            T.copy(A[(cid // (N // block_N)) * block_M, (cid % (N // block_N)) * block_N], a)
            T.copy(a, B[(cid // (N // block_N)) * block_M, (cid % (N // block_N)) * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def narrow(M, N, block_M, block_N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, _):
            a = T.alloc_ub((block_M, block_N), "float32")
            T.copy(A[(cid // (N // block_N)) * block_M, (cid % (N // block_N)) * block_N], a)
            T.copy(a, B[(cid // (N // block_N)) * block_M, (cid % (N // block_N)) * block_N])

    return main


def test_fill():
    M, N, block_M, block_N = 1024, 1024, 128, 128
    fill(M, N, block_M, block_N)
    narrow(M, 64, block_M, 64)


def test_fill_narrow():
    M, N, block_M, block_N = 1000, 64, 8, 64
    narrow(M, N, block_M, block_N)
"""


def test_a_local_that_also_feeds_a_kernel_bound_otherwise_elsewhere_is_not_tuned():
    knobs, skipped = _plan(LOCAL_FEEDS_TWO)
    # test_fill's block_M builds fill and narrow; narrow also runs with M = 1000 elsewhere
    assert not any(k.endswith("block_M") for k in knobs), knobs
    assert any(
        s.startswith("block_size: fill.block_M:") and "also reaches narrow()" in s for s in skipped
    ), skipped
    assert "fill.block_N" in knobs  # fed to fill alone


def test_a_grid_reading_its_tensors_through_a_reshaped_view_is_still_tuned():
    # tas_per_token_fp8_simt_simd's `x_groups = T.Tensor(..., X.data)`: a view of a parameter
    viewed = IDLE_GRID.replace(
        "        with T.Kernel(BLOCK_SIZE, is_npu=True) as (cid, _):\n",
        "        rows = T.Tensor((M * N // 128, 128), dtype, A.data)\n"
        "        out = T.Tensor((M * N // 128, 128), dtype, C.data)\n"
        "        with T.Kernel(BLOCK_SIZE, is_npu=True) as (cid, _):\n",
    ).replace(
        '            with T.rs("PIPE_MTE2"):\n                T.sync_block_wait(flag_id)\n',
        "            ub = T.alloc_ub((1, 128), dtype)\n"
        "            T.copy(rows[cid, 0], ub)\n"
        "            T.copy(ub, out[cid, 0])\n",
    )
    assert "T.copy(rows[cid, 0], ub)" in viewed
    assert "BLOCK_SIZE" in _plan(viewed)[0]


def test_a_rebinding_after_the_call_leaves_the_entries_the_call_saw():
    after = SECOND_LOOP_BUILDS.replace(
        '        tilelang.compile(make(M, N, "float16"), target="npuir")\n',
        '        tilelang.compile(make(M, N, "float16"), target="npuir")\n        M = M * 2\n',
    )
    assert "M = M * 2" in after
    knobs, skipped = _plan(after)
    assert knobs.get("block_M") == (8,), (knobs, skipped)
    assert any("block_M=16 refused" in s and "does not divide 1000" in s for s in skipped), skipped


def test_the_backend_a_target_name_reads_is_its_own_functions_or_an_assigned_one():
    from bot.strategies import dialect

    cuda = A5_BACKEND_PARAM.replace('backend="asc"', 'backend="cuda"')
    # another function's parameter of the same name says nothing about this one's
    assert not dialect.auto_scheduled(cuda + '\n\ndef sort_rows(x, backend="asc"):\n    return x\n')
    # a module constant passed as the target
    constant = cuda.replace(
        'def make_kernel(backend="cuda"):', 'BACKEND = "asc"\n\n\ndef make_kernel():'
    )
    constant = constant.replace("target=backend", "target=BACKEND")
    assert "target=BACKEND" in constant and dialect.auto_scheduled(constant)


def test_a_local_read_from_an_attribute_of_its_own_name_is_not_a_self_reference():
    # tile-ai/tilelang-ascend testing/npuir/test_matmul_dev.py: `block_M, block_N =
    # main_args.block_M, main_args.block_N` reads the argparse option, not block_M itself
    src = (
        CALL_LITERAL_AND_LOCAL.split("def test_copy_2d", maxsplit=1)[0]
        + """
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--block_M", type=int, default=32)
parser.add_argument("--block_N", type=int, default=64)


def run(main_args):
    block_M, block_N = main_args.block_M, main_args.block_N
    copy_2d(1024, 1024, block_M, block_N)


run(parser.parse_args())
"""
    )
    knobs, skipped = _plan(src)
    assert {k.rsplit(".", 1)[-1] for k in knobs} >= {"block_M", "block_N"}, (knobs, skipped)
    assert not any("reassigned from its own earlier value" in s for s in skipped), skipped


def test_a_literal_that_reaches_another_kernel_under_another_name_is_not_tuned():
    # narrow() takes test_fill's block_M as its tile_m; narrow's own rules (UB: 1024 fp32
    # columns) are not the ones block_M is checked against
    renamed = (
        LOCAL_FEEDS_TWO.replace(
            "def narrow(M, N, block_M, block_N):", "def narrow(M, N, tile_m, tile_n):"
        )
        .replace("    narrow(M, 64, block_M, 64)\n", "    narrow(M, 1024, block_M, 1024)\n")
        .replace("    narrow(M, N, block_M, block_N)\n", "    narrow(M, N, block_M, block_N)\n")
    )
    head, tail = renamed.split("def narrow(M, N, tile_m, tile_n):")
    body, rest = tail.split("    return main", 1)
    renamed = (
        head
        + "def narrow(M, N, tile_m, tile_n):"
        + body.replace("block_M", "tile_m").replace("block_N", "tile_n")
        + "    return main"
        + rest
    )
    assert "narrow(M, 1024, block_M, 1024)" in renamed and "T.alloc_ub((tile_m, tile_n)" in renamed
    knobs, skipped = _plan(renamed)
    assert not any(k.endswith("block_M") for k in knobs), knobs
    assert any("also reaches narrow() as tile_m" in s for s in skipped), skipped


def test_the_target_is_read_wherever_the_compile_call_takes_it():
    from bot.strategies import dialect

    cuda = A5_BACKEND_PARAM.replace('backend="asc"', 'backend="cuda"')
    assert not dialect.auto_scheduled(cuda)
    positional = cuda.replace(
        "@tilelang.jit(out_idx=-1, target=backend)\n    def _build():",
        "def _build():",
    ).replace("return _build()", 'return tilelang.compile(_build(), -1, "cython", TGT)')
    assert "def _build():" in positional
    assert dialect.auto_scheduled(positional.replace("TGT", '"asc"'))
    assert not dialect.auto_scheduled(positional.replace("TGT", '"cuda"'))
    # a string at another place is not the target (execution_backend is third)
    assert not dialect.auto_scheduled(
        positional.replace('"cython", TGT', '"asc"').replace("-1, ", "")
    )
    # a dict splatted into the call, named or displayed
    splat = positional.replace('-1, "cython", TGT)', "out_idx=-1, **OPTS)")
    assert dialect.auto_scheduled('OPTS = dict(target="asc")\n' + splat)
    assert dialect.auto_scheduled(splat.replace("**OPTS", '**{"target": "pto"}'))
    assert not dialect.auto_scheduled('OPTS = dict(target="cuda")\n' + splat)
    assert not dialect.auto_scheduled('OPTS = dict(target="asc")\n' + splat.replace("**OPTS", ""))


def test_an_argparse_option_the_compile_takes_as_its_target():
    from bot.strategies import dialect

    cuda = A5_BACKEND_PARAM.replace('backend="asc"', 'backend="cuda"')
    parsed = cuda.replace("target=backend", "target=args.backend") + (
        "\n\nimport argparse\nparser = argparse.ArgumentParser()\n"
        'parser.add_argument("--backend", default=DEFAULT)\nargs = parser.parse_args()\n'
    )
    assert dialect.auto_scheduled(parsed.replace("DEFAULT", '"asc"'))
    assert not dialect.auto_scheduled(parsed.replace("DEFAULT", '"cuda"'))
    # an option of that default the compile never takes is not its target
    assert not dialect.auto_scheduled(
        parsed.replace("DEFAULT", '"asc"').replace("target=args.backend", "target=args.device")
    )
    # `dest=` names the attribute
    dest = parsed.replace("DEFAULT", '"asc", dest="device"')
    assert not dialect.auto_scheduled(dest)
    assert dialect.auto_scheduled(dest.replace("target=args.backend", "target=args.device"))


def _main(body: str) -> str:
    return LOOPED_KERNEL + "\ndef main():\n" + textwrap.indent(body, "    ") + "\n\nmain()\n"


UNRESOLVED = "could not resolve its extent"


def test_a_loop_over_zipped_lists_gives_each_pass_its_sizes():
    zipped = _main(
        "Ms = [1024, 2048]\nNs = [4096, 8192]\nfor M, N in zip(Ms, Ns):\n"
        '    tilelang.compile(make(M, N, "float16"), target="npuir")'
    )
    knobs, skipped = _plan(zipped)
    # M is 1024 and 2048: block_M may grow past the current 8 to the 256 the UB holds
    assert 256 in knobs.get("block_M", ()), (knobs, skipped)
    assert not any(UNRESOLVED in s for s in skipped), skipped
    # one of the two lists is 1000 long in its first pass: only 8 divides it
    odd = zipped.replace("Ms = [1024, 2048]", "Ms = [1000, 2048]")
    knobs, skipped = _plan(odd)
    assert knobs.get("block_M") == (8,), (knobs, skipped)
    assert any("block_M=16 refused" in s and "does not divide 1000" in s for s in skipped)
    # a list changed after it is written is no source of sizes
    appended = zipped.replace("Ns = [4096, 8192]\n", "Ns = [4096, 8192]\n    Ms.append(1000)\n")
    assert "Ms.append(1000)" in appended
    knobs, skipped = _plan(appended)
    assert any(UNRESOLVED in s for s in skipped), skipped


def test_a_copy_of_each_configuration_keeps_its_sizes_and_a_change_to_it_drops_them():
    copied = _main(
        'for cfg in [{"M": 1024, "N": 4096}, {"M": 2048, "N": 4096}]:\n'
        "    cfg = dict(cfg)\n"
        '    tilelang.compile(make(cfg["M"], cfg["N"], "float16"), target="npuir")'
    )
    knobs, skipped = _plan(copied)
    assert 256 in knobs.get("block_M", ()), (knobs, skipped)
    # the body sets M itself: the entries no longer say what the call reads
    for change in ('        cfg["M"] = 1000\n', "        cfg.update(M=1000)\n"):
        changed = copied.replace("        cfg = dict(cfg)\n", "        cfg = dict(cfg)\n" + change)
        assert change in changed
        knobs, skipped = _plan(changed)
        assert knobs.get("block_M") == (8,), (change, knobs, skipped)
        assert any("block_M=16 refused" in s and UNRESOLVED in s for s in skipped), skipped


def test_a_parameter_rebound_from_itself_takes_its_default_first():
    shifted = LOOPED_KERNEL + (
        "\ndef main(M=1024, N=4096):\n    M = M - 24\n"
        '    tilelang.compile(make(M, N, "float16"), target="npuir")\n\n\nmain()\n'
    )
    knobs, skipped = _plan(shifted)
    # M is 1000 when the kernel is built: neither the default 1024 nor unresolved
    assert knobs.get("block_M") == (8,), (knobs, skipped)
    refusal = next(s for s in skipped if s.startswith("block_size: block_M=16 refused"))
    assert "does not divide 1000" in refusal, refusal
    # inside a branch the value depends on the path: not read
    branched = shifted.replace("    M = M - 24\n", "    if N > 1:\n        M = M - 24\n")
    knobs, skipped = _plan(branched)
    assert any("block_M=16 refused" in s and "does not divide" not in s for s in skipped), skipped


# tile-ai/tilelang-ascend examples/cann-bench/resize_bilinear: the UB row tile of one block
# holds `range_h` source rows, which a host helper computes from block_H with torch.
HOST_SPAN = """
import tilelang
import tilelang.language as T
import torch


@tilelang.jit(out_idx=[-1])
def height_kernel(H, W, block_H, block_W, range_h, dtype):
    @T.prim_func
    def main(X: T.Tensor((H, W), "float32"), Y: T.Tensor((H, W), dtype)):
        with T.Kernel(T.ceildiv(H, block_H) * T.ceildiv(W, block_W), is_npu=True) as (cid, _):
            rows = T.alloc_ub((range_h, block_W), "float32")
            out = T.alloc_ub((block_H, block_W), dtype)
            T.copy(X[cid * block_H, 0], rows)
            T.copy(out, Y[cid * block_H, 0])

    return main


def spans(H, block_H):
    starts = torch.arange(0, H, block_H)
    return int((starts * 2 + block_H).max().item())


def run(H=256, W=256):
    block_H = 16
    block_W = 256
    range_h = spans(H, block_H)
    return height_kernel(H, W, block_H, block_W, range_h, "float16")


run()
"""


def test_a_buffer_a_host_call_sizes_from_the_block_stops_the_block_growing():
    knobs, skipped = _plan(HOST_SPAN)
    assert knobs.get("block_H") == (8, 16), (knobs, skipped)  # the current and one below
    refusal = next(s for s in skipped if s.startswith("block_size: block_H=32 refused"))
    assert "`rows` (line 11) is sized by `range_h`" in refusal and "spans" not in refusal
    assert "only values up to the current 16" in refusal, refusal
    # the helper takes no block: its rows count as 1, as any size the file does not fix
    fixed = HOST_SPAN.replace("range_h = spans(H, block_H)", "range_h = spans(H, 64)")
    knobs, skipped = _plan(fixed)
    assert 32 in knobs.get("block_H", ()), (knobs, skipped)
    # arithmetic on the block itself is read by the capacity rule as it is, not refused here
    direct = HOST_SPAN.replace("(range_h, block_W)", "(range_h + block_H, block_W)")
    direct = direct.replace("range_h = spans(H, block_H)", "range_h = spans(H, 64)")
    knobs, skipped = _plan(direct)
    assert 32 in knobs.get("block_H", ()), (knobs, skipped)


def test_a_parameter_rebound_after_the_kernel_is_built_is_not_what_it_was_built_with():
    after = LOOPED_KERNEL + (
        "\ndef main(M=1000, N=4096):\n"
        '    tilelang.compile(make(M, N, "float16"), target="npuir")\n'
        "    M = M + 24\n    check(M, N)\n\n\nmain()\n"
    )
    knobs, skipped = _plan(after)
    # built with M = 1000: 1024 is what the print sees
    assert knobs.get("block_M") == (8,), (knobs, skipped)


def test_a_zipped_dtype_sizes_the_buffers_it_runs_with():
    zipped = _main(
        "Ms = [1024, 2048]\nNs = [4096, 8192]\nDs = ['float32', 'float32']\n"
        "for M, N, D in zip(Ms, Ns, Ds):\n"
        '    tilelang.compile(make(M, N, D), target="npuir")'
    )
    knobs, skipped = _plan(zipped)
    # (block_M, 256) float32 in UB: 128 rows take 128 KiB, 256 would take 256 KiB
    assert max(knobs.get("block_M", ())) == 128, (knobs, skipped)
    assert any("block_M=256 refused" in s and "UB" in s for s in skipped), skipped


def test_a_changed_entry_drops_its_sizes_only_where_the_call_reads_the_change():
    base = _main(
        'for cfg in [{"M": 1024, "N": 4096}, {"M": 2048, "N": 4096}]:\n'
        "    CHANGE\n"
        '    tilelang.compile(make(cfg["M"], cfg["N"], "float16"), target="npuir")'
    )
    kept = ('cfg["dtype"] = "float16"', "print(cfg)", "n = cfg.get('N')")
    dropped = ("c = cfg\n        c['M'] = 1000", "tweak(cfg)", 'del cfg["M"]', "cfg.pop('M')")
    for change in kept:
        knobs, skipped = _plan(base.replace("CHANGE", change))
        assert 256 in knobs.get("block_M", ()), (change, knobs, skipped)
    for change in dropped:
        knobs, skipped = _plan(base.replace("CHANGE", change))
        assert knobs.get("block_M") == (8,), (change, knobs, skipped)
    # a change after the call is seen by no call of that pass
    after = base.replace("        CHANGE\n", "").replace(
        '"float16"), target="npuir")', '"float16"), target="npuir")\n        cfg["M"] = 1000'
    )
    assert 'cfg["M"] = 1000' in after
    assert 256 in _plan(after)[0].get("block_M", ())


def test_a_size_the_caller_computes_from_the_block_grows_with_it():
    # `range_h = block_H * 4` in the caller: at block_H 64 the rows tile is 256 x 256 fp32
    plain = HOST_SPAN.replace("range_h = spans(H, block_H)", "range_h = block_H * 4")
    knobs, skipped = _plan(plain)
    assert knobs.get("block_H") == (8, 16, 32), (knobs, skipped)
    refusal = next(s for s in skipped if s.startswith("block_size: block_H=64 refused"))
    assert "UB buffers as allocated" in refusal and "294912 bytes" in refusal, refusal
    # pure arithmetic through math / numpy or a helper of the file that calls nothing else is
    # no opaque call: the capacity rule reads it (here it keeps growth open)
    for spelled in ("math.ceil(H / 64)", "int(np.ceil(H / 64))", "align(H, 64)"):
        pure = HOST_SPAN.replace("range_h = spans(H, block_H)", f"range_h = {spelled}")
        pure = pure.replace(
            "import torch\n",
            "import math\nimport numpy as np\nimport torch\n\n\n"
            "def align(x, a):\n    r = (x + a - 1) // a\n    return r\n",
        )
        knobs, skipped = _plan(pure)
        assert 32 in knobs.get("block_H", ()), (spelled, knobs, skipped)


def test_only_tilelangs_own_calls_take_the_target_by_place_or_splat():
    from bot.strategies import dialect

    cuda = A5_BACKEND_PARAM.replace('backend="asc"', 'backend="cuda"')
    for call in ('re.compile(p, 0, 1, "asc")', 'torch.compile(m, **{"target": "asc"})'):
        assert not dialect.auto_scheduled(cuda + f"\n\ndef other(p, m):\n    return {call}\n")
    aliased = cuda.replace("import tilelang\n", "import tilelang as tl\n").replace(
        "return _build()", 'return tl.compile(_build, -1, "cython", "asc")'
    )
    assert dialect.auto_scheduled(aliased)
    # the option must be read from what parse_args returns
    other = cuda.replace("target=backend", "target=cfg.backend") + (
        "\n\nimport argparse\nparser = argparse.ArgumentParser()\n"
        'parser.add_argument("--backend", default="asc")\nargs = parser.parse_args()\n'
    )
    assert not dialect.auto_scheduled(other)
    assert dialect.auto_scheduled(other.replace("target=cfg.backend", "target=args.backend"))


# tnu_mla_decode / tav_resize_bilinear_gemm_height: a block bound to `min(LIT, size)` on the host
CLAMPED = """
import tilelang
import tilelang.language as T


def kernel(M, W, block_M, block_W):
    @T.prim_func
    def main(A: T.Tensor((M, W), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M, block_W), "float16")
            for w in T.serial(T.ceildiv(W, block_W)):
                T.copy(A[cid * block_M, w * block_W], buf)

    return main


def run(M, W, heads):
    block_M = min(LIT, OTHER)
    block_W = 128
    return kernel(M, W, block_M, block_W)


if __name__ == "__main__":
    run(4096, 512, HEADS)
"""


def _clamped(lit: int, other: str, heads: int) -> tuple[dict[str, tuple], list[str]]:
    src = CLAMPED.replace("LIT", str(lit)).replace("OTHER", other)
    return _plan(src.replace("HEADS", str(heads)))


def test_a_literal_inside_min_is_the_knob_where_it_is_the_value_that_runs():
    knobs, skipped = _clamped(32, "heads", 128)  # min(32, 128) runs as 32
    assert "block_M" in knobs, skipped
    assert 16 in knobs["block_M"] and 64 in knobs["block_M"] and 128 in knobs["block_M"]
    # past the other side the literal runs as 128, not as the value tried: refused
    assert 256 not in knobs["block_M"]
    assert any("block_M=256" in s and "`heads` = 128" in s and "runs as 128" in s for s in skipped)
    knobs, skipped = _clamped(128, "heads", 128)  # a tie: any larger literal runs as now
    assert 64 in knobs["block_M"] and 256 not in knobs["block_M"]
    assert any("block_M=256" in s and "no change" in s for s in skipped), skipped


def test_a_literal_inside_min_that_the_other_side_undercuts_is_not_tuned():
    knobs, skipped = _clamped(64, "heads", 16)  # min(64, 16) runs as 16: the literal is idle
    assert "block_M" not in knobs
    assert any("block_M" in s and "below the literal 64" in s for s in skipped), skipped
    knobs, skipped = _clamped(64, "unknown_size()", 128)
    assert "block_M" not in knobs
    assert any("block_M" in s and "not known" in s for s in skipped), skipped


def test_a_rounding_inside_min_is_no_host_padding_of_the_extent():
    # `min(256, ((W + 15) // 16) * 16)` rounds the tile; it does not pad W to 16
    src = CLAMPED.replace("LIT", "16").replace("OTHER", "heads")
    src = src.replace("block_W = 128", "block_W = min(256, ((W + 15) // 16) * 16)")
    knobs, skipped = _plan(src.replace("HEADS", "16"))
    assert 64 in knobs["block_W"] and 256 in knobs["block_W"] and 512 in knobs["block_W"], skipped
    assert not any("pads" in s for s in skipped), [s for s in skipped if "pads" in s]
    assert any("block_W=1024" in s for s in skipped), skipped


PADDED_ROWS = """
import tilelang
import tilelang.language as T


@tilelang.jit
def rows(hidden):
    block_m = 16
    num_tokens = T.symbolic("num_tokens")

    @T.prim_func
    def main(X: T.Tensor((num_tokens, hidden), "float16")):
        with T.Kernel(T.ceildiv(num_tokens, block_m), is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_m, hidden), "float16")
            T.copy(X[cid * block_m : (cid + 1) * block_m, :], buf)

    return main


def run(x):
    num_tokens, hidden = x.shape
    x = pad_rows(x, PAD)
    return rows(hidden)(x)
"""


def test_a_rounding_inside_max_still_pads_the_extent():
    for pad in ("((num_tokens + 15) // 16) * 16", "max(16, ((num_tokens + 15) // 16) * 16)"):
        knobs, skipped = _plan(PADDED_ROWS.replace("PAD", pad))
        assert 32 not in knobs["block_m"], pad
        assert any("block_m=32" in s and "pads `num_tokens`" in s for s in skipped), skipped


def test_a_value_past_the_min_that_would_run_as_another_value_says_so():
    knobs, skipped = _clamped(64, "heads", 96)  # min(64, 96): 128 would run as 96
    assert 128 not in knobs["block_M"]
    why = next(s for s in skipped if "block_M=128" in s)
    assert "runs as 96, not as 128" in why and "no change" not in why


def _edit(src: str, name: str, value: int) -> str:
    v = knobs.set_knob(textwrap.dedent(src).lstrip(), Knob(name, "block_size", (value,)), value)
    assert isinstance(v, Variant), v
    return v.source


def test_a_conditional_binding_is_the_knob_at_the_arm_the_run_takes():
    # tay_conv2d_im2col_fused_nchw `BLOCK_M = 64 if Cout <= 64 else 128`, Cout 16 in its run
    src = CLAMPED.replace("min(LIT, OTHER)", "32 if heads >= 64 else 16")
    knobs, skipped = _plan(src.replace("HEADS", "128"))
    assert "block_M" in knobs and 64 in knobs["block_M"], skipped
    edited = _edit(src.replace("HEADS", "128"), "block_M", 64)
    assert "64 if heads >= 64 else 16" in edited  # the arm taken, not the other one
    knobs, skipped = _plan(src.replace("HEADS", "8"))
    edited = _edit(src.replace("HEADS", "8"), "block_M", 8)
    assert "32 if heads >= 64 else 8" in edited
    undecided = src.replace("heads >= 64", "unknown_size() >= 64")
    knobs, skipped = _plan(undecided.replace("HEADS", "128"))
    assert "block_M" not in knobs
    assert any("block_M" in s and "do not decide" in s for s in skipped), skipped


# tay_ssd_chunk_scan_fwd_persistent: a causal band of `lt + 1` column tiles per row tile, and a
# block clamped to the extent inside the factory
BAND = """
import tilelang
import tilelang.language as T


def scan(Q, N, block_l, block_s, block_n):
    bl, bs, bn = block_l, block_s, block_n
    bn = min(bn, N)
    L_tiles = (Q + bl - 1) // bl

    @T.prim_func
    def main(CB: T.Tensor((Q, Q), "float16"), X: T.Tensor((Q, N), "float16")):
        with T.Kernel(L_tiles, is_npu=True) as (lt, _):
            acc = T.alloc_ub((bl, bs), "float16")
            xs = T.alloc_ub((bl, bn), "float16")
            T.copy(X[lt * bl, 0], xs)
            for s_blk in T.serial(lt + 1):
                s0 = s_blk * bs
                T.copy(CB[lt * bl, s0], acc)

    return main


if __name__ == "__main__":
    scan(256, NSIZE, 64, SBLOCK, 64)
"""


def test_a_causal_band_ties_its_two_blocks_while_they_are_equal():
    knobs, skipped = _plan(BAND.replace("NSIZE", "64").replace("SBLOCK", "64"))
    assert knobs["block_l"] == (64,) and knobs["block_s"] == (64,), knobs
    assert any("block_s=32" in s and "band loop" in s and "bs == bl" in s for s in skipped)
    # blocks the file already runs unequal: the band is some other scheme, nothing is tied
    knobs, skipped = _plan(BAND.replace("NSIZE", "64").replace("SBLOCK", "32"))
    assert not any("band loop" in s for s in skipped), skipped


def test_a_block_clamped_to_the_extent_in_the_factory_refuses_values_past_it():
    knobs, skipped = _plan(BAND.replace("NSIZE", "64").replace("SBLOCK", "64"))
    assert 32 in knobs["block_n"] and 128 not in knobs["block_n"], knobs
    assert any("block_n=128" in s and "`min(bn, N)`" in s for s in skipped), skipped
    knobs, skipped = _plan(BAND.replace("NSIZE", "256").replace("SBLOCK", "64"))
    assert 128 in knobs["block_n"] and 256 in knobs["block_n"], knobs


# tay_gemm_v0_ktail_suite: `block_M = block_N = 128`, one literal for both names
CHAINED = """
import tilelang
import tilelang.language as T


def test_gemm():
    M = N = 1024
    K = 256
    block_M = block_N = 64

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16")):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, _):
            A_L1 = T.alloc_L1((block_M, K), "float16")
            B_L1 = T.alloc_L1((K, block_N), "float16")
            C_L0 = T.alloc_L0C((block_M, block_N), "float")
            T.gemm_v0(A_L1, B_L1, C_L0, init=True)

    tilelang.compile(main)


if __name__ == "__main__":
    test_gemm()
"""


def test_a_chained_assignment_moves_every_name_it_binds():
    knobs, skipped = _plan(CHAINED)
    (key,) = [k for k in knobs if k.endswith("block_M") or k.endswith("block_N")]
    assert 128 in knobs[key] and 256 not in knobs[key], knobs
    # alone, block_M 256 fits L0C ((256, 64) fp32 = 64 KiB); with block_N it is 256 KiB
    assert any("=256" in s and "L0C" in s and "262144" in s for s in skipped), skipped


def test_a_conditional_arm_tied_to_the_literal_its_test_was_computed_with_is_not_a_knob():
    # taa_sparse_mla_simple: heads replicated in groups of 64, and block_H = 64 on that path
    src = CLAMPED.replace(
        "    block_M = min(LIT, OTHER)\n",
        "    if heads > 64:\n        REPLICATE_H = heads // 64\n    else:\n        REPLICATE_H = 1\n"
        "    block_M = heads if REPLICATE_H == 1 else 64\n",
    )
    knobs, skipped = _plan(src.replace("HEADS", "128"))
    assert "block_M" not in knobs, knobs
    assert any("block_M" in s and "computed" in s for s in skipped), skipped


def test_a_chained_literal_that_another_kernel_reads_is_not_tuned_alone():
    two = CHAINED.replace("    block_M = block_N = 64\n", "    block_M = block_R = 64\n")
    two = two.replace("(N // block_N)", "(N // 64)").replace("(K, block_N)", "(K, 64)")
    two = two.replace("(block_M, block_N)", "(block_M, 64)").replace(
        "    tilelang.compile(main)\n",
        "    tilelang.compile(main)\n    tilelang.compile(rows(M, N, block_R))\n",
    )
    two += (
        "\n\ndef rows(M, N, block_R):\n    @T.prim_func\n"
        '    def main(A: T.Tensor((M, N), "float16")):\n'
        "        with T.Kernel(M // block_R, is_npu=True) as (cid, _):\n"
        '            buf = T.alloc_ub((block_R, N), "float16")\n'
        "            T.copy(A[cid * block_R, 0], buf)\n\n    return main\n"
    )
    knobs, skipped = _plan(two)
    assert not any(k.endswith("block_M") for k in knobs), knobs
    assert any("block_M" in s and "also reaches rows()" in s for s in skipped), skipped
    # a chained target clamped afterwards still moves with the literal
    clamped = CHAINED.replace(
        "    block_M = block_N = 64\n",
        "    block_M = block_N = 64\n    block_N = min(block_N, N)\n",
    )
    knobs, skipped = _plan(clamped)
    assert 256 not in knobs["block_M"], knobs


def test_a_band_over_a_problem_size_or_the_second_grid_axis():
    prefix = BAND.replace("s0 = s_blk * bs", "s0 = s_blk * N")
    knobs, skipped = _plan(prefix.replace("NSIZE", "64").replace("SBLOCK", "64"))
    assert 32 in knobs["block_l"] and not any("band loop" in s for s in skipped), skipped
    grid2 = BAND.replace(
        "T.Kernel(L_tiles, is_npu=True) as (lt, _)", "T.Kernel(2, L_tiles) as (bx, lt)"
    )
    knobs, skipped = _plan(grid2.replace("NSIZE", "64").replace("SBLOCK", "64"))
    assert knobs["block_l"] == (64,) and any("band loop" in s for s in skipped), skipped


def test_a_clamp_in_one_factory_does_not_bound_the_knob_another_reads_unclamped():
    rows = (
        "def rows(N, block_n):\n    @T.prim_func\n"
        '    def main(X: T.Tensor((4096, N), "float16")):\n'
        "        with T.Kernel(T.ceildiv(4096, block_n), is_npu=True) as (bx, _):\n"
        '            buf = T.alloc_ub((block_n, N), "float16")\n'
        "            T.copy(X[bx * block_n, 0], buf)\n\n    return main\n\n\n"
        "def run(block_n):\n    scan(256, 64, 64, 64, block_n)\n    rows(64, block_n)\n\n\n"
    )
    two = BAND.replace('if __name__ == "__main__":\n    scan(256, NSIZE, 64, SBLOCK, 64)', "")
    two = two + "\n\n" + rows + 'if __name__ == "__main__":\n    run(64)\n'
    knobs, skipped = _plan(two)
    assert 128 in knobs["block_n"], knobs
    assert not any("`min(bn, N)`" in s for s in skipped), skipped


def test_a_conditional_on_a_plain_size_or_nested_is_still_the_knob():
    plain = CLAMPED.replace(
        "    block_M = min(LIT, OTHER)\n", "    K = 64\n    block_M = 64 if K <= 64 else 128\n"
    )
    knobs, skipped = _plan(plain.replace("HEADS", "128"))
    assert "block_M" in knobs, skipped
    nested = CLAMPED.replace("min(LIT, OTHER)", "16 if heads < 64 else (32 if heads < 256 else 64)")
    assert "block_M" in _plan(nested.replace("HEADS", "128"))[0]
    assert "(8 if heads < 256 else 64)" in _edit(nested.replace("HEADS", "128"), "block_M", 8)


# tile-ai/tilelang-ascend examples/cann-bench/conv2d: the host entry dispatches on the filter's
# shape, read from the tensor __main__ builds; the path the run never takes builds a kernel
# of its own with literals of its own.
DISPATCH = """
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def _gemm_pointwise_kernel(M, K, N, block_M, block_N, block_K, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M) * T.ceildiv(N, block_N), is_npu=True) as (cid, _):
            a = T.alloc_L1((block_M, block_K), dtype)
            b = T.alloc_L1((block_K, block_N), dtype)
            c = T.alloc_L0C((block_M, block_N), "float32")
            for k in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[0, k * block_K], a)
                T.copy(B[k * block_K, 0], b)
                T.gemm_v0(a, b, c)
            T.copy(c, C[0, 0])
    return main


@tilelang.jit(out_idx=[-1])
def _gemm_direct_kernel(M, K, N, block_M, block_N, block_K, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M) * T.ceildiv(N, block_N), is_npu=True) as (cid, _):
            a = T.alloc_L1((block_M, block_K), dtype)
            b = T.alloc_L1((block_K, block_N), dtype)
            c = T.alloc_L0C((block_M, block_N), "float32")
            for k in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[0, k * block_K], a)
                T.copy(B[k * block_K, 0], b)
                T.gemm_v0(a, b, c)
            T.copy(c, C[0, 0])
    return main


def _conv1x1(x, filter, Cout, C, HW):
    kern = _gemm_pointwise_kernel(Cout, C, HW, 64, 256, 256)
    return kern(filter.reshape(Cout, C), x.reshape(C, HW))


def conv_2d(x, filter, strides):
    sh, sw = int(strides[0]), int(strides[1])
    N, C, H, W = x.shape
    Cout, cin, kh, kw = filter.shape
    if kh == 1 and kw == 1:
        return _conv1x1(x, filter, Cout, C, H * W)
    BLOCK_K = 128
    k = cin * kh * kw
    kern = _gemm_direct_kernel(Cout, k, H * W, 64, 128, BLOCK_K)
    return kern(filter.reshape(Cout, k), x.reshape(k, H * W))


if __name__ == "__main__":
    N, C, H, W = 1, 16, 8, 8
    Cout, Kh, Kw = 16, KH, 3
    x = (torch.rand(N, C, H, W, dtype=torch.float32) - 0.5).to(torch.float16).npu()
    w = (torch.rand(Cout, C, Kh, Kw, dtype=torch.float32) - 0.5).to(torch.float16).npu()
    y = conv_2d(x, w, [1, 1])
"""


def _dispatch(kh: str, kw: str = "3") -> tuple[dict[str, tuple], list[str]]:
    src = DISPATCH.replace("Cout, Kh, Kw = 16, KH, 3", f"Cout, Kh, Kw = 16, {kh}, {kw}")
    return _plan(src)


def test_a_factory_only_a_branch_the_run_never_takes_calls_is_not_tuned():
    knobs, skipped = _dispatch("3")
    assert set(knobs) == {"block_M", "block_N", "block_K"}, knobs  # the direct path's, plainly
    assert 256 not in knobs["block_N"]  # 128 already covers N = 64: the direct path's rule
    pointwise = [s for s in skipped if "_gemm_pointwise_kernel.block_N" in s]
    assert pointwise and "`kh == 1 and kw == 1` (line 47) holds, and it is False" in pointwise[0]
    assert "conv_2d() calls _conv1x1() at line 48" in pointwise[0], pointwise


def test_a_factory_only_reached_past_an_early_return_the_run_takes_is_not_tuned():
    knobs, skipped = _dispatch("1", "1")
    assert set(knobs) == {"block_M", "block_N", "block_K"}, knobs  # the 1x1 path's
    assert 256 in knobs["block_N"] and 256 in knobs["block_K"]  # its own literals are the values
    direct = [s for s in skipped if "_gemm_direct_kernel.block_K" in s]
    assert (
        direct
        and "only past `kh == 1 and kw == 1` (line 47), whose branch returns or raises" in direct[0]
    )


def test_a_dispatch_the_run_cannot_decide_keeps_both_paths():
    knobs, skipped = _dispatch("int(__import__('sys').argv[1])", "int(__import__('sys').argv[2])")
    assert not any("built only through calls its run path never makes" in s for s in skipped)
    assert "_gemm_pointwise_kernel.block_N" in knobs and "_gemm_direct_kernel.block_N" in knobs


# tnu_segment_sum: the entry dispatches through a helper on sizes each of the file's runs
# passes differently; the block-reduce path needs one segment, which no run asks for.
PER_PATH = """
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def block_reduce_kernel(N, D, block_N, dtype="float"):
    @T.prim_func
    def main(Data: T.Tensor((N, D), dtype), Out: T.Tensor((N // block_N, D), dtype)):
        with T.Kernel(N // block_N, is_npu=True) as (cid, vid):
            ub = T.alloc_ub([block_N, D], dtype)
            T.copy(Data[cid * block_N, 0], ub)
            T.copy(ub[0, 0], Out[cid, 0])
    return main


@tilelang.jit(out_idx=[1])
def rows_kernel(N, D, block_M, dtype="float"):
    @T.prim_func
    def main(Data: T.Tensor((N, D), dtype), Out: T.Tensor((N, D), dtype)):
        with T.Kernel(T.ceildiv(N, block_M), is_npu=True) as (cid, vid):
            ub = T.alloc_ub([block_M, D], dtype)
            T.copy(Data[cid * block_M, 0], ub)
            T.copy(ub, Out[cid * block_M, 0])
    return main


def _use_block_reduce(N, D, num_segments):
    return num_segments == 1 and N > 65536


def _block_reduce_impl(data, N, D):
    block_N = 256
    return block_reduce_kernel(N, D, block_N)(data)


def segment_sum(data, num_segments):
    N, D = data.shape
    if _use_block_reduce(N, D, num_segments):
        return _block_reduce_impl(data, N, D)
    block_M = 64
    return rows_kernel(N, D, block_M)(data)


def _test(N, D, num_segments, dtype_str):
    dt = getattr(torch, dtype_str)
    data = torch.randn(N, D, dtype=dt)
    return segment_sum(data, num_segments)


if __name__ == "__main__":
    _test(1024, 512, SEGMENTS_A, "float16")
    _test(2048, 256, 64, "float32")
"""


def test_a_dispatch_false_on_every_call_path_rules_out_the_path():
    knobs, skipped = _plan(PER_PATH.replace("SEGMENTS_A", "256"))
    assert set(knobs) == {"block_M"}, knobs
    reason = [s for s in skipped if s.startswith("block_size: block_N:")]
    assert reason and "`_use_block_reduce(N, D, num_segments)` (line 39) holds" in reason[0]


def test_a_dispatch_the_call_paths_disagree_on_decides_nothing():
    # one run asks for one segment over 131072 rows: the block-reduce path runs there
    src = PER_PATH.replace("SEGMENTS_A", "1").replace("_test(1024, 512", "_test(131072, 512")
    knobs, skipped = _plan(src)
    assert {"block_M", "block_N"} <= set(knobs), (knobs, skipped)


def test_getattr_on_an_imported_module_does_not_hide_which_factories_run():
    # `getattr(torch, dtype_str)` reads torch's attributes, never the file's own factories;
    # `getattr(obj, name)` on anything else may reach them, and then nothing is ruled out
    src = PER_PATH.replace("SEGMENTS_A", "256")
    _, skipped = _plan(src)
    assert any(s.startswith("block_size: block_N:") and "never makes" in s for s in skipped)
    opaque = src.replace("getattr(torch, dtype_str)", "getattr(data_module(), dtype_str)")
    knobs, skipped = _plan(opaque)
    assert not any("never makes" in s for s in skipped), skipped
    assert {"block_M", "block_N"} <= set(knobs), knobs
    # a lookup of one named attribute reaches that attribute only
    named = src.replace(
        "    dt = getattr(torch, dtype_str)",
        '    globals()["_stream"] = None\n    dt = getattr(data, "dtype", None)',
    )
    _, skipped = _plan(named)
    assert any(s.startswith("block_size: block_N:") and "never makes" in s for s in skipped)
    reaching = named.replace('getattr(data, "dtype", None)', 'getattr(mod, "block_reduce_kernel")')
    _, skipped = _plan(reaching)
    assert not any("never makes" in s for s in skipped), skipped
    # `eval("torch." + dtype_str)` names a torch attribute; `eval(name)` could name anything
    evaluated = src.replace("getattr(torch, dtype_str)", 'eval("torch." + dtype_str)')
    _, skipped = _plan(evaluated)
    assert any(s.startswith("block_size: block_N:") and "never makes" in s for s in skipped)
    _, skipped = _plan(src.replace("getattr(torch, dtype_str)", "eval(dtype_str)"))
    assert not any("never makes" in s for s in skipped), skipped


def _kept_both(src: str) -> None:
    knobs, skipped = _plan(src)
    assert not any("never makes" in s for s in skipped), skipped
    assert {"block_M", "block_N"} <= set(knobs), knobs


def test_a_dispatch_is_not_decided_when_its_function_is_also_passed_on():
    # `bench(_test, ...)` may call it with any sizes: nothing rules the block-reduce path out
    src = PER_PATH.replace("SEGMENTS_A", "256").replace(
        '    _test(2048, 256, 64, "float32")',
        '    _test(2048, 256, 64, "float32")\n    bench(_test, 131072, 4, 1, "float32")',
    )
    _kept_both(src + "\n\ndef bench(fn, *args):\n    return fn(*args)\n")


def test_a_dispatch_is_not_decided_through_a_loop_that_rebinds_a_module_name():
    # `s = 64` then `for s in (64, 1):` runs the entry with one segment on the second pass
    src = PER_PATH.replace("SEGMENTS_A", "256").replace(
        '    _test(2048, 256, 64, "float32")',
        '    s = 64\n    for s in (64, 1):\n        _test(131072, 4, s, "float32")',
    )
    _kept_both(src)


def test_a_dispatch_in_a_harness_entry_is_not_decided_from_main():
    # a harness calls `kernel(*get_inputs())` with its own arguments, not __main__'s
    _kept_both(PER_PATH.replace("SEGMENTS_A", "256").replace("segment_sum", "kernel"))


# heldout_bc tbc_cumsum_kda_chunk: padding helpers take the block as a plain parameter and
# build no kernel; a runner that does reach a factory keeps its parameter for the binding rules
PAD_HELPERS = """
import torch
import tilelang
import tilelang.language as T


def cumsum(T_len, block_T=64):
    @T.prim_func
    def main(X: T.Tensor((T_len,), "float32")):
        with T.Kernel(T_len // block_T, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_T,), "float32")
            T.copy(X[cid * block_T], buf)

    return main


def _pad_head_first(s: torch.Tensor, block_t: int):
    t = s.shape[-1]
    padded = ((t + block_t - 1) // block_t) * block_t
    return torch.nn.functional.pad(s, (0, padded - t)), padded


def run(x, block_n):
    return cumsum(x.shape[-1], block_n)(x)


if __name__ == "__main__":
    run(torch.randn(256), 64)
"""


def test_a_block_parameter_of_a_host_helper_that_builds_no_kernel_is_listed():
    knobs, skipped = _plan(PAD_HELPERS)
    why = next((s for s in skipped if s.startswith("block_size: block_t: ")), None)
    assert why is not None, skipped
    assert "parameter of the host function _pad_head_first() (line 16, no default" in why, why
    assert "reaches no kernel factory" in why, why
    # run() hands its parameter to the factory: not listed as host-only, tuned where it is set
    assert not any(s.startswith("block_size: block_n: ") and "host function" in s for s in skipped)
    assert knobs.get("block_n") or knobs.get("block_T"), (knobs, skipped)
