"""bot.naming: the branch and ref names tunebot gives, written out by hand."""

from __future__ import annotations

import pytest

from bot import naming


def test_branches_of_a_run() -> None:
    run = naming.run_prefix("tunebot", "rms_norm")
    assert run == "tunebot/rms_norm"
    assert naming.op_prefix("tunebot", "demo/rms_norm") == "tunebot/rms_norm"
    assert naming.iteration_prefix(run) == "tunebot/rms_norm/v"
    assert naming.iteration_branch(run, 12) == "tunebot/rms_norm/v12"
    assert naming.delivery_branch("bots/perf", "gemm") == "bots/perf/gemm/best"
    assert naming.op_delivery_branch("tunebot", "proj/gemm") == "tunebot/gemm/best"
    assert naming.run_of_delivery("tunebot/gemm/best") == "tunebot/gemm"
    assert naming.run_of_delivery("tunebot/features-refresh") == "tunebot/features-refresh"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("tunebot/op/v1", True),
        ("tunebot/op/v10", True),
        ("tunebot/op/v", False),
        ("tunebot/op/v1x", False),
        ("tunebot/op/best", False),
        ("tunebot/op/sub/v1", False),
        ("tunebot/opx/v1", False),
    ],
)
def test_iteration_of_a_run(name: str, expected: bool) -> None:
    assert naming.is_iteration_of(name, "tunebot/op") is expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("refs/heads/tunebot/op/v3", True),
        ("tunebot/op/v3", True),
        ("tunebot/op/v3/x", False),
        ("tunebot/op/best", False),
        ("tunebot/op/version", False),
    ],
)
def test_ends_as_iteration(name: str, expected: bool) -> None:
    assert naming.ends_as_iteration(name) is expected


def test_tunebot_ref_namespaces() -> None:
    assert naming.archive_ref("20260101T120000", "tunebot/op/v1") == (
        "refs/tunebot/archive/20260101T120000/tunebot/op/v1"
    )
    assert naming.record_ref("demo/rms_norm") == "refs/tunebot/runs/demo/rms_norm"
    assert naming.RUN_RECORD_REFS == "refs/tunebot/runs/"
    assert naming.PROPOSAL_REFS == "refs/tunebot/proposals/"
    assert (
        naming.import_ref("refs/heads/tunebot/op/v1") == "refs/tunebot/import/heads/tunebot/op/v1"
    )
    for namespace in (naming.ARCHIVE_REFS, naming.PROPOSAL_REFS, naming.RUN_RECORD_REFS):
        assert namespace.startswith(naming.TUNEBOT_REFS)
    assert not naming.PRIVATE_IMPORT_REFS.startswith(naming.TUNEBOT_REFS)
