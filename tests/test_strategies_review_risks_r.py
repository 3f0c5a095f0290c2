"""Review risks of bot/strategies/ left by an independent review, each on a self-written kernel:
a None fill's literal is the knob when the run leaves the parameter None (rebinding.py); a
string switch reads the value the call passes, not only the default (strings.py); an imported
helper that is handed the file's own factory is not that factory (imported.py); only a comment
about multi-buffering keeps the flag off (multibuffer.py); gemm operands resolve by scope and
positional transposes count (capacity.py `Scoped`, fractal.py, crossed.py)."""

from __future__ import annotations

from pathlib import Path

from test_strategies_firstcontact_m import FLAG_OFF_WITH_REASON
from test_strategies_fractal import GEMM, _knob
from test_strategies_rebinding import BS, factory

from bot.config.schema import Knob, OpConfig
from bot.strategies import imported, inventory, knobs, multibuffer
from bot.strategies.base import Refusal, Variant
from bot.strategies.facts import facts
from bot.strategies.planner import Planner
from bot.strategies.source import changed_lines


def bs(name: str) -> Knob:
    return Knob(name, "block_size", BS)


def _op() -> OpConfig:
    return OpConfig(project="u", name="op", dir=Path("examples/u/op"), kernel_kind="mix")


# 1. `if block_M is None: block_M = 64` with None passed (or the None default left alone)


def test_a_none_fill_is_the_knob_when_the_run_leaves_the_parameter_none():
    fill = "if block_M is None:\n    block_M = 64"
    for call in ("rows(1024)", "rows(1024, None)", "rows(1024, block_M=None)"):
        text = factory(fill, "M, block_M=None") + f"kernel = {call}\n"
        assert knobs.discover(text) == ["block_M"], call
        v = knobs.set_knob(text, bs("block_M"), 128)
        assert isinstance(v, Variant), (call, v)
        assert changed_lines(text, v.source) == [("        block_M = 64", "        block_M = 128")]


def test_a_none_fill_by_an_expression_is_dropped_naming_the_fill():
    text = factory("if block_M is None:\n    block_M = M // 8", "M, block_M=None")
    text += "kernel = rows(1024)\n"
    assert "block_M" not in knobs.discover(text)
    why = {d.name: d.reason for d in knobs.dropped(text)}["block_M"]
    assert "line 7" in why and "None" in why, why
    assert "set by an expression at line 5" not in why, why


def test_a_none_fill_beside_a_call_passing_a_number_is_two_literals():
    text = factory("if block_M is None:\n    block_M = 64", "M, block_M=None")
    text += "a = rows(1024)\nb = rows(2048, 32)\n"
    why = {d.name: d.reason for d in knobs.dropped(text)}["block_M"]
    assert "each to a literal of its own" in why and "None" not in why, why


# 2. a dtype switch decided by the value the run's call passes, not the parameter's default

SWITCHED = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def rows(M, N, block_M, dtype="float16"):
    is_fp32 = dtype == "float32"
    buf_dtype = "float32" if is_fp32 else "float16"

    @T.prim_func
    def main(A: T.Tensor((M, N), buf_dtype)):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M, N), buf_dtype)
            T.copy(A[cid * block_M, 0], buf)

    return main


kernel = rows(4096, 1024, 32, {DTYPE})
"""


def test_a_dtype_switch_reads_the_value_the_call_passes():
    # UB holds 192 KiB: 64 rows of 1024 take 128 KiB in fp16 but 256 KiB in fp32
    legal, refused = knobs.legal_values(SWITCHED.replace("{DTYPE}", '"float32"'), "block_M", BS)
    assert 64 not in legal and any(v == 64 and "UB" in why for v, why in refused), refused
    legal, _ = knobs.legal_values(SWITCHED.replace("{DTYPE}", 'dtype="float32"'), "block_M", BS)
    assert 64 not in legal
    legal, _ = knobs.legal_values(SWITCHED.replace("{DTYPE}", '"float16"'), "block_M", BS)
    assert 64 in legal and 128 not in legal


# 3. an imported helper handed the file's own factory; a read in a parameter's default

HARNESS = """
import tilelang
import tilelang.language as T
from bench.harness import profile

