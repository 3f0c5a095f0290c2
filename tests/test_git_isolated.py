"""bot.git.isolated and bot.git.gitdir: the URL, the refs read as files, the private git dir, a push's refusals."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fakegithub.harness import git, make_world

from bot.git.gitdir import common_git_dir, read_refs
from bot.git.isolated import BadRemote, IsolatedGit, PushError, RefUpdate, repo_url


@pytest.mark.parametrize(
    ("server", "repo", "expected"),
    [
        ("https://github.com", "octo/kernels", "https://github.com/octo/kernels.git"),
        ("https://ghe.example.com/", "a-b/c.d_e", "https://ghe.example.com/a-b/c.d_e.git"),
        ("http://127.0.0.1:8080/html", "o/r", "http://127.0.0.1:8080/html/o/r.git"),
    ],
)
def test_repo_url_is_built_from_the_actions_variables(server, repo, expected):
    assert repo_url(server, repo) == expected


@pytest.mark.parametrize(
    ("server", "repo", "fragment"),
    [
        ("http://evil.example.com", "o/r", "https"),
        ("file:///tmp/x", "o/r", "https URL"),
        ("https://user:pw@github.com", "o/r", "user"),
        ("https://github.com?x=1", "o/r", "query"),
        ("https://github.com", "o/r/../../x", "owner/name"),
        ("https://github.com", "o", "owner/name"),
        ("https://github.com", "o/r --upload-pack=x", "owner/name"),
    ],
)
def test_repo_url_refuses_anything_else(server, repo, fragment):
    with pytest.raises(BadRemote, match=fragment) as err:
        repo_url(server, repo)
    assert err.value.exit_code == 2


def test_refs_are_read_as_files_loose_over_packed(tmp_path):
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", "r")
    (repo / "f").write_text("1")
    git(repo, "add", "f")
    git(repo, "commit", "-qm", "one")
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "branch", "tunebot/x/v1")
    git(repo, "pack-refs", "--all")
    (repo / "f").write_text("2")
    git(repo, "commit", "-qam", "two")
    second = git(repo, "rev-parse", "HEAD")
    git(repo, "branch", "-f", "tunebot/x/v1", second)  # loose now, the packed entry is older
    git(repo, "branch", "tunebot/x/v2", first)
    (repo / ".git" / "refs" / "heads" / "tunebot" / "x" / "junk").write_text("not a sha\n")
    assert read_refs(repo / ".git", "refs/heads/tunebot/x/") == {
        "refs/heads/tunebot/x/v1": second,
        "refs/heads/tunebot/x/v2": first,
    }
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "--detach", str(wt))
    assert common_git_dir(wt) == (repo / ".git").resolve()


def test_a_push_of_a_commit_not_built_on_the_tuned_one_is_refused(tmp_path):
    world = make_world(tmp_path)
    try:
        base = world.fake.git("rev-parse", "main")
        other = world.push_branch("unrelated", {"x": "y"}, "elsewhere", start="main")
        orphan_repo = world.dev
        git(orphan_repo, "checkout", "-q", "--orphan", "lonely")
        git(orphan_repo, "commit", "-q", "--allow-empty", "-m", "no parent")
        orphan = git(orphan_repo, "rev-parse", "HEAD")
        with IsolatedGit(world.fake.git_url, "t0ken", objects_from=orphan_repo / ".git") as g:
            g.verify_descends(base, {"refs/heads/tunebot/a/v1": other})  # descends: fine
            with pytest.raises(PushError, match="does not descend"):
                g.verify_descends(base, {"refs/heads/tunebot/a/v1": orphan})
            with pytest.raises(PushError, match="not a commit"):
                g.verify_descends(base, {"refs/heads/tunebot/a/v1": "0" * 40})
            with pytest.raises(PushError, match="not a tunebot ref"):
                g.push([RefUpdate("refs/heads/main", other)])
            with pytest.raises(PushError, match="not a tunebot ref"):
                g.push([RefUpdate("refs/heads/tunebot/../../main", other)])
        assert world.fake.git("rev-parse", "main") == base
    finally:
        world.fake.stop()


def test_a_wrong_token_fails_without_a_prompt_and_never_prints_the_token(tmp_path):
    world = make_world(tmp_path)
    try:
        base = world.fake.git("rev-parse", "main")
        with (
            IsolatedGit(world.fake.git_url, "wr0ng-s3cret", objects_from=world.dev / ".git") as g,
            pytest.raises(PushError) as err,
        ):
            g.push([RefUpdate("refs/heads/tunebot/a/v1", base)])
        assert "wr0ng-s3cret" not in str(err.value)
        assert "tunebot/a/v1" not in world.fake.branches()
    finally:
        world.fake.stop()


def test_the_private_dir_is_private_and_gone_afterwards(tmp_path):
    with IsolatedGit("https://github.com/o/r.git", None) as g:
        where = g.dir
        assert where is not None and oct(where.stat().st_mode & 0o777) == "0o700"
        assert not str(where).startswith(str(Path.cwd()))
        env = g.env(auth=True)
        assert env["GIT_CONFIG_GLOBAL"] == "/dev/null" and env["GIT_CONFIG_NOSYSTEM"] == "1"
        assert not any(k.startswith("GIT_CONFIG_KEY") for k in env)  # no token, no header
    assert not where.exists()
    with IsolatedGit("https://github.com/o/r.git", "tok") as g:
        env = g.env(auth=True)
        assert (
            env["GIT_CONFIG_KEY_0"] == "http.https://github.com/o/r.git.extraheader"
        )  # scoped to the URL
        assert "tok" not in " ".join(g._options())  # never in argv
    out = subprocess.run(["git", "--version"], check=True, capture_output=True, text=True).stdout
    assert out.startswith("git version")
