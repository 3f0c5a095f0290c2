"""Adversarial review of the eighth session's rules (h16r): each rule on its own intent spelled
another way (it must still hold) and on a look-alike it must not take, on kernels written for
the test from the fixtures of tests/test_strategies_firstcontact_p.py and
tests/test_strategies_sizes_h15.py."""

from __future__ import annotations

from test_strategies_firstcontact_p import (
    CHUNK_GATE,
    FLATTENED,
    NPUIR_OPS,
    SHARED_CORES,
    SHARED_UNPACK,
    _language,
    _move,
)
from test_strategies_sizes_h15 import _legal

from bot.strategies import vprefix
from bot.strategies.base import Refusal, Variant

# --- granularity.py: a per-tile table laid out by the host in blocks of G pins the knob to G

_GRID_1D = (
    "        with T.Kernel(T.ceildiv(rows, block_R), is_npu=True) as (cid, _):\n"
    "            r = cid % T.ceildiv(rows, block_R)\n"
)


def _gate(launch: str) -> str:
    src = CHUNK_GATE.replace(_GRID_1D, launch)
    assert src != CHUNK_GATE
    return src


def _pinned(src: str) -> None:
    for value in (16, 64):
        r = _move(src, "block_R", value)
        assert isinstance(r, Refusal), value
        assert "`Gate[r]`" in r.reason and "32-wide blocks" in r.reason, r.reason


def test_a_tile_index_at_the_second_place_of_a_grid_reads_the_table_per_tile():
    # `T.Kernel(gx, gy, is_npu=True) as (bx, by)` (Developer-mode 2-D grids): the row tiles are
    # the grid's second extent, so `r` is their index as `cid % ...` was
    _pinned(_gate("        with T.Kernel(1, T.ceildiv(rows, block_R), is_npu=True) as (cx, r):\n"))


def test_a_loop_from_zero_over_the_tiles_is_the_tile_index():
    # one core walking the row tiles in `T.serial(0, n)` is the `T.serial(n)` walk
    for loop in ("T.serial(0, T.ceildiv(rows, block_R))", "range(0, T.ceildiv(rows, block_R))"):
        _pinned(
            _gate(
                f"        with T.Kernel(1, is_npu=True) as (cid, _):\n          for r in {loop}:\n"
            )
        )
    # a loop that starts elsewhere walks other trips: not read as the tile index
    offset = _gate(
        "        with T.Kernel(1, is_npu=True) as (cid, _):\n"
        "          for r in T.serial(1, T.ceildiv(rows, block_R)):\n"
    )
    r = _move(offset, "block_R", 64)
    assert not (isinstance(r, Refusal) and "32-wide blocks" in r.reason), r


# --- corecount.py: `T.ceildiv(X, cores)` over items taken under `if item < X` is a share


def test_a_bound_on_the_loop_counter_is_no_guard_of_the_items():
    # `if i < n_items` bounds the trip, not the item `first + i`: a core past the items still
    # takes rows past the end, so the count keeps its tile rule
    counter = SHARED_CORES.replace("if item < n_items:", "if i < n_items:")
    r = _move(counter, "BLOCK_CORES", 48)
    assert isinstance(r, Refusal) and "exceeds the extent 8" in r.reason, r


def test_a_guard_of_the_items_spelled_otherwise_is_the_same_share():
    for guard in (
        "if n_items > item:",
        "if item <= n_items - 1:",
        "if item < n_items and core >= 0:",
        "with T.If(n_items > item), T.Then():",
    ):
        src = SHARED_CORES.replace("if item < n_items:", guard)
        assert src != SHARED_CORES
        for value in (16, 48, 64):
            assert isinstance(_move(src, "BLOCK_CORES", value), Variant), (guard, value)


# --- parametrized.py: the integers a `@pytest.mark.parametrize` list passes are sizes

_PARAMETRIZED = (
    "import pytest\n\n"
    "CASES = {CASES}\n\n\n"
    "@pytest.mark.parametrize({ARGS})\n"
    "def test_rows(M, N):\n"
    "    rows(M, N, 32)\n"
)


def _passes(cases: str, args: str = '"M, N", CASES') -> tuple[int, ...]:
    legal, _ = _legal(_PARAMETRIZED.replace("{CASES}", cases).replace("{ARGS}", args))
    return legal


UNKNOWN = (8, 16, 32)  # no size read: nothing beyond the current 32 is planned
BOTH = (8, 16, 32, 64, 128)  # M = 512 and 128: divisors of 128


def test_pytest_param_entries_and_keyword_lists_are_passes():
    assert _passes("[(512, 64), (128, 64)]") == BOTH
    assert _passes('[pytest.param(512, 64, id="big"), pytest.param(128, 64)]') == BOTH
    assert _passes("[(512, 64), (128, 64)]", 'argnames="M, N", argvalues=CASES') == BOTH
    assert _passes("[(512, 64), (128, 64)]", '("M", "N"), argvalues=CASES') == BOTH
    # a pass pytest skips runs no size: only 512 is left
    skipped = '[(512, 64), pytest.param(128, 64, marks=pytest.mark.skip(reason="slow"))]'
    assert _passes(skipped) == (8, 16, 32, 64, 128, 256, 512)
    # values the file does not write out stay unknown
    assert _passes("[pytest.param(*(512, 64)), (128, 64)]") == UNKNOWN


