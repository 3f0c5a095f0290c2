"""Talking to a configured remote of the user's repository: fetch, and push with retry.

Pushes that carry a credential for a hostile checkout go through `bot.git.isolated` instead.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import git

from bot.errors import GitError
from bot.git import runner
from bot.git.branches import is_owned
from bot.git.refs import ref_sha
from bot.git.repository import has_commit

# Rejections a retry cannot fix: the remote's state or policy, or our own input.
_PERMANENT = (
    "non-fast-forward",
    "[rejected]",
    "fetch first",
    "stale info",
    "[remote rejected]",
    "does not appear to be a git repository",
    "no such remote",
    "does not match any",
    "invalid refspec",
    "authentication failed",
    "permission denied",
    "error: 403",
)


def _refspec_branch(spec: str) -> str | None:
    dst = spec.lstrip("+").split(":")[-1]
    if dst.startswith("refs/heads/"):
        return dst[len("refs/heads/") :]
    return None if dst.startswith("refs/") else dst


def push(
    repo: git.Repo, remote: str, refspecs: list[str], retries: int = 3, backoff_s: float = 1.0
) -> None:
    """Push `refspecs`, retrying transient failures (network, remote hiccups) with backoff.

    A rejection (non-fast-forward, hook, auth) is not retried. Force (`+`) and
    deletion (`:dst`) are allowed only for branches tunebot owns.
    """
    if not refspecs:
        return
    for spec in refspecs:
        forced = spec.startswith("+") or spec.startswith(":")
        branch = _refspec_branch(spec)
        if forced and (branch is None or not is_owned(repo, branch)):
            raise GitError(
                f"refusing to force-push '{spec}': only branches tunebot created may be forced or deleted."
            )
    attempt = 0
    while True:
        proc = runner.run(repo, "push", "--porcelain", remote, *refspecs, check=False)
        if proc.returncode == 0:
            return
        text = (proc.stdout + proc.stderr).decode(errors="replace")
        if any(marker in text.lower() for marker in _PERMANENT) or attempt >= retries:
            raise GitError(_push_message(remote, refspecs, text, attempt))
        time.sleep(backoff_s * (2**attempt))
        attempt += 1


def _push_message(remote: str, refspecs: list[str], text: str, attempt: int) -> str:
    lowered = text.lower()
    specs = " ".join(refspecs)
    if "non-fast-forward" in lowered or "fetch first" in lowered or "[rejected]" in lowered:
        return (
            f"push of {specs} to '{remote}' was rejected as non-fast-forward: the remote branch has "
            "commits tunebot does not have. Fetch and re-run; tunebot never force-pushes your "
            f"branches.\n{text.strip()}"
        )
    tries = f" after {attempt + 1} attempts" if attempt else ""
    return f"push of {specs} to '{remote}' failed{tries}:\n{text.strip()}"


def fetch_ref(repo: git.Repo, remote: str, src: str, dst: str) -> str | None:
    """Fetch `src` of `remote` into local ref `dst` (forced); its sha, or None when the fetch fails."""
    if not runner.succeeds(repo, "fetch", "-q", remote, f"+{src}:{dst}"):
        return None
    return ref_sha(repo, dst)


def ensure_commit(checkout: Path, sha: str, remote: str) -> None:
    """Fetch commit `sha` from `remote` into `checkout` unless it is there already.

    A failed fetch raises CalledProcessError, as the GitHub flow reports it.
    """
    if has_commit(checkout, sha):
        return
    # `-C` names the checkout in the command a failure report quotes
    proc = runner.run(checkout, "-C", str(checkout), "fetch", "--quiet", remote, sha, check=False)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(
            proc.returncode, proc.args, output=proc.stdout, stderr=proc.stderr
        )
