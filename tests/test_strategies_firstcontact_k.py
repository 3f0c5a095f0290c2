"""heldout_k first-contact failures, each on a small kernel written for the test."""

from __future__ import annotations

from bot.strategies import inventory, pipeline
from bot.strategies.base import Refusal, Variant

LEGACY_BESIDE_LIVE = """
import tilelang
import tilelang.language as T


@tilelang.jit
def legacy(n, block_M=64, block_sqr=512):
    @T.prim_func
    def main(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(n // block_M) as bx:
            buf = T.alloc_shared((block_sqr,), "float16")
            T.copy(X[bx * block_M], buf)
            T.copy(buf, Y[bx * block_M])

    return main


@tilelang.jit
def fused(n, block_M=64):
    @T.prim_func
    def main(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(n // block_M) as bx:
            buf = T.alloc_shared((block_M,), "float16")
            T.copy(X[bx * block_M], buf)
            T.copy(buf, Y[bx * block_M])

    return main


def run(x):
    return fused(x.shape[0])(x)


if __name__ == "__main__":
    run(make_input(4096))
"""


def test_a_factory_nothing_calls_beside_a_run_path_is_never_built():
    inv = inventory.inventory(LEGACY_BESIDE_LIVE)
    # the legacy factory's own name is dropped: the run never builds it
    (why,) = [d.reason for d in inv.dropped if d.name == "block_sqr"]
    assert "legacy()" in why and "never builds" in why
    # the live factory's same-named parameter is bound at its own default alone
    (knob,) = inv.knobs
    assert knob.name == "block_M" and knob.site.line == 19 and knob.value == 64


def test_a_library_module_without_a_run_path_keeps_every_factory():
    src = LEGACY_BESIDE_LIVE.split('if __name__ == "__main__":', maxsplit=1)[0]
    names = {k.name for k in inventory.inventory(src).knobs}
    assert "block_sqr" in names


def test_a_run_path_that_builds_no_factory_by_name_rules_none_out():
    # a main block that only prints, or reaches functions through strings, builds nothing by
    # name: it cannot tell which factory is live
    for main in ('print("use as a library")', "fire.Fire()", 'globals()["legacy"](4096)'):
        src = LEGACY_BESIDE_LIVE.replace("run(make_input(4096))", main)
        names = {k.name for k in inventory.inventory(src).knobs}
        assert "block_sqr" in names, main
        assert not any("never builds" in d.reason for d in inventory.inventory(src).dropped)


def test_a_factory_the_run_path_calls_is_built():
    src = LEGACY_BESIDE_LIVE.replace("run(make_input(4096))", "legacy(4096)")
    names = {k.name for k in inventory.inventory(src).knobs}
    assert "block_sqr" in names


WRAPPER_ASSERTS = """
import tilelang
import tilelang.language as T

ALIGN = 16


@tilelang.jit
def decode(n, block_N):
    @T.prim_func
    def main(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(n // block_N) as bx:
            buf = T.alloc_shared((block_N,), "float16")
            T.copy(X[bx * block_N], buf)
            T.copy(buf, Y[bx * block_N])

    return main


def run_decode(x, block_N):
    assert block_N % ALIGN == 0, "fractal granularity"
    return decode(x.shape[0], block_N)(x)


if __name__ == "__main__":
    run_decode(make_input(4096), block_N=64)
"""


def test_an_assert_of_the_wrapper_that_hands_the_block_on_is_the_kernels_rule():
    (knob,) = inventory.inventory(WRAPPER_ASSERTS).knobs
    assert knob.name == "block_N" and knob.value == 64
    ok, refused = knob.legal((8, 16, 32, 128))
    assert ok == (16, 32) and [v for v, _ in refused] == [8, 128]
    assert "block_N % ALIGN == 0" in refused[0][1]


PINNED_VERSIONS = """
import tilelang.language as T


def staged():
    @T.prim_func
    def main(src: T.Tensor((8, 256), "float32"), dst: T.Tensor((8, 256), "float32")):
        with T.Kernel(1):
            ub = T.alloc_shared((256,), "float32")
            T.annotate_buffer_versions({ub: 2})
            for step in T.Pipelined(8, num_stages=2):
                T.copy(src[step, :], ub)
                T.copy(ub, dst[step, :])

    return main
"""


