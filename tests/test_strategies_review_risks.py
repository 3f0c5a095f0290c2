"""Review risks left from the last session, each on a self-written kernel: a host padding sets
a granule only where the kernel is built (hostpad.py); `T.ceildiv(knob, X)` asks a multiple of
X only where it walks the knob in whole parts (exprrules.py); the auto-scheduled dialect is read
from imports, not from comments (dialect.py); a drop reason lists call lines, not a def line
(callsites.py); one request to a parse-cached function is one key however it is spelled
(facts.on_facts)."""

from __future__ import annotations

from bot.strategies import dialect, inventory, knobs

# num_tokens is symbolic; the clipped copies handle a partial last tile. {HOST} is the host code.
PADDED = """
import torch
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


{HOST}
"""


def test_a_same_named_padding_in_an_unrelated_function_sets_no_granule():
    src = PADDED.replace(
        "{HOST}",
        "def reference_rows(num_tokens):\n"
        "    return ((num_tokens + 15) // 16) * 16\n\n\n"
        "def run(x):\n"
        "    return rows(x.shape[1])(x)\n",
    )
    (knob,) = inventory.inventory(src).knobs
    ok, refused = knob.legal((8, 16, 32, 64))
    assert ok == (8, 16, 32, 64), refused


def test_the_padding_where_the_kernel_is_built_still_sets_the_granule():
    src = PADDED.replace(
        "{HOST}",
        "def run(x, num_tokens):\n"
        "    if num_tokens % 16 != 0:\n"
        "        x = pad_rows(x, ((num_tokens + 15) // 16) * 16)\n"
        "    return rows(x.shape[1])(x)\n",
    )
    (knob,) = inventory.inventory(src).knobs
    ok, refused = knob.legal((8, 16, 32, 64))
    assert ok == (8, 16) and "pads `num_tokens` only to a multiple of 16" in refused[0][1]


# block_N is walked in sub-tiles of 64; {LOOP} is how (T.ceildiv(block_N, 64) in each)
SUBTILES = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def vec_copy(M, N, block_N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // block_N, is_npu=True) as (cid, vid):
            a = T.alloc_ub((M, 64), "float16")
{LOOP}

    return main


vec_copy(64, 4096, 128)
"""


def _sub(loop: str) -> tuple[tuple[int, ...], dict[int, str]]:
    knob = inventory.inventory(SUBTILES.replace("{LOOP}", loop)).knob("block_N")
    assert knob is not None
    ok, refused = knob.legal((16, 32, 64, 128, 256))
    return ok, dict(refused)


def test_a_count_that_only_sizes_a_buffer_asks_no_multiple():
    ok, refused = _sub(
        '            flags = T.alloc_ub((T.ceildiv(block_N, 64),), "int32")\n'
        "            T.copy(A[0, cid * block_N], a)\n"
    )
    assert 32 in ok, refused


def test_sub_tiles_clipped_with_min_ask_no_multiple():
    ok, refused = _sub(
        "            for s in T.serial(T.ceildiv(block_N, 64)):\n"
        "                n = T.min(64, block_N - s * 64)\n"
        "                T.copy(A[0, cid * block_N + s * 64], a[:, :n])\n"
    )
    assert 32 in ok, refused


def test_whole_sub_tiles_through_a_local_still_ask_a_multiple():
    ok, refused = _sub(
        "            parts = T.ceildiv(block_N, 64)\n"
        "            for s in T.serial(parts):\n"
        "                T.copy(A[0, cid * block_N + s * 64], a)\n"
    )
    assert 32 not in ok and "not a multiple of 64" in refused[32]


def test_a_comment_or_string_naming_the_dialect_is_not_an_import():
    said = (
        "# ported from tilelang.ascend.language; T.annotate_buffer_versions is not used here\n"
        "import tilelang\n"
        "import tilelang.language as T\n"
        'NOTE = "see tilelang.ascend.language"\n'
    )
    assert not dialect.auto_scheduled(said)
    assert dialect.auto_scheduled("import tilelang.ascend.language as T\n")
    assert dialect.auto_scheduled("from tilelang.ascend import language as T\n")
    assert dialect.auto_scheduled("def f(T, b):\n    T.annotate_buffer_versions(b, 2)\n")


CALLED_THREE_WAYS = """
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def rows(M, block_M=64):
    @T.prim_func
    def main(A: T.Tensor((M,), "float16")):
        with T.Kernel(M // block_M, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_M,), "float16")
            T.copy(A[cid * block_M], buf)

    return main


def small():
    return rows(1024, block_M=32)


def big():
    return rows(4096, 128)


if __name__ == "__main__":
    small()
    big()
    rows(2048)
"""


def test_the_call_sites_a_drop_reason_lists_are_calls_not_the_def_line():
    (drop,) = [d for d in knobs.dropped(CALLED_THREE_WAYS) if d.name == "block_M"]
    assert "bound at 3 call sites (lines 18, 22, 28)" in drop.reason, drop.reason
    assert "its default 64 (line 7)" in drop.reason


def test_one_request_spelled_three_ways_is_computed_once():
    from bot.strategies.facts import on_facts

    calls: list[tuple[str, ...]] = []

    @on_facts
    def probe(source: str, harness: tuple[str, ...] = ("kernel",)) -> object:
        calls.append(harness)
        return object()

    src = "x = 1\n"
    first = probe(src)
    assert probe(src, ("kernel",)) is first
    assert probe(src, harness=("kernel",)) is first
    assert probe(src, harness=["kernel"]) is first  # a list: the same request, and no TypeError
    assert len(calls) == 1


def test_the_inventory_is_one_object_whichever_way_the_harness_is_passed():
    from bot.config.schema import DEFAULT_HARNESS

    a = inventory.inventory(CALLED_THREE_WAYS)
    assert inventory.inventory(CALLED_THREE_WAYS, DEFAULT_HARNESS) is a
    assert inventory.inventory(CALLED_THREE_WAYS, harness=DEFAULT_HARNESS) is a
