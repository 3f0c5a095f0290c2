"""Rules follow the run path and both spellings of `if` (bot/strategies/branches.py): a branch
the file never runs (`if is_causal:` with is_causal bound False on every call path) makes no
rule; `with T.If(c): with T.Then(): ... with T.Else(): ...` guards like `if c:`; a slice a
guard keeps inside the extent is not a clipped tail; a -inf mask a gemm accumulates onto stays
-inf through `exp2(x * scale - max * scale)` (bot/strategies/padflow.py)."""

from __future__ import annotations

import pytest

from bot.strategies import knobs

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)

# rows copied in block_N tiles; {TILES} counts them, {CALL} builds the kernel
COPY_ROWS = """\
import tilelang
import tilelang.language as T


@tilelang.jit(target="npuir")
def copy_rows(N, block_N=64, exact=False):
    tiles = {TILES}

    @T.prim_func
    def main(A: T.Tensor((N,), "float16"), B: T.Tensor((N,), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, _):
            buf = T.alloc_ub((block_N,), "float16")
            for t in T.serial(tiles):
                T.copy(A[t * block_N : (t + 1) * block_N], buf)
                T.copy(buf, B[t * block_N : (t + 1) * block_N])

    return main


{CALL}
"""


def _copy_rows(tiles: str, call: str) -> str:
    return COPY_ROWS.replace("{TILES}", tiles).replace("{CALL}", call)


SPLIT = "N // block_N if exact else T.ceildiv(N, block_N)"


def test_a_branch_off_on_the_only_call_path_makes_no_rule():
    src = _copy_rows(SPLIT, "kernel = copy_rows(960)")
    legal, refused = knobs.legal_values(src, "block_N", BS)
    assert 128 in legal and 512 in legal  # clipped copies handle the tail of 960
    assert "exceeds the extent 960" in dict(refused)[1024]


def test_the_branch_the_call_path_takes_still_rules():
    src = _copy_rows(SPLIT, "kernel = copy_rows(960, exact=True)")
    legal, refused = knobs.legal_values(src, "block_N", BS)
    assert legal == (8, 16, 32, 64)
    assert "does not divide 960" in dict(refused)[128]


def test_call_paths_that_disagree_keep_both_branches():
    src = _copy_rows(
        SPLIT, "kernel = copy_rows(960, exact=True)\nother = copy_rows(960, exact=False)"
    )
    legal, refused = knobs.legal_values(src, "block_N", BS)
    assert 128 not in legal and "does not divide 960" in dict(refused)[128]


def test_a_flag_from_an_argparse_default_picks_the_branch():
    call = """\
if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--exact", action="store_true", default=False)
    args = parser.parse_args()
    kernel = copy_rows(960, exact=args.exact)"""
    legal, _ = knobs.legal_values(_copy_rows(SPLIT, call), "block_N", BS)
    assert 128 in legal


# a chunked copy: a full chunk only under `col_end <= n` (n the runtime length), the last
# partial chunk element by element under `col < n`; the tensors are sized to a compile-time
# maximum, so nothing clips a chunk at n. {GUARDED} is the statement-form or the `if` form.
CHUNKS = """\
import tilelang
import tilelang.language as T

CHUNK_SIZE = 32
MAX_LEN = 8192


@tilelang.jit(target="ascendc_pto")
def chunk_copy(rows, n):
    @T.prim_func
    def main(
        src: T.Tensor((rows * MAX_LEN,), "int32"),
        dst: T.Tensor((rows * MAX_LEN,), "int32"),
    ):
        with T.Kernel(rows, is_npu=True) as (row, _):
            chunk_ub = T.alloc_ub((CHUNK_SIZE,), "int32")
            one_ub = T.alloc_ub((1,), "int32")
            base = row * MAX_LEN
            for c in T.serial((n + CHUNK_SIZE - 1) // CHUNK_SIZE):
                col_start = c * CHUNK_SIZE
                col_end = col_start + CHUNK_SIZE
{GUARDED}
    return main


kernel = chunk_copy(4, 960)
"""
STATEMENT_IF = """\
                with T.If(col_end <= n):
                    with T.Then():
                        T.copy(src[base + col_start : base + col_end], chunk_ub[0:CHUNK_SIZE])
                        T.copy(chunk_ub[0:CHUNK_SIZE], dst[base + col_start : base + col_end])
                    with T.Else():
                        for e in T.serial(CHUNK_SIZE):
                            col = col_start + e
                            with T.If(col < n):
                                with T.Then():
                                    T.copy(src[base + col : base + col + 1], one_ub[0:1])
                                    T.copy(one_ub[0:1], dst[base + col : base + col + 1])
"""
PLAIN_IF = """\
                if col_end <= n:
                    T.copy(src[base + col_start : base + col_end], chunk_ub[0:CHUNK_SIZE])
                    T.copy(chunk_ub[0:CHUNK_SIZE], dst[base + col_start : base + col_end])
                else:
                    for e in T.serial(CHUNK_SIZE):
                        col = col_start + e
                        if col < n:
                            T.copy(src[base + col : base + col + 1], one_ub[0:1])
                            T.copy(one_ub[0:1], dst[base + col : base + col + 1])
"""
# the guard bounds where a chunk starts, not where it ends: the copy runs past n
START_ONLY = """\
                with T.If(col_start < n):
                    with T.Then():
                        T.copy(src[base + col_start : base + col_end], chunk_ub[0:CHUNK_SIZE])
                        T.copy(chunk_ub[0:CHUNK_SIZE], dst[base + col_start : base + col_end])
"""