def test_a_depth_above_the_pinned_versions_of_a_written_buffer_is_refused():
    deeper = pipeline.set_depth(PINNED_VERSIONS, 3, 0, "k.py")
    assert isinstance(deeper, Refusal) and "pins 2 version(s)" in deeper.reason
    assert isinstance(pipeline.set_depth(PINNED_VERSIONS, 1, 0, "k.py"), Variant)
    free = PINNED_VERSIONS.replace("            T.annotate_buffer_versions({ub: 2})\n", "")
    assert isinstance(pipeline.set_depth(free, 3, 0, "k.py"), Variant)


GROUPS_BY_LOCAL = """
import tilelang
import tilelang.language as T


@tilelang.jit
def scaled(M, K, group_size=128, block_k=128):
    k_groups = T.ceildiv(K, group_size)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), S: T.Tensor((M, k_groups), "float32")):
        with T.Kernel(M) as bx:
            a = T.alloc_shared((block_k,), "float16")
            for k in T.Pipelined(T.ceildiv(K, block_k), num_stages=2):
                T.copy(A[bx, k * block_k], a)
                a[0] = a[0] * S[bx, k]

    return main


if __name__ == "__main__":
    scaled(128, 512)
"""


def test_a_k_tile_index_picking_a_group_scale_ties_the_block_to_the_group_through_a_local():
    (knob,) = [k for k in inventory.inventory(GROUPS_BY_LOCAL).knobs if k.name == "block_k"]
    ok, refused = knob.legal((64, 128, 256))
    assert ok == (128,) and [v for v, _ in refused] == [64, 256]


HOST_PADS = """
import tilelang
import tilelang.language as T


@tilelang.jit
def rows(hidden):
    block_m = 16
    num_tokens = T.symbolic("num_tokens")

    @T.prim_func
    def main(X: T.Tensor((num_tokens, hidden), "float16"), Y: T.Tensor((num_tokens, hidden), "float16")):
        with T.Kernel(T.ceildiv(num_tokens, block_m)) as bx:
            buf = T.alloc_ub((block_m, hidden), "float16")
            T.copy(X[bx * block_m : (bx + 1) * block_m, :], buf)
            T.copy(buf, Y[bx * block_m : (bx + 1) * block_m, :])

    return main


def run(x):
    num_tokens, hidden = x.shape
    if num_tokens % 16 != 0:
        x = pad_rows(x, ((num_tokens + 15) // 16) * 16)
    return rows(hidden)(x)
"""


def test_a_block_over_an_extent_the_host_pads_to_a_granule_must_divide_the_granule():
    (knob,) = inventory.inventory(HOST_PADS).knobs
    ok, refused = knob.legal((8, 16, 32, 64))
    assert ok == (8, 16) and [v for v, _ in refused] == [32, 64]
    assert "pads `num_tokens` only to a multiple of 16" in refused[0][1]


PADDED_BY_HOST = """
import tilelang
import tilelang.language as T

_cache = {}


@tilelang.jit
def proj(rows, D, block_N_pad=32, block_K=64):
    @T.prim_func
    def main(W: T.Tensor([block_N_pad, D], "float16"), Y: T.Tensor([block_N_pad, D], "float16")):
        with T.Kernel(T.ceildiv(D, block_K) * (rows // block_N_pad)) as bx:
            r = bx % (rows // block_N_pad)
            w = T.alloc_shared((block_N_pad, block_K), "float16")
            T.copy(W[r * block_N_pad, bx * block_K], w)
            T.copy(w, Y[r * block_N_pad, bx * block_K])

    return main


def run(w, D):
    if D in _cache:
        w_pad = _cache[D]
    else:
        w_pad = torch.zeros(32, D, dtype=torch.float16)
        _cache[D] = w_pad
    kernel = proj(32, D)
    return kernel(w_pad)


if __name__ == "__main__":
    run(make_weight(), 1024)
"""


def test_a_block_that_sizes_a_tensor_the_host_allocates_at_a_literal_keeps_that_size():
    (knob,) = [k for k in inventory.inventory(PADDED_BY_HOST).knobs if k.name == "block_N_pad"]
    ok, refused = knob.legal((16, 32, 64))
    assert ok == (32,) and [v for v, _ in refused] == [16, 64]
    assert "read only part of the tensor" in refused[0][1]
