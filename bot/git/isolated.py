"""Talk to the repository's git remote from a git dir tunebot owns, never from the PR checkout.

On a self-hosted runner the code being tuned runs with the runner's rights and can rewrite
everything in the checkout: `.git/config` (`remote.origin.pushurl`, `url.*.insteadOf`,
`http.proxy`, `core.hooksPath`), `.git/hooks/*`, even the refs. A push from that checkout
with a credential would hand the credential to whatever the PR code configured. So:

- The URL is built from `GITHUB_SERVER_URL` and `GITHUB_REPOSITORY` (`repo_url`), never read
  from any git config.
- git runs with `GIT_DIR` set to a fresh bare directory (mode 0700, outside the checkout,
  created only when needed, removed afterwards), an environment built from scratch
  (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`, no inherited `GIT_*`), hooks off
  (`core.hooksPath=/dev/null`), only the URL's own protocol allowed, no redirects, no
  credential helpers, no prompts.
- The checkout's objects are borrowed read-only through `objects/info/alternates`; its refs
  are read as files (`bot.git.gitdir.read_refs`) and every SHA pushed must descend from the commit
  tunebot was authorized to tune (`verify_descends`).
- The token reaches git only through `GIT_CONFIG_*` in the environment of that one git
  process (never argv, which any user can read), as a header scoped to the URL.
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bot import naming
from bot.errors import TunebotError
from bot.git.gitdir import SHA

# Resolved once, when tunebot starts and before any PR code runs: a `git` that PR code later
# drops into a PATH directory is never picked up.
GIT = shutil.which("git") or "/usr/bin/git"
REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
REF = re.compile(r"^refs/(heads|tunebot)/[A-Za-z0-9_./-]+$")
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


class PushError(TunebotError):
    """The remote refused or could not be reached; the message carries git's own words (never the token)."""


class BadRemote(TunebotError):
    """GITHUB_SERVER_URL / GITHUB_REPOSITORY do not name a repository."""

    exit_code = 2


def repo_url(server_url: str, repo: str) -> str:
    """`<server>/<owner>/<name>.git`, validated: https (http only for a local test server), no user or query."""
    parts = urlsplit(server_url.strip())
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise BadRemote(
            f"GITHUB_SERVER_URL must be an https URL such as https://github.com (got {server_url[:80]!r})"
        )
    if parts.scheme == "http" and parts.hostname not in LOCAL_HOSTS:
        raise BadRemote(f"GITHUB_SERVER_URL must use https (got {server_url[:80]!r})")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise BadRemote("GITHUB_SERVER_URL must not carry a user, password, query or fragment")
    if not REPO.match(repo) or ".." in repo:
        raise BadRemote(f"GITHUB_REPOSITORY must be owner/name (got {repo[:80]!r})")
    return f"{server_url.strip().rstrip('/')}/{repo}.git"


@dataclass(frozen=True)
class RefUpdate:
    ref: str  # full destination ref on the remote: refs/heads/tunebot/<op>/v1
    sha: str
    force: bool = False  # tunebot's own refs (iterations, run records)
    lease: str | None = None  # force only if the remote ref is at this SHA now ("": only if absent)

    def refspec(self) -> str:
        return f"{'+' if self.force else ''}{self.sha}:{self.ref}"