BLOCK_M = 64


@tilelang.jit(target="npuir")
def rows(M, block_M={DEFAULT}):
    @T.prim_func
    def main(A: T.Tensor((M,), "float16")):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M,), "float16")
            T.copy(A[cid * block_M], buf)

    return main


if __name__ == "__main__":
    {RUN}
"""


def _skipped(text: str) -> dict[str, str]:
    specs, skipped = Planner(_op()).specs(text, ["block_size"])
    return {s.split(": ", 2)[1]: s.split(": ", 2)[2] for s in skipped if s.count(": ") >= 2}


def test_an_imported_helper_handed_the_files_own_factory_is_not_that_factory():
    text = HARNESS.replace("{DEFAULT}", "32").replace(
        "{RUN}", "profile(rows, 1024, block_M=BLOCK_M)"
    )
    why = _skipped(text)["BLOCK_M"]
    assert "body is not in this file" not in why, why  # the kernel is in this file
    assert "profile()" in why and "rows()" in why, why


def test_a_constant_read_by_a_parameter_default_is_read_in_this_file():
    # the file's own factory reads BLOCK_M through its default; check() only gets it too
    text = HARNESS.replace("{DEFAULT}", "BLOCK_M").replace(
        "{RUN}", "k = rows(1024)\n    profile(k, BLOCK_M)"
    )
    assert imported.imported_only(facts(text), "BLOCK_M") is None
    # a wrapper whose default only forwards it to an imported factory: that factory's knob
    forward = """
from kernels.gemm import matmul

BLOCK_M = 128


def build(M, block_M=BLOCK_M):
    return matmul(M, block_M=block_M)


