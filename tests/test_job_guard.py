"""bot.forge.github.job_guard: what PR code never sees, what it cannot leave behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from bot.forge.github.job_guard import FileCommands, Sealed, seal, withheld


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_URL",
        "INPUT_TOKEN",
        "GITHUB_ENV",
        "GITHUB_PATH",
        "GITHUB_OUTPUT",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_STATE",
        "github_token",
    ],
)
def test_secrets_and_file_commands_are_withheld(name):
    assert withheld(name)


@pytest.mark.parametrize(
    "name", ["PATH", "HOME", "GITHUB_REPOSITORY", "GITHUB_SHA", "GITHUB_SERVER_URL", "RUNNER_TEMP"]
)
def test_plain_context_is_not_withheld(name):
    assert not withheld(name)


def test_seal_without_reexec_takes_the_values_out_of_the_environment(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "s3cret")
    monkeypatch.setenv("GITHUB_OUTPUT", "/tmp/out")
    monkeypatch.setenv("GITHUB_REPOSITORY", "o/r")
    sealed = seal(reexec=False)
    assert sealed.get("GITHUB_TOKEN") == "s3cret" and sealed.file_commands() == {
        "GITHUB_OUTPUT": "/tmp/out"
    }
    assert "GITHUB_TOKEN" not in os.environ and "GITHUB_OUTPUT" not in os.environ
    assert os.environ["GITHUB_REPOSITORY"] == "o/r"


def test_file_commands_are_put_back_as_they_were(tmp_path):
    env_file, path_file, new_file = tmp_path / "env", tmp_path / "path", tmp_path / "summary"
    env_file.write_text("A=1\n")
    path_file.write_text("")
    guard = FileCommands(
        {
            "GITHUB_ENV": str(env_file),
            "GITHUB_PATH": str(path_file),
            "GITHUB_STEP_SUMMARY": str(new_file),
        }
    )
    env_file.write_text("A=1\nLD_PRELOAD=/tmp/evil.so\n")
    new_file.write_text("# pwned")
    assert sorted(guard.restore()) == ["GITHUB_ENV", "GITHUB_STEP_SUMMARY"]
    assert env_file.read_text() == "A=1\n" and path_file.read_text() == "" and not new_file.exists()
    assert guard.restore() == []


# The re-exec itself (no secret left in /proc/<pid>/environ) is tested on the real CLI process by
# tests/test_github_security.py, whose hostile kernel reads every ancestor's environ.


def test_leftover_daemons_are_killed_by_the_subreaper(tmp_path):
    code = textwrap.dedent(f"""
        import os, time, pathlib
        from bot.forge.github.job_guard import become_subreaper, descendants, kill_descendants
        assert become_subreaper()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                pathlib.Path({str(tmp_path / "pid")!r}).write_text(str(os.getpid()))
                time.sleep(60)
                os._exit(0)
            os._exit(0)
        while not pathlib.Path({str(tmp_path / "pid")!r}).exists():
            time.sleep(0.01)
        time.sleep(0.1)
        pid = int(pathlib.Path({str(tmp_path / "pid")!r}).read_text())
        assert pid in descendants(), (pid, descendants())
        print(kill_descendants(), os.path.exists(f"/proc/{{pid}}"))
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    killed, alive = out.stdout.split()
    assert int(killed) >= 1 and alive == "False"


def test_sealed_lists_only_set_file_commands():
    assert Sealed({"GITHUB_ENV": "", "GITHUB_PATH": "/p", "GITHUB_TOKEN": "t"}).file_commands() == {
        "GITHUB_PATH": "/p"
    }


def test_the_guarded_process_is_not_dumpable_but_its_children_are():
    code = textwrap.dedent("""
        import ctypes, subprocess, sys
        from bot.forge.github.job_guard import make_undumpable
        assert make_undumpable()
        libc = ctypes.CDLL(None)
        child = subprocess.run([sys.executable, "-c", "import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"],
                               capture_output=True, text=True).stdout.strip()
        print(libc.prctl(3, 0, 0, 0, 0), child)
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "1"]
