"""Keyword tables: which headings are generic, which direction a feature belongs to.

These are vocabularies (words a doc uses for a *kind* of content), never the
contents of a particular doc: a new doc that uses the same words lands in the
right place, one that does not lands under OTHER.
"""

from __future__ import annotations

import functools
import re

OTHER = "其他特性"

# Order matters twice: it is the section order of the table, and the precedence
# when one text matches several directions ("AttentionCache" is caching, "FA量化"
# is attention work).
DIRECTIONS: list[tuple[str, list[str]]] = [
    ("MatMul 量化", []),  # filled below; listed first for section order
    ("Attention 优化", []),
    ("编译路径优化", []),
    ("显存优化", []),
    ("通信掩盖 / 并行", []),
    ("缓存加速", []),
]
_KEYWORDS: dict[str, list[str]] = {  # noqa: E501
    "缓存加速": ["cache", "缓存", "以存代算", "时间步", "timestep"],
    "通信掩盖 / 并行": [
        "并行",
        "parallel",
        "通信",
        "ulysses",
        "专家",
        "eplb",
        "moe",
        "负载均衡",
        "alltoall",
        "hccl",
    ],
    "显存优化": ["显存", "内存", "offload", "卸载", "memory"],
    "编译路径优化": [
        "编译",
        "compile",
        "compilation",
        "融合",
        "pattern",
        "graph",
        "aclgraph",
        "图模式",
        "fused",
    ],
    "Attention 优化": ["注意力", "attention", "FA", "稀疏", "sparse", "flash"],
    "MatMul 量化": ["量化", "quant", "quantize", "quantization", "matmul", "gemm"],
}
_PRECEDENCE = [
    "缓存加速",
    "通信掩盖 / 并行",
    "显存优化",
    "编译路径优化",
    "Attention 优化",
    "MatMul 量化",
]
DIRECTIONS = [(name, _KEYWORDS[name]) for name, _ in DIRECTIONS]
DIRECTION_ORDER = [name for name, _ in DIRECTIONS] + [OTHER]

# Support-matrix columns are joined to features by topic, named by these words.
MATRIX_TOPICS: list[tuple[str, list[str]]] = [
    ("sparse", ["稀疏", "sparse"]),
    ("quant", ["量化", "quant", "quantization"]),
    ("cache", ["cache", "缓存", "以存代算"]),
    ("parallel", ["并行", "parallel", "parallelism"]),
    (
        "fusion",
        ["融合算子", "算子融合", "pattern", "fused ops", "fused operators", "fused operator"],
    ),
    ("moe", ["moe", "专家", "expert"]),
]

# A feature about mixture-of-experts layers: only useful for a model that has them.
MOE_WORDS = ["moe", "专家", "expert", "eplb"]

_GENERIC = [
    "概述",
    "简介",
    "介绍",
    "原理",
    "特点",
    "接口",
    "说明",
    "使用",
    "用法",
    "示例",
    "样例",
    "参数",
    "返回",
    "签名",
    "注意",
    "限制",
    "约束",
    "迁移",
    "配置",
    "方式",
    "场景",
    "背景",
    "流程",
    "方法",
    "推荐",
    "定位",
    "问题",
    "补充",
    "命名",
    "速查",
    "代码",
    "设计",
    "实现",
    "理论",
    "适配",
    "准备",
    "安装",
    "依赖",
    "前提",
    "处理",
    "技巧",
    "支持的",
    "faq",
    "overview",
    "introduction",
    "principle",
    "usage",
    "example",
    "parameter",
    "argument",
    "return",
    "signature",
    "note",
    "limitation",
    "constraint",
    "migration",
    "configuration",
    "background",
    "interface",
    "reference",
    "install",
    "prerequisite",
    "troubleshoot",
    "api",
    "约定",
    "异常",
    "exception",
    "排查",
    "验证",
    "收益",
    "示意",
    "步骤",
    "教程",
    "troubleshooting",
    "description",
    "general",
    "technical",
    "handling",
    "integration",
    "process",
    "recommended",
    "method",
    "supported",
    "applicable",
    "scenario",
    "supplementary",
    "flow",
    "execution",
    "strategy",
    "策略",
    "benefit",
    "validation",
    "diagram",
    "tutorial",
    "step",
    "guide",
    "notes",
    "faq",
    "when to use",
    "code",
    "summary",
    "总结",
    "附录",
    "appendix",
]
# Headings that are generic only as a whole ("特性" alone, but "编译特性" names a feature).
_GENERIC_EXACT = {"特性", "features", "核心特性", "支持情况", "功能", "功能概述"}
# Below these headings everything is a usage example or a tutorial step, never a feature.
_EXAMPLE = ["示例", "样例", "使用方法", "用法", "example", "examples", "usage", "教程", "tutorial"]
_STEP = re.compile(r"^(?:第\s*[一二三四五六七八九十\d]+\s*步|step\s*\d+)", re.I)
# A whole doc that is a guide or an index, not a feature doc.
GUIDE_WORDS = ["指南", "guide", "readme", "index", "目录"]
# A path the docs reserve or do not support yet: never a feature row.
_UNSUPPORTED_TITLE = [
    "预留",
    "暂不支持",
    "不支持",
    "reserved",
    "unsupported",
    "not supported",
    "not yet supported",
]
_UNSUPPORTED_TEXT = re.compile(r"暂不支持|尚不支持|not (?:yet )?supported", re.I)
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*(\(\))?")