def test_an_indirect_list_is_no_size():
    # `indirect=True` hands each value to a fixture of that name, which passes the test what
    # it makes of it: the listed integers are not the test's M and N
    assert _passes("[(512, 64), (128, 64)]", '"M, N", CASES, indirect=True') == UNKNOWN
    assert _passes("[(512, 64), (128, 64)]", '"M, N", CASES, indirect=False') == BOTH


# --- tiling.py: a write every tile makes at one place is an overwrite only when what it writes
# depends on the tile's position. What it writes is followed through every statement form.

_UNPACK_ROW = "                T.copy(W[w_row, 0], row_ub)\n"


def _unpack(row: str) -> str:
    src = SHARED_UNPACK.replace(_UNPACK_ROW, row)
    assert src != SHARED_UNPACK
    return src


def test_a_value_from_the_tile_by_a_keyword_destination_or_an_annotated_local_overwrites():
    for row in (
        # the copy's destination given as `dst=`: row_ub holds rows of A at bm
        "                T.copy(A[bm * block_M + r, 0], dst=row_ub)\n",
        # the row of A read through an annotated local computed from bm
        "                a_row: T.int32 = bm * block_M + r\n                T.copy(A[a_row, 0], row_ub)\n",
    ):
        r = _move(_unpack(row), "block_M", 32)
        assert isinstance(r, Refusal) and "overwrite" in r.reason, (row, r)


def test_a_constant_an_op_is_handed_carries_no_tile_position():
    # the gemm's flags passed by position (`False, True`: transpose_B) are no buffers it writes:
    # read beside the bm-dependent operands they must not carry bm into every statement that
    # reads the same constant (the launch's `is_npu=True`), the workspace rows among them
    positional = SHARED_UNPACK.replace("transpose_B=True, init=True)", "False, True)")
    assert positional != SHARED_UNPACK
    assert isinstance(_move(positional, "block_M", 32), Variant)


# --- vprefix.py: only the v-aliases the installed NPUIR TileLang defines are renamed into


def test_an_alias_commented_out_in_the_installed_tilelang_is_not_defined(tmp_path, monkeypatch):
    _language(
        tmp_path,
        monkeypatch,
        "from .customize_npuir import (\n    npuir_add,\n    npuir_brc,\n"
        "    # npuir_add as vadd,  (planned)\n)\n",
    )
    r = vprefix.rename(NPUIR_OPS)
    assert isinstance(r, Refusal) and "defines no v-alias" in r.reason, r


def test_aliases_assigned_or_star_imported_are_defined(tmp_path, monkeypatch):
    # `vadd = npuir_add` in the package's own text
    _language(
        tmp_path,
        monkeypatch,
        "from .customize_npuir import npuir_add, npuir_brc\n\nvadd = npuir_add\n",
    )
    r = vprefix.rename(NPUIR_OPS)
    assert isinstance(r, Variant) and "T.vadd(src, acc, acc)" in r.source, r
    # a module the package star-imports defines them
    language = tmp_path / "tilelang" / "language"
    (language / "__init__.py").write_text(
        "from .customize_npuir import npuir_add, npuir_brc\nfrom .aliases import *\n"
    )
    assert isinstance(vprefix.rename(NPUIR_OPS), Refusal)  # not yet defined anywhere
    (language / "aliases.py").write_text("from .customize_npuir import npuir_add as vadd\n")
    r = vprefix.rename(NPUIR_OPS)
    assert isinstance(r, Variant) and "T.vadd(src, acc, acc)" in r.source, r


# --- tensorshapes.py: a shape read before the parameter's one rebinding is the shape as passed

_UNPACK_SHAPE = "    batch, heads, dim = h.shape\n"


def test_a_shape_read_by_index_before_the_rebinding_sees_the_tensor_as_passed():
    for reads in (
        "    batch = h.shape[0]\n    heads = h.shape[1]\n    dim = h.shape[-1]\n",
        "    batch = h.size(0)\n    heads = h.size(1)\n    dim = h.size(2)\n",
    ):
        src = FLATTENED.replace(_UNPACK_SHAPE, reads)
        assert src != FLATTENED
        assert isinstance(_move(src, "block_M", 32), Variant), reads  # rows = 8 * 32 = 256
        r = _move(src, "block_M", 96)
        assert isinstance(r, Refusal) and "does not divide 256" in r.reason, r
    # read after the rebinding, the shape is the view's own: 128 rows
    late = FLATTENED.replace(
        _UNPACK_SHAPE + "    rows = batch * heads\n    h = h.view(rows, dim)\n",
        "    h = h.view(128, 128)\n    rows = h.shape[0]\n    dim = h.shape[1]\n    batch, heads = 4, 32\n",
    )
    assert late != FLATTENED
    r = _move(late, "block_M", 256)
    assert isinstance(r, Refusal) and "does not divide 128" in r.reason, r
