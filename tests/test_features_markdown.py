"""bot.features.markdown: the doc reader."""

from __future__ import annotations

from bot.features import markdown as md

DOC = """# 标题

intro

```python
# a comment, not a heading
from mindiesd import quantize
```

## FA 系列

 | 接口名 | 说明 |
 |:---|:---:|
 | [Wan2.1](https://x/y) | <ul><li>Atlas 800I A2 服务器</li><li>Atlas 300I DUO 推理卡</li></ul> |
 | `a\\|b` | ✅️ |

### 技术特点

## 技术特点

#### skipped a level

## rf_v2（RainFusion2.0）
"""


def test_headings_tree_and_fenced_code_is_not_a_heading():
    root = md.parse(DOC, title="doc")
    titles = [s.title for s in root.walk()]
    assert titles == [
        "doc",
        "标题",
        "FA 系列",
        "技术特点",
        "技术特点",
        "skipped a level",
        "rf_v2（RainFusion2.0）",
    ]
    title = root.children[0]
    assert title.code[0].lang == "python" and "# a comment" in title.code[0].text
    assert md.imports(title.code[0].text) == ["from mindiesd import quantize"]
    skipped = [s for s in root.walk() if s.title == "skipped a level"][0]
    assert skipped.parent.title == "技术特点" and skipped.level == 4


def test_anchors_are_github_slugs_made_unique():
    anchors = [s.anchor for s in md.parse(DOC).walk()][1:]
    assert anchors == [
        "标题",
        "fa-系列",
        "技术特点",
        "技术特点-1",
        "skipped-a-level",
        "rf_v2rainfusion20",
    ]
    assert md.slugify("Cache DiT + diffusers 特性&模型性能") == "cache-dit--diffusers-特性模型性能"
    assert md.slugify("补充内容 —— CFG 融合") == "补充内容--cfg-融合"


def test_tables_with_leading_space_links_lists_code_pipes_and_flags():
    section = [s for s in md.parse(DOC).walk() if s.title == "FA 系列"][0]
    table = section.tables[0]
    assert [md.cell_text(h) for h in table.header] == ["接口名", "说明"]
    first, second = table.rows
    assert md.cell_text(first[0]) == "Wan2.1"
    assert md.cell_items(first[1]) == ["Atlas 800I A2 服务器", "Atlas 300I DUO 推理卡"]
    assert md.cell_text(second[0]) == "a|b"
    assert md.cell_text(second[1]) == "✅"  # U+FE0F dropped


def test_signature_blocks_and_their_parameters():
    name, sig = md.signature("f(\n    a, b=1,\n    c: int = 2,\n    **kwargs\n) -> torch.Tensor")
    assert name == "f" and sig == "f(a, b=1, c: int = 2, **kwargs) -> torch.Tensor"
    assert md.signature_params(sig) == ["a", "b", "c", "**kwargs"]
    assert md.signature("out = f(a)") is None
    assert md.signature("f(a)\ng(b)") is None
    assert md.signature("RMSNorm(hidden_size, eps=1e-6)") == (
        "RMSNorm",
        "RMSNorm(hidden_size, eps=1e-6)",
    )


def test_import_lines_with_several_names_and_aliases():
    text = (
        "from mindiesd import CacheConfig, CacheAgent as CA\nfrom torch import nn\n"
        "  from mindiesd.offload import enable_offload  # x"
    )
    assert md.imports(text) == [
        "from mindiesd import CacheConfig, CacheAgent",
        "from mindiesd.offload import enable_offload",
    ]
    assert md.imports("from mindiesd import <接口名>") == []
