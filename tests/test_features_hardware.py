"""bot.features.hardware: product spellings and limits in prose."""

from __future__ import annotations

from bot.features import hardware as hw


def test_spelling_variants_are_one_product():
    for text in (
        "Atlas 800I A2服务器",
        "Atlas 800I A2 服务器",
        "Atlas 800I A2 推理服务器",
        "atlas 800i a2",
        "Atlas800I A2",
    ):
        assert hw.products(text) == ["Atlas 800I A2"], text
    assert hw.products("Atlas 300I DUO 推理卡 与 Atlas 800I A3 超节点服务器") == [
        "Atlas 300I DUO",
        "Atlas 800I A3",
    ]
    assert hw.normalize("910B") == "910B"


def test_only_restrictions_and_exclusions_are_limits():
    assert hw.limits_in("硬件要求：仅 Atlas 800I A2 推理服务器支持此特性。") == [
        hw.HardwareLimit("仅", "Atlas 800I A2")
    ]
    assert hw.limits_in("本特性不支持 Atlas 300I DUO 推理卡") == [
        hw.HardwareLimit("不支持", "Atlas 300I DUO")
    ]
    assert hw.limits_in("Atlas 800I A2服务器默认使用的版本算力313T，内存64 GB。") == []
    assert hw.limits_in("仅昇腾 NPU 环境支持") == []  # no product named: not a per-feature limit
    assert hw.limits_in("在 Atlas 800I A2 上仅需设置一个参数。") == []  # "only need", not "only on"
    assert hw.limits_in("此特性仅支持在Atlas 800I A3超节点服务器上运行") == [
        hw.HardwareLimit("仅", "Atlas 800I A3")
    ]
    assert hw.limits_in("Supported on Atlas 800I A2 only.") == [
        hw.HardwareLimit("仅", "Atlas 800I A2")
    ]


def test_allows():
    only_a2 = (hw.HardwareLimit("仅", "Atlas 800I A2"),)
    assert hw.allows(only_a2, "Atlas 800I A2") and not hw.allows(only_a2, "Atlas 800I A3")
    assert hw.allows((), "anything")
    assert not hw.allows((hw.HardwareLimit("不支持", "Atlas 300I DUO"),), "Atlas 300I DUO")


def test_short_forms_legends_and_what_is_no_limit():
    assert hw.products("A2 A3 DUO") == ["Atlas 800I A2", "Atlas 800I A3", "Atlas 300I DUO"]
    assert (
        hw.products("A2A 模式：标准 all-to-all；W8A8、W4A4") == []
    )  # all-to-all and algorithm names
    assert hw.legend("A2代表Atlas 800I A2，默认算力313T。DUO代表300I DUO，默认") == {
        "A2": "Atlas 800I A2",
        "DUO": "Atlas 300I DUO",
    }
    assert hw.limits_in("W8A8 MXFP8 quantization，支持 A5。") == [hw.HardwareLimit("仅", "A5")]
    assert hw.limits_in("EP 场景下 A3/A5 硬件使用 dynamic dispatcher") == []  # a mention, no limit
    assert [hw.normalize(n) for n in ("A2", "300I Duo", "Atlas 800I A3 超节点服务器", "A5")] == [
        "Atlas 800I A2",
        "Atlas 300I DUO",
        "Atlas 800I A3",
        "A5",
    ]
