""".github/workflows: zizmor finds nothing (offline, default persona) and the safety shape holds."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
NAMES = ("tune.yml", "review.yml", "refresh-features.yml", "ci.yml")
PINNED = re.compile(r"uses:\s*[\w.-]+/[\w./-]+@[0-9a-f]{40}\s+#\s*v\d+(\.\d+)*\s*$")
# Event fields and inputs someone else writes: never expanded into a script (pass them through env).
EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)
UNTRUSTED = re.compile(
    r"\bgithub\s*\.\s*head_ref\b"
    r"|\bgithub\s*\.\s*event\s*\.\s*(pull_request|comment|issue|review|inputs)\b"
    r"|\bgithub\s*\[\s*'(head_ref|event)'\s*\]"
    r"|(?<![\w.])inputs\s*[.\[]"
)


def untrusted_expressions(text: str) -> list[str]:
    """The `${{ }}` expressions in `text` that read text an outsider controls."""
    return [m.group(0) for m in EXPRESSION.finditer(text) if UNTRUSTED.search(m.group(1))]


def scripts(step: dict) -> list[str]:
    """What a step executes: its `run:` and, for actions/github-script, its `script:` input."""
    found = [step.get("run") or ""]
    if "github-script" in str(step.get("uses", "")):
        found.append(str((step.get("with") or {}).get("script") or ""))
    return found


def load(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def test_all_workflows_exist():
    assert sorted(p.name for p in WORKFLOWS.glob("*.yml")) == sorted(NAMES)


@pytest.mark.skipif(
    shutil.which("zizmor") is None,
    reason="zizmor is installed by the test extra (pip install -e '.[test]')",
)
def test_zizmor_reports_no_findings():
    out = subprocess.run(
        ["zizmor", "--offline", "--no-progress", str(WORKFLOWS)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No findings to report" in out.stdout


def test_every_zizmor_ignore_is_justified():
    for name in NAMES:
        for line in (WORKFLOWS / name).read_text().splitlines():
            if "zizmor: ignore[" in line:
                reason = line.split("]", 1)[1].strip()
                assert len(reason) > 20, (
                    f"{name}: an ignore needs a reason beside it: {line.strip()}"
                )


def test_actions_are_pinned_by_full_sha_with_the_tag_noted():
    for name in NAMES:
        for line in (WORKFLOWS / name).read_text().splitlines():
            if re.match(r"\s*(- )?uses:", line):
                assert PINNED.search(line), (
                    f"{name}: not pinned by SHA with a tag comment: {line.strip()}"
                )


def test_untrusted_text_never_reaches_a_script():
    for name in NAMES:
        for job in load(name)["jobs"].values():
            for step in job.get("steps", []):
                for script in scripts(step):
                    assert not untrusted_expressions(script), (
                        f"{name}: untrusted text in a script: {untrusted_expressions(script)}"
                    )


@pytest.mark.parametrize(
    "expr",
    [
        "github.head_ref",
        "github.event.pull_request.head.ref",
        "github.event.pull_request.title",
        "github.event.comment.body",
        "github.event.issue.title",
        "github.event.review.body",
        "inputs.ops",
        "github.event.inputs.ops",
        "github['head_ref']",
        "format('{0}', github.event.comment.body)",
        "inputs['ops']",
    ],
)
def test_the_untrusted_check_catches_each_source_in_run_and_github_script(expr):
    assert untrusted_expressions(f"echo ${{{{ {expr} }}}}")
    step = {
        "uses": "actions/github-script@0000000000000000000000000000000000000000",
        "with": {"script": f"core.info('${{{{ {expr} }}}}')"},
    }
    assert any(untrusted_expressions(s) for s in scripts(step))


@pytest.mark.parametrize(
    "expr",
    [
        "github.run_id",
        "needs.gate.outputs.head_sha",
        "github.event.repository.default_branch",
        "github.token",
        "steps.gate.outputs.inputs_seen",
    ],
)
def test_the_untrusted_check_lets_trusted_values_through(expr):
    assert not untrusted_expressions(f"echo ${{{{ {expr} }}}}")


def test_the_tune_checkout_keeps_no_credential_and_the_step_execs():
    tune = load("tune.yml")["jobs"]["tune"]
    for step in tune["steps"]:
        if "actions/checkout" in str(step.get("uses", "")):
            assert step["with"]["persist-credentials"] is False, step
    script = next(s for s in tune["steps"] if s.get("name") == "tune")["run"]
    assert all(
        line.strip().startswith("exec ")
        for line in script.splitlines()
        if "tunebot github handle" in line
    )


def test_every_job_has_a_timeout_and_workflows_start_without_permissions():
    for name in NAMES:
        wf = load(name)
        for job_name, job in wf["jobs"].items():
            assert isinstance(job.get("timeout-minutes"), int), (
                f"{name}:{job_name} lacks timeout-minutes"
            )
        if name != "ci.yml":
            assert wf["permissions"] == {}, f"{name}: top-level permissions must be empty"


def test_tune_workflow_gates_before_the_self_hosted_job():
    wf = load("tune.yml")
    assert wf["on"]["issue_comment"] == {"types": ["created"]}
    assert "workflow_dispatch" in wf["on"] and "schedule" in wf["on"]
    gate, tune = wf["jobs"]["gate"], wf["jobs"]["tune"]
    assert gate["runs-on"] == "ubuntu-latest"
    assert "write" not in str(gate["permissions"].get("contents", ""))
    assert "--phase gate" in str(gate["steps"])
    assert tune["needs"] == "gate" and tune["if"] == "needs.gate.outputs.authorized == 'true'"
    work = next(s for s in tune["steps"] if s.get("with", {}).get("path") == "work")
    assert work["with"]["ref"].startswith(
        "${{ needs.gate.outputs.head_sha"
    )  # exactly the pinned SHA
    script = next(s for s in tune["steps"] if s.get("name") == "tune")
    assert (
        script["env"]["HEAD_SHA"] == "${{ needs.gate.outputs.head_sha }}"
        and '--sha "$HEAD_SHA"' in script["run"]
    )


def test_tune_fans_out_one_job_per_op_and_a_report_job_aggregates():
    wf = load("tune.yml")
    gate, tune, report = wf["jobs"]["gate"], wf["jobs"]["tune"], wf["jobs"]["report"]
    assert {"matrix", "max_parallel"} <= set(gate["outputs"])
    strategy = tune["strategy"]
    assert strategy["matrix"] == "${{ fromJSON(needs.gate.outputs.matrix) }}"
    assert strategy["max-parallel"] == "${{ fromJSON(needs.gate.outputs.max_parallel) }}"
    assert strategy["fail-fast"] is False
    assert tune["runs-on"] == "${{ matrix.runs_on }}"
    assert "matrix.op" in tune["concurrency"]["group"]
    script = next(s for s in tune["steps"] if s.get("name") == "tune")
    assert script["env"]["OP"] == "${{ matrix.op }}" and script["run"].count('--op "$OP"') == 2
    assert report["needs"] == ["gate", "tune"] and report["if"].startswith("always()")
    assert report["runs-on"] == "ubuntu-latest" and report["permissions"]["contents"] == "read"
    assert "--phase report" in str(report["steps"])


def test_the_tune_job_starts_from_an_empty_work_directory():
    steps = load("tune.yml")["jobs"]["tune"]["steps"]
    assert "rm -rf" in steps[0].get("run", "") and "actions/checkout" in str(steps[1].get("uses"))


def test_review_workflow_runs_the_merge_gate_on_approvals_of_proposals():
    wf = load("review.yml")
    assert wf["on"]["pull_request_review"] == {"types": ["submitted"]}
    (job,) = wf["jobs"].values()
    assert "approved" in job["if"] and "tunebot/" in job["if"]
    assert job["runs-on"] == "ubuntu-latest"


def test_refresh_features_runs_on_schedule_and_dispatch():
    wf = load("refresh-features.yml")
    assert "schedule" in wf["on"] and "workflow_dispatch" in wf["on"]
    steps = str(wf["jobs"]["refresh"]["steps"])
    assert (
        "tunebot refresh-features" in steps and "--propose" in steps and "--forge github" in steps
    )
