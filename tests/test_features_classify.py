"""bot.features.classify: keyword tables."""

from __future__ import annotations

from bot.features import classify as cls


def test_directions_by_keywords_with_precedence():
    assert cls.direction_of(["AttentionCache"]) == "缓存加速"
    assert cls.direction_of(["FA量化"]) == "Attention 优化"
    assert cls.direction_of(["Linear量化"]) == "MatMul 量化"
    assert (
        cls.direction_of(["fast_layernorm", "融合算子"]) == "编译路径优化"
    )  # 'fa' in 'fast' is no FA
    assert cls.direction_of(["rf_v2（RainFusion2.0）", "技术特点", "稀疏"]) == "Attention 优化"
    assert cls.direction_of(["ACLGraph 加速"]) == "编译路径优化"
    assert cls.direction_of(["动态专家负载均衡"]) == "通信掩盖 / 并行"
    assert cls.direction_of(["神秘加速"]) == cls.OTHER


def test_generic_headings_and_api_headings():
    for title in ("通用原理", "参数说明", "forward 方法", "补充内容 —— CFG 融合", "Usage examples"):
        assert cls.is_generic(title), title
    for title in ("DitCache", "Tensor Parallel", "FA 系列", "时间步优化"):
        assert not cls.is_generic(title), title
    assert cls.is_identifier("share_memory") and not cls.is_identifier("CPU 卸载")


def test_matrix_topics_and_flags():
    assert [
        cls.topic_of(c) for c in ("稀疏FA", "Cache", "Cache DiT + diffusers", "融合算子", "硬件")
    ] == ["sparse", "cache", None, "fusion", None]
    assert cls.flag("✅️") is True and cls.flag(" ✖️ ") is False and cls.flag("Atlas") is None