@pytest.mark.parametrize("guarded", [STATEMENT_IF, PLAIN_IF], ids=["with-T.If", "if"])
def test_a_chunk_copied_only_when_it_fits_needs_no_full_chunks(guarded):
    src = CHUNKS.replace("{GUARDED}", guarded)
    legal, refused = knobs.legal_values(src, "CHUNK_SIZE", BS)
    # no value needs to divide the run's 960; a chunk past it would only idle
    assert legal == tuple(b for b in BS if b <= 960), refused
    assert all("exceeds the extent 960" in why for _, why in refused), refused


def test_a_guard_on_the_chunk_start_alone_does_not_handle_the_tail():
    src = CHUNKS.replace("{GUARDED}", START_ONLY)
    legal, refused = knobs.legal_values(src, "CHUNK_SIZE", BS)
    assert 128 not in legal  # 960 is 7.5 chunks of 128: the last one runs past n
    assert "not at `n`" in dict(refused)[128]


# attention over keys in block_N tiles, adapted to this shape from the GPU pattern: keys past
# seq_kv take -inf before the scores gemm accumulates onto them, then exp2 after the max.
# {CAUSAL} is the flag the call passes, {CLEAR} the gemm's extra argument, {SCALE} the scale.
ATTENTION = """\
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[3])
def attention(heads, seq_q, seq_kv, dim, is_causal, block_M=64, block_N=64):
    scale = {SCALE}
    past = seq_kv - seq_q

    @T.prim_func
    def main(
        Q: T.Tensor((heads, seq_q, dim), "float16"),
        K: T.Tensor((heads, seq_kv, dim), "float16"),
        V: T.Tensor((heads, seq_kv, dim), "float16"),
        O: T.Tensor((heads, seq_q, dim), "float16"),
    ):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads) as (bx, by):
            q = T.alloc_shared((block_M, dim), "float16")
            k = T.alloc_shared((block_N, dim), "float16")
            v = T.alloc_shared((block_N, dim), "float16")
            s = T.alloc_fragment((block_M, block_N), "float")
            p = T.alloc_fragment((block_M, block_N), "float16")
            o = T.alloc_fragment((block_M, dim), "float")
            m = T.alloc_fragment((block_M,), "float")
            m_old = T.alloc_fragment((block_M,), "float")
            l = T.alloc_fragment((block_M,), "float")
            l_part = T.alloc_fragment((block_M,), "float")
            T.copy(Q[by, bx * block_M : (bx + 1) * block_M, :], q)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float"))
            n_tiles = (
                T.min(T.ceildiv(seq_kv, block_N), T.ceildiv((bx + 1) * block_M + past, block_N))
                if is_causal
                else T.ceildiv(seq_kv, block_N)
            )
            for t in T.Pipelined(n_tiles, num_stages=1):
                T.copy(K[by, t * block_N : (t + 1) * block_N, :], k)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.if_then_else(t * block_N + j >= seq_kv, -T.infinity("float"), 0)
                T.gemm(q, k, s, transpose_B=True{CLEAR})
                T.copy(m, m_old)
                T.reduce_max(s, m, dim=1, clear=False)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, l_part, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * T.exp2(m_old[i] * scale - m[i] * scale) + l_part[i]
                T.copy(s, p)
                T.copy(V[by, t * block_N : (t + 1) * block_N, :], v)
                T.gemm(p, v, o)
            for i, j in T.Parallel(block_M, dim):
                o[i, j] /= l[i]
            T.copy(o, O[by, bx * block_M : (bx + 1) * block_M, :])

    return main


kernel = attention(2, 256, 256, 64, {CAUSAL}, block_M=64, block_N=64)
"""


def _attention(
    causal: str = "False", clear: str = "", scale: str = "(1.0 / dim) ** 0.5 * 1.44269504"
) -> str:
    return ATTENTION.replace("{CAUSAL}", causal).replace("{CLEAR}", clear).replace("{SCALE}", scale)


def test_keys_masked_to_minus_inf_before_the_gemm_cover_the_tail():
    legal, refused = knobs.legal_values(_attention(), "block_N", BS)
    assert {128, 256} <= set(legal)
    reason = dict(refused)[512]
    assert "exceeds the extent 256" in reason and "T.ceildiv(seq_kv, block_N)" in reason
    assert "past" not in reason  # the causal branch is off on the only call path


def test_a_gemm_that_clears_its_accumulator_drops_the_mask():
    legal, refused = knobs.legal_values(_attention(clear=", clear_accum=True"), "block_N", BS)
    assert 128 in legal  # 256 keys: 128 divides them, no partial tile
    assert 512 not in legal and "would enter the max" in dict(refused)[512]


def test_a_scale_of_unknown_sign_may_turn_the_mask_into_plus_inf():
    src = _attention(scale="sm_scale").replace(
        "kernel = attention", "sm_scale = float(input())\nkernel = attention"
    )
    _, refused = knobs.legal_values(src, "block_N", BS)
    assert "would enter the sum" in dict(refused)[512]


def test_the_causal_branch_rules_when_the_call_turns_it_on():
    legal, refused = knobs.legal_values(_attention(causal="True"), "block_N", BS)
    # the causal tile count walks keys up to a bound that is no tensor's end: nothing clips
    # a partial tile there, so only divisors of the current block are provably safe
    assert 128 not in legal
    assert "`T.ceildiv((bx + 1) * block_M + past, block_N)`" in dict(refused)[128]
