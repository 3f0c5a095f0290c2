"""The catalog in code and references/strategies.md say the same thing."""

from pathlib import Path

import pytest

from bot.strategies import catalog

REFERENCE = Path(__file__).resolve().parents[1] / "references" / "strategies.md"


def test_ids_and_required_fields():
    assert catalog.IDS == (
        "block_size",
        "pipeline_depth",
        "multi_buffer",
        "vectorize",
        "data_reuse",
        "fewer_buffers",
        "vprefix",
    )
    for s in catalog.CATALOG:
        assert s.kinds and set(s.kinds) <= set(catalog.KINDS)
        assert s.applied in ("transform", "proposer")
    assert [s.priority for s in catalog.CATALOG] == sorted(s.priority for s in catalog.CATALOG)


def test_vprefix_is_style_only_and_planned_last():
    v = catalog.get("vprefix")
    assert v.style_only and v.gain is None and v.expected_gain == 0.0
    assert v.priority == max(s.priority for s in catalog.CATALOG)
    assert catalog.is_style("vprefix") and not catalog.is_style("block_size")


def test_rule_and_proposer_split():
    proposer = {s.id for s in catalog.CATALOG if s.applied == "proposer"}
    assert proposer == {"fewer_buffers", "data_reuse", "vectorize"}


def test_unknown_id_names_the_known_ones():
    with pytest.raises(KeyError, match="known: block_size"):
        catalog.get("blocksize")
    assert catalog.unknown_ids(["block_size", "warp_spec"]) == ["warp_spec"]


def test_reference_table_matches_the_code():
    assert catalog.markdown_table() in REFERENCE.read_text()
