"""The delivery follows the seed's product structure and templates, checked against the template text.

tests/data/seed/seed-template.md is the seed's own text (tile-ai/tilelang-mlir-ascend,
.agents/skills/tilelang-op-optimize/SKILL.md; see SOURCE.txt). The expectations below are
derived from that text, not from tunebot's renderers: the file tree, the 迭代记录 columns,
the 结论 keys and `最优版本: {op}.py (iter {N})`, and the Stage Result keys in order.
"""

from __future__ import annotations

import re
from pathlib import Path

from test_loop import OP_DIR, add_sleepy_op, git, records, tune

TEMPLATE = (Path(__file__).parent / "data/seed/seed-template.md").read_text(encoding="utf-8")


def _block(after: str, fence: str) -> list[str]:
    start = TEMPLATE.index(f"```{fence}", TEMPLATE.index(after)) + len(f"```{fence}\n")
    return TEMPLATE[start : TEMPLATE.index("```", start)].splitlines()


def seed_tree() -> list[str]:
    """File names under perf_opt/ as the seed's tree lists them, e.g. '{op}.py', '{op}_opt_v1.py'."""
    names = []
    for line in _block("## 4. 产物结构", "text")[1:]:
        m = re.search(r"[├└]── (\S+)", line)
        if m:
            names.append(m.group(1))
    return names


def seed_log() -> list[str]:
    return _block("### opt_log.md 模板", "markdown")


def seed_report_keys() -> list[str]:
    return [
        re.match(r"- (\w+):", line).group(1)
        for line in _block("## 5. 完成报告", "markdown")[1:]
        if line.strip()
    ]


def test_the_template_reads_as_expected():
    # guards the parsing helpers above against a silently empty expectation
    assert seed_tree() == [
        "{op}.py",
        "{op}_opt_v1.py",
        "{op}_opt_v2.py",
        "opt_log.md",
        "baseline.py",
    ]
    assert "- 最优版本: {op}.py (iter {N})" in seed_log()
    assert (
        seed_report_keys()[:3] == ["stage", "project", "operator"]
        and seed_report_keys()[-1] == "issues"
    )


def test_the_delivery_has_the_seed_files_and_every_iteration_file(git_repo):
    add_sleepy_op(git_repo, BLOCK=64)
    outcome = tune(git_repo.path, max_iters=3)
    iterations = [r for r in records(git_repo.path) if r["kind"] == "iteration"]
    tree = git(git_repo.path, "ls-tree", "-r", "--name-only", "tunebot/sleepy/best").splitlines()
    perf = f"{OP_DIR}/perf_opt/"
    for name in seed_tree():
        if "_opt_v" in name:
            continue  # one per iteration, checked below against the records
        assert perf + name.replace("{op}", "sleepy") in tree, name
    variants = sorted(p[len(perf) :] for p in tree if p.startswith(perf) and "_opt_v" in p)
    pattern = seed_tree()[1].replace("{op}", "sleepy").replace("1", "{}")
    assert variants == sorted(pattern.format(r["iteration"]) for r in iterations)
    assert outcome.iterations == len(iterations) >= 1


def test_opt_log_keeps_the_seed_columns_and_conclusion_exactly(git_repo):
    add_sleepy_op(git_repo, BLOCK=64)
    outcome = tune(git_repo.path, max_iters=3)
    log = git(
        git_repo.path, "show", f"tunebot/sleepy/best:{OP_DIR}/perf_opt/opt_log.md"
    ).splitlines()
    template = seed_log()
    # title and section headings, in the seed's order
    headings = [line for line in template if line.startswith("#")]
    assert [line for line in log if line.startswith("#")] == [
        h.replace("{op}", "sleepy") for h in headings
    ]
    # the table: the seed's five columns first, extra columns only after them
    seed_header = next(line for line in template if line.startswith("| iter"))
    header = next(line for line in log if line.startswith("| iter"))
    assert header.startswith(seed_header.rstrip())
    # 结论: the same keys in the same order, and 最优版本 exactly as the seed writes it
    conclusion = template[template.index("## 结论") + 1 :]
    ours = log[log.index("## 结论") + 1 :]
    assert [line.split(":")[0] for line in ours] == [line.split(":")[0] for line in conclusion]
    best_line = next(line for line in conclusion if line.startswith("- 最优版本"))
    expected = best_line.replace("{op}", "sleepy").replace("{N}", str(outcome.best_iteration))
    assert expected in ours
    assert re.fullmatch(r"- 中止原因: (达目标|迭代上限|连续无提升|策略耗尽|已取消)", ours[-1])


def test_the_completion_report_has_the_seed_keys_in_order(git_repo):
    add_sleepy_op(git_repo, BLOCK=64)
    outcome = tune(git_repo.path, max_iters=2)
    lines = outcome.report.splitlines()
    assert lines[0] == "## Stage Result"
    assert [re.match(r"- (\w+):", line).group(1) for line in lines[1:]] == seed_report_keys()
    assert f"- output: {OP_DIR}/perf_opt/sleepy.py" in lines