class IsolatedGit:
    """A private bare git dir talking to `url` with `token`; use as a context manager."""

    def __init__(
        self,
        url: str,
        token: str | None,
        objects_from: Path | None = None,
        allowed: tuple[str, ...] = ("refs/heads/tunebot/", naming.TUNEBOT_REFS),
    ) -> None:
        self.url, self._token, self.objects_from = url, token, objects_from
        self.allowed = allowed  # the only ref namespaces a push may write: tunebot's own
        self.dir: Path | None = None
        self.scheme = urlsplit(url).scheme

    def __enter__(self) -> IsolatedGit:
        self.dir = Path(tempfile.mkdtemp(prefix="tunebot-git-"))  # 0700, ours alone
        self.run("init", "--quiet", "--bare", str(self.dir))
        if self.objects_from is not None:
            (self.dir / "objects" / "info" / "alternates").write_text(
                f"{(self.objects_from / 'objects').resolve()}\n"
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    # -- plumbing --------------------------------------------------------------
    def env(self, auth: bool = False) -> dict[str, str]:
        env = {
            "PATH": f"{Path(GIT).parent}:/usr/bin:/bin",
            "HOME": str(self.dir or tempfile.gettempdir()),
            "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ATTR_NOSYSTEM": "1",
        }
        if self.dir is not None:
            env["GIT_DIR"] = str(self.dir)
        if auth and self._token:
            basic = base64.b64encode(f"x-access-token:{self._token}".encode()).decode()
            env.update(
                {
                    "GIT_CONFIG_COUNT": "1",
                    "GIT_CONFIG_KEY_0": f"http.{self.url}.extraheader",
                    "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
                }
            )
        return env

    def _options(self) -> list[str]:
        allowed = (
            ["-c", f"protocol.{self.scheme}.allow=always"]
            if self.scheme in ("https", "http")
            else []
        )
        return [
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "protocol.allow=never",
            *allowed,
            "-c",
            "http.followRedirects=false",
            "-c",
            "credential.helper=",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.askPass=",
            "-c",
            "http.proxy=",
        ]

    def run(
        self, *args: str, auth: bool = False, input: bytes | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        cwd = str(self.dir or tempfile.gettempdir())
        proc = subprocess.run(
            [GIT, *self._options(), *args],
            check=False,
            cwd=cwd,
            env=self.env(auth),
            input=input,
            capture_output=True,
            stdin=None if input is not None else subprocess.DEVNULL,
            timeout=600,
        )
        if check and proc.returncode != 0:
            raise PushError(f"git {args[0]} failed: {self._clean(proc.stderr or proc.stdout)}")
        return proc

    def _clean(self, text: bytes) -> str:
        out = text.decode(errors="replace").strip()
        if self._token:
            out = out.replace(self._token, "***")
        return out[-2000:]

    # -- remote ----------------------------------------------------------------
    def ls_remote(self, *patterns: str) -> dict[str, str]:
        out = self.run("ls-remote", self.url, *patterns, auth=True).stdout.decode()
        return {
            ref: sha
            for sha, ref in (line.split("\t", 1) for line in out.splitlines() if "\t" in line)
        }

    def fetch(self, refspecs: list[str]) -> None:
        if refspecs:
            self.run(
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                self.url,
                *refspecs,
                auth=True,
            )

    def push(self, updates: list[RefUpdate]) -> None:
        if not updates:
            return
        for update in updates:
            if (
                not SHA.match(update.sha)
                or not REF.match(update.ref)
                or ".." in update.ref
                or not update.ref.startswith(self.allowed)
            ):
                raise PushError(
                    f"refusing to push {update.sha[:40]!r} to {update.ref[:120]!r}: not a tunebot ref and SHA"
                )
        leases = [f"--force-with-lease={u.ref}:{u.lease}" for u in updates if u.lease is not None]
        specs = [u.refspec() if u.lease is None else f"+{u.sha}:{u.ref}" for u in updates]
        proc = self.run(
            "push", "--porcelain", "--no-verify", *leases, self.url, *specs, auth=True, check=False
        )
        if proc.returncode != 0:
            text = self._clean(proc.stdout + proc.stderr)
            hint = ""
            if "non-fast-forward" in text or "stale info" in text or "fetch first" in text:
                hint = (
                    " The remote branch has commits tunebot did not make; tunebot never overwrites them. "
                    "Merge or delete that branch, then comment `/tune` again."
                )
            raise PushError(f"push to {self.url} failed.{hint}\n{text}")

    # -- objects -----------------------------------------------------------------
    def has_commit(self, sha: str) -> bool:
        return (
            SHA.match(sha) is not None
            and self.run("cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0
        )

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return (
            self.run("merge-base", "--is-ancestor", ancestor, descendant, check=False).returncode
            == 0
        )

    def verify_descends(self, base: str, shas: dict[str, str]) -> None:
        """Every SHA to push is a commit that descends from `base` (what tunebot was asked to tune)."""
        for ref, sha in shas.items():
            if not self.has_commit(sha):
                raise PushError(
                    f"{ref} points at {sha[:10]}, which is not a commit in the checkout"
                )
            if not self.is_ancestor(base, sha):
                raise PushError(
                    f"{ref} ({sha[:10]}) does not descend from the tuned commit {base[:10]}; "
                    "something rewrote tunebot's branches during the run, so nothing was pushed"
                )

    def commit_files(self, files: dict[str, bytes], message: str, parent: str | None = None) -> str:
        """A commit (in the private dir) whose tree holds `files` at the top level."""
        entries = []
        for name, data in sorted(files.items()):
            blob = self.run("hash-object", "-w", "--stdin", input=data).stdout.decode().strip()
            entries.append(f"100644 blob {blob}\t{name}\n")
        tree = self.run("mktree", input="".join(entries).encode()).stdout.decode().strip()
        args = [
            "-c",
            "user.name=tunebot",
            "-c",
            "user.email=tunebot@users.noreply.github.com",
            "commit-tree",
            tree,
            "-m",
            message,
        ] + (["-p", parent] if parent else [])
        return self.run(*args).stdout.decode().strip()

    def export_to(self, git_dir: Path, refs: dict[str, str]) -> None:
        """Copy the commits of `refs` ({ref: sha}) into the checkout's repository, under
        `refs/tunebot/import/<ref>` (the caller creates the branches itself).

        Only before any PR code ran in this job (the checkout's config is still the one actions/checkout
        wrote); hooks stay off and no credential is in this process's environment.
        """
        if not refs or self.dir is None:
            return
        tmp = {f"{naming.PRIVATE_IMPORT_REFS}{i}": sha for i, sha in enumerate(refs.values())}
        for ref, sha in tmp.items():
            self.run("update-ref", ref, sha)
        env = self.env()
        env["GIT_DIR"] = str(git_dir)
        specs = [
            f"+{tmp_ref}:{naming.import_ref(ref)}" for tmp_ref, ref in zip(tmp, refs, strict=True)
        ]
        proc = subprocess.run(
            [
                GIT,
                *self._options(),
                "-c",
                "protocol.file.allow=always",
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                f"file://{self.dir}",
                *specs,
            ],
            check=False,
            cwd=str(git_dir),
            env=env,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=600,
        )
        if proc.returncode != 0:
            raise PushError(
                f"could not copy {', '.join(refs)} into the checkout: {self._clean(proc.stderr)}"
            )

    def read_blob(self, rev: str, path: str) -> bytes | None:
        proc = self.run("cat-file", "blob", f"{rev}:{path}", check=False)
        return proc.stdout if proc.returncode == 0 else None
