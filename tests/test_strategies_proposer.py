"""External proposer protocol, driven with the deterministic script tests/proposers/fixed.py."""

import json
import os
import sys
import time
from pathlib import Path

import pytest

from bot.config.schema import OpConfig
from bot.strategies.base import Attempt, Change, PlanContext, Refusal, Variant
from bot.strategies.proposer import ExternalProposer, check_proposal, signatures
from bot.strategies.source import changed_lines, source_hash

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "proposers" / "fixed.py"
RMS = (ROOT / "examples" / "tilelang" / "rms_norm" / "rms_norm.py").read_text()
OP = OpConfig(project="tilelang", name="rms_norm", dir=Path("examples/tilelang/rms_norm"))


def proposer(mode: str, timeout_s: float = 30.0) -> ExternalProposer:
    return ExternalProposer((sys.executable, str(SCRIPT), mode), cwd=ROOT, timeout_s=timeout_s)


def ctx(**kw) -> PlanContext:
    return PlanContext(best_source=RMS, **kw)


def test_a_valid_proposal_becomes_a_variant_with_its_description():
    v = proposer("vectorize").propose(OP, "vectorize", ctx(), set())
    assert isinstance(v, Variant), v
    assert v.change.strategy == "vectorize"
    assert v.change.description == "gamma multiply: scalar T.Parallel loop -> T.npuir_mul"
    removed = [old for old, _ in changed_lines(RMS, v.source) if old]
    assert removed == [
        "                for i, j in T.Parallel(block_M, hidden):",
        "                    x_ub[i, j] = x_ub[i, j] * gamma_ub[0, j]",
    ]
    assert (
        v.source_hash == source_hash(v.source)
        and "+                T.npuir_mul(x_ub, gamma_ub, x_ub)" in v.diff
    )


def test_without_a_description_the_change_names_the_proposer_script():
    v = proposer("comment").propose(OP, "data_reuse", ctx(), set())
    assert isinstance(v, Variant) and v.change.description == "data_reuse proposal by fixed.py"
    assert ExternalProposer(("/opt/agents/coder", "--fast")).name == "coder"


def test_the_context_file_carries_the_protocol_fields(tmp_path, monkeypatch):
    copy = tmp_path / "ctx.json"
    monkeypatch.setenv("PROPOSER_CONTEXT_COPY", str(copy))
    history = (
        Attempt(
            Change("block_size", "block_M: 16 -> 32", "block_M", 16, 32),
            "a" * 64,
            "b" * 64,
            "not_better",
            -0.02,
        ),
    )
    proposer("comment").propose(
        OP,
        "fewer_buffers",
        ctx(
            history=history,
            profile_summary={"best_us": 61.5},
            last_failure="L0 failed: max abs err 0.3",
        ),
        set(),
    )
    data = json.loads(copy.read_text())
    assert data["protocol"] == 1
    assert data["op"]["qualified"] == "tilelang/rms_norm" and data["op"]["entry"] == "kernel"
    assert data["strategy"]["id"] == "fewer_buffers" and data["strategy"]["expected_gain"] == [
        0.05,
        0.10,
    ]
    assert data["profile_summary"] == {"best_us": 61.5}
    assert data["previous_failure"] == "L0 failed: max abs err 0.3"
    assert (
        data["history"][0]["description"] == "block_M: 16 -> 32"
        and data["history"][0]["verdict"] == "not_better"
    )
    assert data["best_source_hash"] == source_hash(RMS)
    assert not Path(data["best_source_path"]).exists()  # the scratch dir is cleaned up


@pytest.mark.parametrize(
    "mode, reason",
    [
        ("invalid", "not valid Python: line"),
        ("signature", "changes the kernel's signature: @prim_func rms_norm.rmsNorm"),
        ("reference", "changes the accuracy check: function reference was edited"),
        ("identical", "identical to the best-so-far source"),
        ("fail", "the proposer exited 3: cannot help with this kernel"),
        ("nothing", "wrote nothing"),
    ],
)
def test_bad_proposals_are_rejected_with_a_recorded_reason(mode, reason):
    r = proposer(mode).propose(OP, "data_reuse", ctx(), set())
    assert isinstance(r, Refusal) and not r.exhausted
    assert reason in r.reason
    assert r.attempt is not None and r.attempt.verdict == "rejected"
    assert r.attempt.change.strategy == "data_reuse" and r.attempt.parent_hash == source_hash(RMS)
    assert reason in r.attempt.change.description


def test_a_proposal_identical_to_an_evaluated_source_is_rejected():
    first = proposer("comment").propose(OP, "vectorize", ctx(), set())
    assert isinstance(first, Variant)
    again = proposer("comment").propose(OP, "vectorize", ctx(), {first.source_hash})
    assert isinstance(again, Refusal) and "identical to an already evaluated source" in again.reason
    assert again.attempt is not None and again.attempt.source_hash == first.source_hash


def test_timeout_kills_the_proposer_and_its_children(tmp_path, monkeypatch):
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("PROPOSER_PID_FILE", str(pid_file))
    r = proposer("sleep", timeout_s=1.5).propose(OP, "vectorize", ctx(), set())
    assert isinstance(r, Refusal) and "timed out after 1.5 s" in r.reason
    child = int(pid_file.read_text())
    for _ in range(50):  # the kill is asynchronous: wait for the child to be reaped by init
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def test_a_missing_command_is_a_clear_rejection():
    r = ExternalProposer(("/nonexistent/agent",)).propose(OP, "vectorize", ctx(), set())
    assert isinstance(r, Refusal) and "proposer command not found: /nonexistent/agent" in r.reason