ALGORITHM_HEADERS = ("算法", "algorithm", "algo")
PARAM_HEADERS = (
    "参数",
    "参数名",
    "配置项",
    "parameter",
    "parameters",
    "param",
    "option",
    "选项",
    "name",
)
MODEL_HEADERS = ("模型", "model", "models", "模型名称", "model name")
HARDWARE_HEADERS = ("硬件", "hardware", "硬件型号", "产品")
REQUIRED_HEADERS = ("必选", "必填", "required", "mandatory")
_YES = {"✅", "✔", "✓", "√", "☑", "是", "y", "yes", "支持", "true"}
_NO = {"✖", "✘", "❌", "✗", "×", "x", "否", "n", "no", "不支持", "false", "-", "—"}


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


@functools.lru_cache(maxsize=4096)
def _word_pattern(word: str) -> re.Pattern:
    flags = 0 if word.isupper() else re.I
    return re.compile(rf"(?<![A-Za-z]){re.escape(word)}s?(?![A-Za-z])", flags)


def _has(text: str, word: str) -> bool:
    """Whole-word match for ASCII words ('FA' is not in 'fast'; 'DitCache' has 'cache'; 'MoE' is 'moe'),
    substring for CJK."""
    if word.isascii():
        pattern = _word_pattern(word)
        return pattern.search(text) is not None or pattern.search(_CAMEL.sub(" ", text)) is not None
    return word in text


def direction_of(texts: list[str]) -> str:
    """The direction of the first text (most specific first) that names one; else OTHER."""
    for text in texts:
        for name in _PRECEDENCE:
            if any(_has(text, word) for word in _KEYWORDS[name]):
                return name
    return OTHER


@functools.lru_cache(maxsize=1024)
def topic_of(column: str) -> str | None:
    """The topic a support-matrix column is about, e.g. '稀疏FA' -> 'sparse'.

    The column must be *named* by the topic word, with at most a short
    qualifier ("稀疏FA", "融合算子"): "Cache DiT + diffusers" is a framework.
    """
    for topic, words in MATRIX_TOPICS:
        for word in words:
            if _has(column, word):
                rest = re.sub(r"[\W_]", "", re.sub(re.escape(word), "", column, flags=re.I))
                if len(rest) <= 4:
                    return topic
    return None


def has_topic(texts: list[str], topic: str) -> bool:
    words = dict(MATRIX_TOPICS)[topic]
    return any(_has(t, w) for t in texts for w in words)


def is_generic(title: str) -> bool:
    """A heading that structures a feature's doc (原理, 参数说明, 使用示例...) rather than naming one."""
    bare = re.sub(r"^[\d.\s]+|[:：\s]+$", "", title).strip().lower()
    return (
        bare in _GENERIC_EXACT or is_example(title) or any(_has(title, word) for word in _GENERIC)
    )


def is_example(title: str) -> bool:
    """A usage-example or tutorial-step heading: nothing below it is a feature."""
    return _STEP.match(title.strip()) is not None or any(_has(title, word) for word in _EXAMPLE)


def is_step(title: str) -> bool:
    return _STEP.match(title.strip()) is not None


def is_unsupported(title: str, first_sentence: str = "") -> bool:
    """A path the docs reserve or do not support yet ("融合算子路径（预留）", "当前版本暂不支持...")."""
    return (
        any(_has(title, w) for w in _UNSUPPORTED_TITLE)
        or _UNSUPPORTED_TEXT.search(first_sentence) is not None
    )


def is_moe(texts: list[str]) -> bool:
    return any(_has(t, w) for t in texts for w in MOE_WORDS)


# Preference statements of the docs: strongest first; the first that matches decides.
_PREFERENCE: list[tuple[int, re.Pattern]] = [
    (-2, re.compile(r"不推荐优先使用|不推荐|不建议|not recommended|avoid", re.I)),
    (
        2,
        re.compile(
            r"推荐优先使用|优先使用|推荐首先|首先尝试|首选|recommended as (?:a|the) first choice|first choice|"
            r"preferred|\bprefer\b|try first",
            re.I,
        ),
    ),
    (-1, re.compile(r"备选|fallback|alternative", re.I)),
    (1, re.compile(r"推荐使用|推荐|建议使用|recommended", re.I)),
]


def preference(text: str) -> tuple[int, str]:
    """(score, the words that say so) of a preference statement; (0, "") when it states none."""
    for score, pattern in _PREFERENCE:
        m = pattern.search(text)
        if m:
            return score, m.group(0)
    return 0, ""


def is_identifier(title: str) -> bool:
    """A heading that is an API name, e.g. 'CacheConfig' or 'share_memory'."""
    return _IDENTIFIER.fullmatch(title.strip()) is not None


def header_is(cell: str, names: tuple[str, ...]) -> bool:
    return cell.strip().lower() in names


def flag(cell: str) -> bool | None:
    """A support flag cell as True/False; None when the cell is not a flag."""
    text = cell.replace("\ufe0f", "").strip().lower()
    if text in _YES:
        return True
    if text in _NO:
        return False
    return None


has_word = _has  # public name for other modules of bot.features
