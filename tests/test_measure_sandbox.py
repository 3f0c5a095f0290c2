"""The sandbox: real child processes that hang, crash, leak children and run out of memory."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from bot.measure.sandbox import (
    OUTPUT_KEEP_BYTES,
    child_env,
    describe_exit,
    is_secret,
    run_sandboxed,
    tail_of,
)

KERNELS = Path(__file__).parent / "measure_kernels"


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_ok_run_captures_stdout_and_stderr_in_order(tmp_path):
    r = run_sandboxed(
        py("import sys; print('one', flush=True); print('two', file=sys.stderr)"),
        tmp_path,
        timeout_s=30,
    )
    assert r.status == "ok" and r.returncode == 0
    assert r.output.index("one") < r.output.index("two")
    assert r.cwd == str(tmp_path)


def test_hang_is_killed_with_its_whole_process_group(tmp_path):
    marker = tmp_path / "grandchild.pid"
    # the child starts a grandchild that would outlive it, then hangs
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )
    r = run_sandboxed(py(code), tmp_path, timeout_s=2)
    assert r.status == "timeout" and r.timed_out
    assert "timed out after 2 s" in r.reason
    assert "started" in r.tail
    grandchild = int(marker.read_text())
    for _ in range(50):  # the kill is asynchronous; give the kernel a moment to reap
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"grandchild {grandchild} survived the timeout")


def test_segfault_names_the_signal(tmp_path):
    r = run_sandboxed([sys.executable, str(KERNELS / "segfault.py"), "--level", "L0"], tmp_path, 30)
    assert r.status == "error"
    assert r.signal_name == "SIGSEGV"
    assert "segmentation fault" in r.reason
    assert "about to read address 0" in r.tail


def test_nonzero_exit_keeps_the_tail(tmp_path):
    r = run_sandboxed(
        [sys.executable, str(KERNELS / "exit_nonzero.py"), "--level", "L0"], tmp_path, 30
    )
    assert (r.status, r.returncode, r.reason) == ("error", 7, "exit code 7")
    assert "kernel launch failed" in r.tail


def test_address_space_limit_turns_a_hog_into_an_out_of_memory_error(tmp_path):
    r = run_sandboxed(
        [sys.executable, str(KERNELS / "oom.py"), "--level", "L0"],
        tmp_path,
        60,
        memory_limit_mb=512,
    )
    assert r.status == "error"
    assert "MemoryError" in r.tail
    assert "out of memory" in r.reason


def test_sigkill_is_reported_as_a_possible_oom_kill(tmp_path):
    r = run_sandboxed([sys.executable, str(KERNELS / "sigkill.py"), "--level", "L0"], tmp_path, 30)
    assert r.status == "error" and r.signal_name == "SIGKILL"
    assert "out-of-memory" in r.reason


def test_missing_program_is_an_error_result_not_an_exception(tmp_path):
    r = run_sandboxed(["/nonexistent/tool", "--x"], tmp_path, 5)
    assert r.status == "error" and r.returncode is None
    assert "could not start /nonexistent/tool" in r.reason


def test_tail_keeps_the_last_lines():
    text = "\n".join(f"line {i}" for i in range(100))
    assert tail_of(text, lines=3) == "line 97\nline 98\nline 99"
    assert len(tail_of("x" * 10000, chars=50)) == 50


def test_describe_exit():
    assert describe_exit(3) == (None, "exit code 3")
    assert describe_exit(-11)[0] == "SIGSEGV"


def test_child_env_makes_the_bot_and_the_variant_dir_importable(tmp_path):
    env = child_env([tmp_path], env={"PYTHONPATH": "/already"})
    parts = env["PYTHONPATH"].split(os.pathsep)
    assert parts[0] == str(tmp_path) and parts[-1] == "/already"
    assert (Path(parts[1]) / "bot" / "measure" / "sandbox.py").is_file()


def test_kernels_get_no_forge_or_ci_credentials(tmp_path, monkeypatch):
    secrets = (
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_APP_PRIVATE_KEY",
        "GITHUB_APP_ID",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_URL",
        "ACTIONS_CACHE_URL",
    )
    for name in secrets:
        monkeypatch.setenv(name, "secret")
    monkeypatch.setenv("GITHUB_WORKSPACE", "kept")  # not a credential
    r = run_sandboxed(
        [sys.executable, str(KERNELS / "print_env.py"), "--level", "L0"],
        tmp_path,
        60,
        env=child_env([KERNELS]),
    )
    assert r.ok
    env = json.loads(next(line for line in r.output.splitlines() if line.startswith("ENV "))[4:])
    assert not [k for k in secrets if k in env] and env["GITHUB_WORKSPACE"] == "kept"
    assert is_secret("actions_step_debug") and not is_secret("GITHUB_SHA")


def test_background_grandchild_holding_the_output_does_not_stall_a_finished_run(tmp_path):
    marker = tmp_path / "bg.pid"
    code = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "print('done', flush=True)\n"
    )
    r = run_sandboxed(py(code), tmp_path, timeout_s=30)
    assert r.status == "ok" and not r.timed_out and r.duration_s < 30
    assert "done" in r.tail
    bg = int(marker.read_text())
    for _ in range(50):
        try:
            os.kill(bg, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"background process {bg} survived the evaluation")


def test_chatty_output_is_bounded_and_keeps_the_end(tmp_path):
    code = "for i in range(100000):\n    print('line', i)\nprint('THE END')\n"
    r = run_sandboxed(py(code), tmp_path, timeout_s=60)
    assert r.ok
    assert len(r.output.encode()) <= OUTPUT_KEEP_BYTES
    assert r.output.splitlines()[0].startswith("line ")  # no partial first line
    assert r.tail.endswith("THE END")