def test_argv_is_never_a_shell_string():
    with pytest.raises(ValueError):
        ExternalProposer(())
    # a shell metacharacter is just an argument: nothing is interpreted
    r = ExternalProposer(("echo hi; touch /tmp/tunebot-pwned",)).propose(
        OP, "vectorize", ctx(), set()
    )
    assert (
        isinstance(r, Refusal)
        and "not found" in r.reason
        and not Path("/tmp/tunebot-pwned").exists()
    )


def test_signatures_cover_prim_funcs_and_the_entry():
    sigs = signatures(RMS, "kernel")
    assert set(sigs) == {"@prim_func rms_norm.rmsNorm", "entry kernel"}
    changed = RMS.replace("def kernel(x, gamma):", "def kernel(x, gamma, beta=None):")
    assert "entry kernel" in (check_proposal(RMS, changed, set(), "kernel") or "")


def test_a_proposer_that_exits_0_leaving_a_background_child_is_accepted_at_once(
    tmp_path, monkeypatch
):
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("PROPOSER_PID_FILE", str(pid_file))
    start = time.monotonic()
    v = proposer("background", timeout_s=20).propose(OP, "vectorize", ctx(), set())
    assert isinstance(v, Variant), v
    assert time.monotonic() - start < 10  # not held until `sleep 30` closes the output
    child = int(pid_file.read_text())
    for _ in range(50):  # the process group is killed when the proposer returns
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)


def test_the_proposer_gets_no_forge_or_ci_credentials(tmp_path, monkeypatch):
    copy = tmp_path / "env.json"
    monkeypatch.setenv("PROPOSER_ENV_COPY", str(copy))
    for name in (
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_APP_PRIVATE_KEY",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_URL",
        "ACTIONS_CACHE_URL",
    ):
        monkeypatch.setenv(name, "secret")
    monkeypatch.setenv("MY_AGENT_KEY", "kept")
    assert isinstance(proposer("env").propose(OP, "vectorize", ctx(), set()), Variant)
    env = json.loads(copy.read_text())
    assert "secret" not in env.values() and env["MY_AGENT_KEY"] == "kept"


MAIN_OLD = (
    "    torch.testing.assert_close(kernel(*inputs), reference(*inputs), rtol=1e-4, atol=1e-4)\n"
)


@pytest.mark.parametrize(
    "old, new, reason",
    [
        (
            "def reference(x, gamma):\n",
            "def reference(x, gamma):\n    return kernel(x, gamma)\n",
            "function reference was edited",
        ),
        (
            "    torch.manual_seed(seed)\n",
            "    torch.manual_seed(0)\n",
            "function get_inputs was edited",
        ),
        (
            MAIN_OLD,
            MAIN_OLD.replace("1e-4", "1.0"),
            '`if __name__ == "__main__":` block was edited',
        ),
        ('if __name__ == "__main__":', "if False:", '`if __name__ == "__main__":` block is gone'),
        (
            "def get_inputs(seed: int = 0):",
            "def make_inputs(seed: int = 0):",
            "function get_inputs is gone",
        ),
    ],
)
def test_a_proposal_may_not_touch_the_accuracy_check(old, new, reason):
    assert old in RMS
    got = check_proposal(RMS, RMS.replace(old, new, 1), set(), "kernel")
    assert got is not None and got.startswith("changes the accuracy check: ") and reason in got


def test_the_configured_inputs_and_reference_names_are_protected():
    src = RMS.replace("def reference(", "def ref_program(").replace(
        "reference(*inputs)", "ref_program(*inputs)"
    )
    weakened = src.replace(
        "def ref_program(x, gamma):\n", "def ref_program(x, gamma):\n    return kernel(x, gamma)\n"
    )
    assert (
        check_proposal(src, weakened, set(), "kernel") is None
    )  # not the configured name: unprotected
    assert "function ref_program was edited" in check_proposal(
        src, weakened, set(), "kernel", reference="ref_program"
    )


def test_kernel_bodies_may_change():
    body = RMS.replace(
        "return rms_norm(ROWS, HIDDEN, block_M=16)(x, gamma)",
        "return rms_norm(ROWS, HIDDEN, block_M=32)(x, gamma)",
    )
    body = body.replace(
        "T.npuir_rsqrt(sum_ub, sum_ub)",
        "T.npuir_rsqrt(sum_ub, sum_ub)  # same\n                pass",
    )
    assert body != RMS and check_proposal(RMS, body, set(), "kernel") is None


TWIN = """
import tilelang.language as T

def build_a(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float16")):
        pass
    return main

def build_b(n):
    @T.prim_func
    def main(B: T.Tensor((n,), "float16")):
        pass
    return main
"""


def test_nested_prim_funcs_with_the_same_name_are_each_checked():
    assert set(signatures(TWIN)) == {"@prim_func build_a.main", "@prim_func build_b.main"}
    # renaming the first one's parameter must be seen even though the second has the same name
    changed = TWIN.replace("def main(A:", "def main(Z:")
    assert "@prim_func build_a.main" in (check_proposal(TWIN, changed, set()) or "")
