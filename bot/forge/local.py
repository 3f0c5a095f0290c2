"""The local forge: proposals kept in the git repository itself (see docs/local-forge.md).

Proposal N is the ref `refs/tunebot/proposals/N`, a chain of commits whose tree
holds one file, proposal.json. Every edit (open, update, approve, merge) is a new
commit on that chain, so `git log -p refs/tunebot/proposals/N` is its history.
No branch, index or working file is touched by storing a proposal; only `merge`
moves the base branch (through merge.merge_into, which guards the user's work).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bot import fs, naming
from bot.errors import GitError, TunebotError
from bot.forge.base import MergeBlocked, Proposal, ProposalNotFound
from bot.git import branches, commits, merge, refs, repository

REF_PREFIX = naming.PROPOSAL_REFS
FILE = "proposal.json"
_FIELDS = {f.name for f in dataclasses.fields(Proposal)}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def sanitize(name: str) -> str:
    """A branch name as one safe file name: 'tunebot/rms_norm' -> 'tunebot__rms_norm'."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name.replace("/", "__")) or "_"


class LocalForge:
    """Forge protocol over refs/tunebot/proposals/* in the repo at `repo_path`.

    `keep_branches` / `branch_prefix` default to .tunebot.yml's values; they decide
    whether merge deletes the iteration branches `<prefix>/<op>/v<N>`.
    `status_head` names the status file post_status writes when no head is given.
    """

    def __init__(
        self,
        repo_path: Path | str,
        keep_branches: bool | None = None,
        branch_prefix: str | None = None,
        status_head: str | None = None,
    ) -> None:
        self.repo = repository.open_repo(repo_path)
        self._keep_branches = keep_branches
        self._branch_prefix = branch_prefix
        self.status_head = status_head

    # ------------------------------------------------------------ storage

    def _ref(self, proposal_id: str) -> str:
        return f"{REF_PREFIX}{proposal_id}"

    def _load(self, proposal_id: str) -> tuple[dict[str, Any], str]:
        """(record, commit sha) of proposal `proposal_id`; ProposalNotFound if there is none."""
        proposal_id = str(proposal_id).lstrip("#")
        sha = refs.ref_sha(self.repo, self._ref(proposal_id)) if proposal_id.isdigit() else None
        if sha is None:
            known = ", ".join(f"#{i}" for i in self._ids()) or "none yet"
            raise ProposalNotFound(
                f"no proposal #{proposal_id} (known: {known}). List them with `tunebot proposals --all`."
            )
        text = repository.read_file(self.repo, sha, FILE)
        return json.loads(text), sha

    def _save(self, record: dict[str, Any], parent: str | None, action: str) -> None:
        data = json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False).encode() + b"\n"
        message = f"proposal #{record['id']}: {action}"
        sha = commits.commit_files(self.repo, parent, {FILE: data}, message)
        refs.set_ref(self.repo, self._ref(record["id"]), sha, parent)

    def _ids(self) -> list[int]:
        names = refs.list_refs(self.repo, REF_PREFIX)
        return sorted(int(n[len(REF_PREFIX) :]) for n in names if n[len(REF_PREFIX) :].isdigit())

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with fs.file_lock(repository.state_dir(self.repo) / "forge.lock"):
            yield

    def _proposal(self, record: dict[str, Any]) -> Proposal:
        fields = {k: v for k, v in record.items() if k in _FIELDS}
        proposal = Proposal(**fields)
        if proposal.state == "open":
            # Like a pull request, an open proposal follows its branch.
            current = refs.branch_sha(self.repo, proposal.head)
            proposal.head_sha = current or proposal.head_sha
        return proposal

    # ------------------------------------------------------------ settings

    def _settings(self) -> tuple[bool, str]:
        keep, prefix = self._keep_branches, self._branch_prefix
        if keep is None or prefix is None:
            from bot.config.repo import load_repo_config

            cfg = load_repo_config(Path(self.repo.working_tree_dir or "."))
            keep = cfg.keep_branches if keep is None else keep
            prefix = cfg.branch_prefix if prefix is None else prefix
        return keep, prefix

    # ------------------------------------------------------------ Forge protocol

    def find_proposal(self, head: str) -> Proposal | None:
        for proposal in self.list_proposals("open"):
            if proposal.head == head:
                return proposal
        return None

    def list_proposals(self, state: str | None = "open") -> list[Proposal]:
        found = [self._proposal(self._load(str(i))[0]) for i in self._ids()]
        return [p for p in found if state is None or p.state == state]

    def get(self, proposal_id: str) -> Proposal:
        return self._proposal(self._load(proposal_id)[0])

    def propose(
        self, head: str, base: str, title: str, body: str, labels: list[str] | None = None
    ) -> Proposal:
        head_sha = refs.branch_sha(self.repo, head)
        if head_sha is None:
            raise GitError(
                f"cannot propose '{head}': no such branch. Run the tune that creates it first."
            )
        if refs.branch_sha(self.repo, base) is None:
            raise GitError(
                f"cannot propose into '{base}': no such branch. Pass an existing base branch."
            )
        with self._locked():
            existing = self.find_proposal(head)
            if existing is None:
                return self._open(head, base, title, body, labels or [], head_sha)
            record, parent = self._load(existing.id)
            update = {
                "base": base,
                "title": title,
                "body": body,
                "labels": list(labels or []),
                "head_sha": head_sha,
            }
            if all(record.get(k) == v for k, v in update.items()):
                return self._proposal(record)  # nothing changed: no new history entry
            record.update(update, updated=_now())
            self._save(record, parent, "update")
            return self._proposal(record)

    def _open(
        self, head: str, base: str, title: str, body: str, labels: list[str], head_sha: str
    ) -> Proposal:
        ids = self._ids()
        new_id = str(ids[-1] + 1 if ids else 1)
        proposal = Proposal(
            id=new_id,
            title=title,
            body=body,
            head=head,
            base=base,
            head_sha=head_sha,
            labels=labels,
        )
        record = dataclasses.asdict(proposal) | {
            "created": _now(),
            "updated": _now(),
            "approvals": [],
        }
        self._save(record, None, f"open {head} -> {base}")
        return self._proposal(record)

    def approve(self, proposal_id: str, reviewer: str) -> Proposal:
        if not reviewer or not reviewer.strip():
            raise TunebotError("an approval needs a reviewer name (pass --reviewer NAME).")
        with self._locked():
            record, parent = self._load(proposal_id)
            if record["state"] != "open":
                raise MergeBlocked(
                    f"proposal #{record['id']} is {record['state']}; only open proposals are approved."
                )
            head_sha = self._current_head(record)
            record["approved_sha"] = head_sha
            record.setdefault("approvals", []).append(
                {"reviewer": reviewer, "sha": head_sha, "time": _now()}
            )
            record["updated"] = _now()
            self._save(record, parent, f"approved by {reviewer} at {head_sha[:12]}")
            return self._proposal(record)

    def merge(self, proposal_id: str) -> Proposal:
        """Merge an approved proposal, then delete its iteration branches.

        Re-running after a crash is safe: a merge already in the base is not
        redone, and a cleanup left unfinished is finished.
        """
        with self._locked():
            record, parent = self._load(proposal_id)
            if record["state"] == "merged" and not record.get("cleaned"):
                return self._cleanup(record, parent)
            head_sha = self._check_gates(record)
            message = f"Merge proposal #{record['id']}: {record['title']}\n\nfrom {record['head']} at {head_sha}\n"
            merged = merge.merge_into(self.repo, record["base"], head_sha, message)
            record.update(
                state="merged",
                head_sha=head_sha,
                merged_sha=merged,
                merged_at=_now(),
                updated=_now(),
            )
            self._save(record, parent, f"merged into {record['base']} at {merged[:12]}")
            return self._cleanup(record, refs.ref_sha(self.repo, self._ref(record["id"])))

    def close(self, proposal_id: str) -> Proposal:
        """Close an open proposal without merging (its branches stay)."""
        with self._locked():
            record, parent = self._load(proposal_id)
            if record["state"] != "open":
                raise MergeBlocked(f"proposal #{record['id']} is already {record['state']}.")
            record.update(state="closed", updated=_now())
            self._save(record, parent, "closed")
            return self._proposal(record)

    def post_status(self, text: str, head: str | None = None) -> None:
        """Write the run's status to state_dir/status/<head-branch-sanitized>.md (replaced atomically)."""
        folder = repository.state_dir(self.repo) / "status"
        folder.mkdir(exist_ok=True)
        fs.write_atomic(folder / f"{sanitize(head or self.status_head or 'run')}.md", text.encode())

    def status_path(self, head: str | None = None) -> Path:
        return (
            repository.state_dir(self.repo)
            / "status"
            / f"{sanitize(head or self.status_head or 'run')}.md"
        )

    # ------------------------------------------------------------ gates and cleanup

    def _current_head(self, record: dict[str, Any]) -> str:
        head_sha = refs.branch_sha(self.repo, record["head"])
        if head_sha is None:
            raise MergeBlocked(
                f"proposal #{record['id']}: head branch '{record['head']}' no longer exists; "
                "re-run the tune to recreate it."
            )
        return head_sha

    def _check_gates(self, record: dict[str, Any]) -> str:
        """The head sha to merge, or MergeBlocked naming the first gate not met."""
        pid = record["id"]
        if record["state"] != "open":
            raise MergeBlocked(f"proposal #{pid} is already {record['state']}; nothing to merge.")
        head_sha = self._current_head(record)
        approved = record.get("approved_sha")
        if not approved:
            raise MergeBlocked(
                f"proposal #{pid} is not approved. Review it, then run `tunebot approve {pid}`."
            )
        if approved != head_sha:
            raise MergeBlocked(
                f"proposal #{pid} was approved at {approved[:12]}, but {record['head']} is now at {head_sha[:12]}: "
                f"the approval does not cover the new commits. Review them, then run `tunebot approve {pid}` again."
            )
        return head_sha

    def _cleanup(self, record: dict[str, Any], parent: str | None) -> Proposal:
        """Delete tunebot's iteration branches of the merged op (unless configured to keep them).

        A branch tunebot made but someone moved or re-created since is theirs: it
        stays, and the proposal records why under `kept_branches`.
        """
        keep, prefix = self._settings()
        head = record["head"]
        result = branches.DeleteResult()
        if not keep and head.startswith(prefix + "/"):
            op_name = head[len(prefix) + 1 :].split("/")[0]
            result = branches.cleanup_iteration_branches(self.repo, op_name, prefix)
        deleted = result.deleted
        record.update(cleaned=True, deleted_branches=deleted)
        if result.skipped:
            record["kept_branches"] = dict(result.skipped)
        self._save(record, parent, f"cleaned up {len(deleted)} iteration branches")
        return self._proposal(record)
