"""bot.features.hardware: product spellings and limits in prose."""

from __future__ import annotations

from bot.features import hardware as hw


def test_spelling_variants_are_one_product():
    for text in ("Atlas 800I A2服务器", "Atlas 800I A2 服务器", "Atlas 800I A2 推理服务器", "atlas 800i a2", "Atlas800I A2"):
        assert hw.products(text) == ["Atlas 800I A2"], text
    assert hw.products("Atlas 300I DUO 推理卡 与 Atlas 800I A3 超节点服务器") == ["Atlas 300I DUO", "Atlas 800I A3"]
    assert hw.normalize("910B") == "910B"


def test_only_restrictions_and_exclusions_are_limits():
    assert hw.limits_in("硬件要求：仅 Atlas 800I A2 推理服务器支持此特性。") == [hw.HardwareLimit("仅", "Atlas 800I A2")]
    assert hw.limits_in("本特性不支持 Atlas 300I DUO 推理卡") == [hw.HardwareLimit("不支持", "Atlas 300I DUO")]
    assert hw.limits_in("Atlas 800I A2服务器默认使用的版本算力313T，内存64 GB。") == []
    assert hw.limits_in("仅昇腾 NPU 环境支持") == []  # no product named: not a per-feature limit
    assert hw.limits_in("在 Atlas 800I A2 上仅需设置一个参数。") == []  # "only need", not "only on"
    assert hw.limits_in("此特性仅支持在Atlas 800I A3超节点服务器上运行") == [hw.HardwareLimit("仅", "Atlas 800I A3")]
    assert hw.limits_in("Supported on Atlas 800I A2 only.") == [hw.HardwareLimit("仅", "Atlas 800I A2")]


def test_allows():
    only_a2 = (hw.HardwareLimit("仅", "Atlas 800I A2"),)
    assert hw.allows(only_a2, "Atlas 800I A2") and not hw.allows(only_a2, "Atlas 800I A3")
    assert hw.allows((), "anything")
    assert not hw.allows((hw.HardwareLimit("不支持", "Atlas 300I DUO"),), "Atlas 300I DUO")