build(1024)
"""
    why = imported.imported_only(facts(forward), "BLOCK_M")
    assert why is not None and "matmul()" in why, why


# 4. only a comment about multi-buffering is a stated reason to keep the flag off


def test_a_comment_about_some_other_buffer_does_not_keep_the_flag_off():
    bare = FLAG_OFF_WITH_REASON.replace(
        "        # Keep auto multi-buffering off here: the doubled buffers of the three\n"
        "        # matmuls overflow the on-chip budget.\n",
        "",
    )
    for comment in ("# output buffer in UB", "# see the buffer sizes below", "# Buffer: 64 KiB"):
        other = bare.replace('": False,', f'": False,  {comment}')
        assert isinstance(multibuffer.set_flag(other, True), Variant), comment
    for comment in (
        "# single-buffer is safe here",
        "# no double buffering: the manual ping-pong below does it",
        "# disable the auto multi buffer to implement it manually",
    ):
        stated = bare.replace('": False,', f'": False,  {comment}')
        assert isinstance(multibuffer.set_flag(stated, True), Refusal), comment


# 5. gemm operands and copied tiles resolve by scope; positional transpose flags count

OTHER_KERNEL = """
    @T.prim_func
    def other(X: T.Tensor((M, K), dtype), Y: T.Tensor((M, K), dtype)):
        with T.Kernel(M // 64, is_npu=True) as (cid, _):
            A_L1 = T.alloc_ub((64, 64), dtype)
            C_L0 = T.alloc_ub((64, 64), dtype)
            T.copy(X[cid * 64, 0], A_L1)
            T.copy(A_L1, C_L0)
            T.copy(C_L0, Y[cid * 64, 0])

    return main, other
"""


def test_a_same_named_buffer_of_another_kernel_is_not_the_gemm_operand():
    two = GEMM.replace("\n    return main\n", OTHER_KERNEL, 1)
    assert "def other(" in two
    ok, refused = _knob(two, "block_M").legal((8, 16, 64))
    assert ok == (16, 64) and [v for v, _ in refused] == [8], refused
    assert "A_L1" in refused[0][1] and "fractal" in refused[0][1]


def test_positional_transpose_flags_are_read_by_tilelangs_gemm_signature():
    # gemm_v0(A, B, C, transpose_A=False, transpose_B=False, init=False) in tilelang-ascend
    # (gemm likewise); a size list in the fourth place is TileLang-NPUIR's npuir_dot
    int8 = (
        GEMM.replace('dtype="float16"', 'dtype="int8"')
        .replace(
            "B_L1 = T.alloc_L1((block_K, block_N), dtype)",
            "B_L1 = T.alloc_L1((block_N, block_K), dtype)",
        )
        .replace("T.gemm_v0(A_L1, B_L1, C_L0, init=(k == 0))", "{GEMM}")
        .replace("B: T.Tensor((K, N), dtype)", "B: T.Tensor((N, K), dtype)")
        .replace("B[k * block_K, by * block_N], B_L1", "B[by * block_N, k * block_K], B_L1")
    )
    for call in (
        "T.gemm_v0(A_L1, B_L1, C_L0, False, True, init=(k == 0))",
        "T.gemm(A_L1, B_L1, C_L0, False, True)",
        # TileLang-NPUIR: T.gemm is npuir_dot(A, B, C, size, initC, a_transpose, b_transpose)
        "T.gemm(A_L1, B_L1, C_L0, [block_M, block_K, block_N], k == 0, False, True)",
    ):
        text = int8.replace("{GEMM}", call)
        # B is N x K: 16 along N is whole, 16 along K (int8: 32 per fractal row) is not
        ok, refused = _knob(text, "block_N").legal((16, 128))
        assert ok == (16, 128) and not refused, (call, refused)
        ok, refused = _knob(text, "block_K").legal((16, 128))
        assert ok == (128,) and "reduction axis" in refused[0][1], (call, refused)


CROSSED_TWO = """
import tilelang
import tilelang.language as T


def rows(M, N, block_M, block_N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            row = cid * block_N
            buf = T.alloc_ub((block_M, N), "float16")
            T.copy(A[row, 0], buf)
            T.copy(buf, B[row, 0])

    @T.prim_func
    def other(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(M // block_N, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_N, N), "float16")
            T.copy(X[cid * block_N, 0], buf)
            T.copy(buf, Y[cid * block_N, 0])

    return main, other


if __name__ == "__main__":
    rows(1024, 256, 32, 32)
"""


def test_a_copied_tile_is_the_buffer_of_its_own_kernel():
    # main places its rows at multiples of block_N but copies block_M of them (buf): the two
    # must stay equal; other's buf of block_N rows is another kernel's
    k = inventory.inventory(CROSSED_TWO).knob("block_M")
    assert k is not None and k.value == 32
    ok, refused = k.legal((16, 32, 64))
    assert ok == (32,), refused


# cri_act_quant: a block every tile of which writes one place, over an extent no size fixes

PER_ROW_MAX = """
import tilelang
import tilelang.language as T


@tilelang.jit
def row_absmax(N, block_M=32, block_N=64):
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor([M, N], "float"), S: T.Tensor([M], "float")):
        with T.Kernel((M // block_M) * (N // block_N), is_npu=True) as (cid, vid):
            bm = cid // (N // block_N)
            bn = cid % (N // block_N)
            x = T.alloc_ub([block_M, block_N], "float")
            s = T.alloc_ub([block_M], "float")
            T.copy(X[bm * block_M, bn * block_N], x)
            T.reduce_max(x, s, dim=-1)
            T.copy(s, S[bm * block_M : bm * block_M + block_M])

    return main
"""


def test_a_block_whose_tiles_all_write_one_place_over_an_unfixed_extent_is_dropped():
    inv = inventory.inventory(PER_ROW_MAX)
    assert [k.name for k in inv.knobs] == ["block_M"]
    (why,) = [d.reason for d in inv.dropped if d.name == "block_N"]
    assert "`S[bm * block_M : bm * block_M + block_M]`" in why and "extent `N`" in why, why
    assert "not a tile size" in why


def test_the_same_block_over_an_extent_the_file_fixes_stays_a_knob_of_that_value():
    fixed = PER_ROW_MAX + '\n\nif __name__ == "__main__":\n    row_absmax(64)\n'
    k = inventory.inventory(fixed).knob("block_N")
    assert k is not None and k.value == 64
    ok, refused = k.legal((32, 64, 128))
    assert ok == (64,) and refused
