"""bot.cli.features: refresh-features and advise from the command line (exit codes, output)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from conftest import snapshot_checkout

from bot.cli import main

ROOT = Path(__file__).parent.parent
DOCS = Path(__file__).parent / "data" / "mindiesd-docs"


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_refresh_writes_then_reports_unchanged(tmp_path):
    out = tmp_path / "features.md"
    first = invoke("refresh-features", "--docs-dir", str(DOCS), "--output", str(out))
    assert first.exit_code == 0 and "updated" in first.output and out.exists()
    second = invoke("refresh-features", "--docs-dir", str(DOCS), "--output", str(out), "--json")
    assert second.exit_code == 0 and json.loads(second.output)["status"] == "unchanged"


def test_missing_or_empty_docs_dir_exits_2(tmp_path):
    missing = invoke(
        "refresh-features", "--docs-dir", str(tmp_path / "nope"), "--output", str(tmp_path / "o.md")
    )
    assert (
        missing.exit_code == 2
        and "does not exist" in missing.output
        and "Traceback" not in missing.output
    )
    (tmp_path / "empty").mkdir()
    empty = invoke(
        "refresh-features",
        "--docs-dir",
        str(tmp_path / "empty"),
        "--output",
        str(tmp_path / "o.md"),
    )
    assert empty.exit_code == 2 and "no *.md" in empty.output
    assert not (tmp_path / "o.md").exists()


def test_propose_with_the_local_forge(git_repo, tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    before = snapshot_checkout(git_repo)
    args = (
        "refresh-features",
        "--docs-dir",
        str(docs),
        "--propose",
        "--repo",
        str(git_repo.path),
        "--base",
        "main",
    )
    first = invoke(*args, "--json")
    assert first.exit_code == 0, first.output
    data = json.loads(first.output)
    assert data["status"] == "proposed" and data["proposal"]["head"] == "tunebot/refresh-features"
    second = invoke(*args)
    assert second.exit_code == 0 and "up-to-date" in second.output
    assert snapshot_checkout(git_repo) == before


def test_github_forge_needs_its_environment(git_repo):
    result = invoke(
        "refresh-features",
        "--docs-dir",
        str(DOCS),
        "--propose",
        "--repo",
        str(git_repo.path),
        "--forge",
        "github",
        env={"GITHUB_TOKEN": "", "GITHUB_REPOSITORY": ""},
    )
    assert result.exit_code == 2 and "GITHUB_REPOSITORY" in result.output


def test_advise_prints_ranked_cited_recommendations(tmp_path):
    features = tmp_path / "features.md"
    invoke("refresh-features", "--docs-dir", str(DOCS), "--output", str(features))
    report = tmp_path / "analysis.json"
    report.write_text(
        json.dumps(
            {"layers": {"compute": {"matmul_pct": 20, "attention_pct": 50, "compiled": False}}}
        )
    )
    args = (
        "advise",
        "--report",
        str(report),
        "--hardware",
        "Atlas 800I A2",
        "--model",
        "Wan2.2",
        "--features",
        str(features),
    )
    text = invoke(*args)
    assert text.exit_code == 0
    assert (
        "P0 #1 " in text.output
        and f"cite: {features.as_posix()}#attention-优化 row 'FA量化'" in text.output
    )
    data = json.loads(invoke(*args, "--json").output)
    assert data["recommendations"][0]["priority"] == "P0" and data["nothing_applies"] is None
    assert {f["branch"] for f in data["findings"]} >= {
        "compute.attention",
        "memory",
        "communication",
        "compile",
        "cache",
    }


def test_advise_on_kernel_details_and_bad_input(tmp_path):
    features = tmp_path / "features.md"
    invoke("refresh-features", "--docs-dir", str(DOCS), "--output", str(features))
    csv = tmp_path / "kernel_details.csv"
    csv.write_text(
        "Name,Type,Accelerator Core,Duration(us)\nMatMulV2,MatMulV2,AI_CORE,70\nAdd,Add,AI_VECTOR_CORE,30\n"
    )
    ok = invoke(
        "advise",
        "--report",
        str(csv),
        "--hardware",
        "Atlas 800I A2",
        "--model",
        "Wan2.1",
        "--features",
        str(features),
    )
    assert ok.exit_code == 0 and "Linear量化" in ok.output and "Pattern 融合" in ok.output
    bad = tmp_path / "bad.json"
    bad.write_text('{"layers": {"compute": {"matmul_pct": 500}}}')
    result = invoke(
        "advise",
        "--report",
        str(bad),
        "--hardware",
        "A2",
        "--model",
        "x",
        "--features",
        str(features),
    )
    assert result.exit_code == 2 and "layers.compute.matmul_pct" in result.output
    nofile = invoke(
        "advise",
        "--report",
        str(csv),
        "--hardware",
        "A2",
        "--model",
        "x",
        "--features",
        str(tmp_path / "no.md"),
    )
    assert nofile.exit_code == 2 and "refresh-features" in nofile.output


def test_script_is_a_thin_entry_point(tmp_path):
    out = tmp_path / "features.md"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "refresh_features.py"),
            "--docs-dir",
            str(DOCS),
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_text(encoding="utf-8").startswith("# MindIE-SD 特性映射表")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "refresh_features.py"),
            "--docs-dir",
            str(tmp_path / "missing"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_propose_through_the_github_forge_is_one_pr_across_fresh_clones(tmp_path):
    from fakegithub.harness import make_world

    from bot.forge.github.client import make_client

    world = make_world(tmp_path)
    try:
        env = {
            "GITHUB_TOKEN": "t0ken",
            "GITHUB_REPOSITORY": world.fake.full_name,
            "GITHUB_API_URL": world.fake.base_url,
        }
        results = []
        for run in ("ci1", "ci2"):  # each scheduled run starts from a fresh clone
            clone = world.clone(tmp_path / run)
            result = invoke(
                "refresh-features",
                "--docs-dir",
                str(DOCS),
                "--propose",
                "--repo",
                str(clone),
                "--base",
                "main",
                "--forge",
                "github",
                "--json",
                env=env,
            )
            assert result.exit_code == 0, result.output
            results.append(json.loads(result.output))
        assert [r["status"] for r in results] == ["proposed", "up-to-date"]
        assert results[0]["commit"] == results[1]["commit"]
        pulls = list(
            make_client("t0ken", world.fake.base_url)
            .get_repo(world.fake.full_name)
            .get_pulls(state="open")
        )
        assert [(p.head.ref, p.base.ref) for p in pulls] == [("tunebot/refresh-features", "main")]
        assert "新增" in pulls[0].body
        world.fake.assert_no_violations()
    finally:
        world.fake.stop()
