"""A run killed while its records were in the old format (no schema_version) resumes with
today's code: nothing recorded is measured again, nothing is recorded twice, and the records
it appends carry the version."""

from __future__ import annotations

import json

import pytest
from test_loop import add_sleepy_op, git, records, tune

from bot.git import branches
from bot.run import records as rec


def test_a_run_killed_with_old_format_records_resumes_and_finishes(git_repo, monkeypatch):
    add_sleepy_op(git_repo)
    real_create = branches.create_branch

    def create_then_die(repo, name, sha):
        if name.endswith("/v2"):
            raise SystemExit("killed after the iter:2 record, before its branch")
        return real_create(repo, name, sha)

    monkeypatch.setattr(branches, "create_branch", create_then_die)
    with pytest.raises(SystemExit):
        tune(git_repo.path, max_iters=3)
    monkeypatch.setattr(branches, "create_branch", real_create)

    # the file as the previous tunebot wrote it: the same lines without schema_version
    path = git_repo.path / ".git/tunebot/runs/testproj/sleepy/results.jsonl"
    old = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for line in old:
        line.pop("schema_version")
    path.write_text(
        "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in old),
        encoding="utf-8",
    )
    assert [r["key"] for r in old] == ["start", "baseline", "iter:1", "iter:2"]

    outcome = tune(git_repo.path, max_iters=3)

    recs = records(git_repo.path)
    keys = [r["key"] for r in recs]
    assert keys[:4] == ["start", "baseline", "iter:1", "iter:2"]
    assert len(keys) == len(set(keys)) and "iter:3" in keys and "stop" in keys
    assert recs[:4] == old  # the old lines are kept as they were, never rewritten
    assert all(r["schema_version"] == rec.SCHEMA_VERSION for r in recs[4:])
    assert outcome.iterations == 3
    # v2's branch is recreated from its record
    for it in (r for r in recs if r["kind"] == "iteration"):
        assert git(git_repo.path, "rev-parse", it["branch"]) == it["sha"]
