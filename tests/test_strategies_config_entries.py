"""Knobs read out of a configuration the file spells out: `cfg["block_M"]`, `cfg[1]`,
`dict(block_M=64)`. The knob is the one literal that feeds the kernel; several configurations,
a container changed after it is written or one the file does not spell out leave it out with a
reason that says which."""

from __future__ import annotations

import textwrap

from bot.config.schema import Knob
from bot.strategies import knobs
from bot.strategies.base import Refusal, Variant
from bot.strategies.source import changed_lines

BS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip()


def bs(name: str) -> Knob:
    return Knob(name, "block_size", BS)


ROWS = src("""
    import tilelang
    import tilelang.language as T

    @tilelang.jit(target="npuir")
    def rows(M, block_M):
        @T.prim_func
        def main(A: T.Tensor((M,), "float16")):
            with T.Kernel(M // block_M, is_npu=True) as (cid, _):
                buf = T.alloc_ub((block_M,), "float16")
                T.copy(A[cid * block_M], buf)

        return main

""")


def _tuned_at(text: str, old: str, new: str, reason_512: str = "does not divide 256") -> None:
    assert knobs.discover(text) == ["block_M"], knobs.dropped(text)
    v = knobs.set_knob(text, bs("block_M"), 128)
    assert isinstance(v, Variant), v
    assert changed_lines(text, v.source) == [(old, new)]
    r = knobs.set_knob(text, bs("block_M"), 512)  # M from the same configuration
    assert isinstance(r, Refusal) and reason_512 in r.reason, r


def test_a_dict_key_read_at_the_call_is_the_knob():
    text = ROWS + 'cfg = {"M": 256, "block_M": 64}\nkernel = rows(cfg["M"], cfg["block_M"])\n'
    _tuned_at(text, 'cfg = {"M": 256, "block_M": 64}', 'cfg = {"M": 256, "block_M": 128}')
    site = knobs.locate(text, "block_M")
    assert not isinstance(site, str) and (site.kind, site.line, site.value) == ("dict", 14, 64)


def test_a_dict_call_read_into_a_local_is_the_knob():
    text = ROWS + src("""
        def main():
            cfg = dict(M=256, block_M=64)
            block_M = cfg["block_M"]
            return rows(cfg["M"], block_M)

        if __name__ == "__main__":
            main()
    """)
    _tuned_at(text, "    cfg = dict(M=256, block_M=64)", "    cfg = dict(M=256, block_M=128)")


def test_a_tuple_index_and_a_one_entry_list_of_tuples():
    index = ROWS + "SIZES = (256, 64)\nkernel = rows(SIZES[0], SIZES[1])\n"
    _tuned_at(index, "SIZES = (256, 64)", "SIZES = (256, 128)")
    walked = ROWS + "for cfg in [(256, 64)]:\n    rows(cfg[0], cfg[-1])\n"
    _tuned_at(walked, "for cfg in [(256, 64)]:", "for cfg in [(256, 128)]:")
    nested = ROWS + 'CONFIGS = [{"M": 256, "block_M": 64}]\nbest = CONFIGS[0]\n'
    nested += 'rows(best["M"], CONFIGS[0]["block_M"])\n'
    _tuned_at(
        nested,
        'CONFIGS = [{"M": 256, "block_M": 64}]',
        'CONFIGS = [{"M": 256, "block_M": 128}]',
    )


def test_dict_call_entries_passed_with_double_star():
    one = ROWS + "for cfg in [dict(M=256, block_M=64)]:\n    rows(**cfg)\n"
    _tuned_at(
        one, "for cfg in [dict(M=256, block_M=64)]:", "for cfg in [dict(M=256, block_M=128)]:"
    )
    direct = ROWS + "cfg = dict(M=256, block_M=64)\nrows(**cfg)\n"
    _tuned_at(direct, "cfg = dict(M=256, block_M=64)", "cfg = dict(M=256, block_M=128)")


def _dropped(text: str) -> str:
    assert knobs.discover(text) == []
    assert isinstance(knobs.set_knob(text, bs("block_M"), 128), Refusal)
    return {d.name: d.reason for d in knobs.dropped(text)}["block_M"]


def test_several_configurations_leave_the_knob_out_with_the_loop_named():
    text = ROWS + src("""
        configs = [{"M": 256, "block_M": 64}, {"M": 512, "block_M": 128}]
        for cfg in configs:
            rows(cfg["M"], cfg["block_M"])
    """)
    why = _dropped(text)
    assert 'read from `cfg["block_M"]` at line 16' in why, why
    assert "set by the for loop at line 15" in why, why
    double = ROWS + "for cfg in [dict(M=256, block_M=64), dict(M=512, block_M=64)]:\n"
    double += "    rows(**cfg)\n"
    assert "may come from `**cfg` at line 15" in _dropped(double)


def test_a_configuration_changed_after_it_is_written_is_not_the_knob():
    for change in ('cfg["block_M"] = 32', "cfg.update(block_M=32)", 'del cfg["M"]'):
        text = ROWS + f'cfg = {{"M": 256, "block_M": 64}}\n{change}\n'
        text += 'rows(cfg["M"], cfg["block_M"])\n'
        why = _dropped(text)
        assert f"'cfg' is changed at line 15 (`{change}`) after it is written" in why, why
    grown = ROWS + "cfg = dict(M=256, block_M=64)\ncfg.update(block_M=32)\nrows(**cfg)\n"
    assert "may come from `**cfg`" in _dropped(grown)


def test_a_configuration_the_file_does_not_spell_out_is_named():
    bench = ROWS + 'def bench(cfg):\n    return rows(1024, cfg["block_M"])\n\n'
    # the one call's configuration is followed; it has no such entry
    assert "has no key 'block_M'" in _dropped(bench + "bench({})\n")
    for calls in ("", 'bench({"block_M": 64})\nbench({"block_M": 32})\n'):
        why = _dropped(bench + calls)
        assert "'cfg' is a parameter of bench(): the configuration comes from its callers" in why
        assert "its calls do not pass one configuration the file spells out" in why, why
    text = ROWS + src("""
        def bench(kernel_config):
            best = kernel_config.config
            return rows(1024, best["block_M"])

        bench(None)
    """)
    why = _dropped(text)
    assert '`best["block_M"]` at line 16: `kernel_config.config` is not a dict' in why, why
    missing = ROWS + 'cfg = {"M": 256}\nrows(cfg["M"], cfg["block_M"])\n'
    assert "the dict written at line 14 has no key 'block_M'" in _dropped(missing)
    chosen = ROWS + "SIZES = (256, 64)\ni = 1\nrows(SIZES[0], SIZES[i])\n"
    assert "the entry is chosen by a value that is not a literal" in _dropped(chosen)


def test_a_same_named_container_changed_in_another_function_is_another_name():
    text = ROWS + src("""
        cfg = {"M": 256, "block_M": 64}

        def unrelated():
            cfg = {}
            cfg["block_M"] = 8
            return cfg

        kernel = rows(cfg["M"], cfg["block_M"])
    """)
    _tuned_at(text, 'cfg = {"M": 256, "block_M": 64}', 'cfg = {"M": 256, "block_M": 128}')
    # a function that changes the module's own dict (no local `cfg`) does change it
    shared = text.replace("    cfg = {}\n", "")
    why = _dropped(shared)
    assert "'cfg' is changed at line 17 (`cfg[\"block_M\"] = 8`) after it is written" in why, why
