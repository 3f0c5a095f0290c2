"""A run's records on the remote, so a fresh (ephemeral) runner resumes or recognises it.

The loop keeps a run in `.git/tunebot/runs/<project>/<op>/results.jsonl` and its commits on
`tunebot/<op>/v<N>` and `tunebot/<op>/best`. A re-run on another runner has none of that, so:

- after each op (whatever its outcome) the records are pushed as `refs/tunebot/runs/<project>/<op>`,
  a commit whose tree holds `results.jsonl` (tunebot's own ref, replaced on every save);
- before any PR code runs, `restore()` fetches those refs and the op's branches and puts them
  where the loop looks (only for ops that have no local records), so the loop resumes;
- `finished()` tells a delivered run (proposal recorded) from one still to do.

Every remote operation goes through `IsolatedGit` (explicit URL, private git dir, no hooks,
no config of the checkout, the token in that git process only, after PR code's leftovers died).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot import naming
from bot import run_state as rs
from bot.git.gitdir import common_git_dir, read_refs
from bot.git.isolated import IsolatedGit, PushError, RefUpdate

RESULTS = "results.jsonl"
TRIGGER = "trigger"  # what started the run that wrote the records: a comment, a workflow run


def local_records(checkout: Path, op: str) -> Path:
    return common_git_dir(checkout) / "tunebot" / "runs" / op / RESULTS


@dataclass(frozen=True)
class Finished:
    proposal_id: str  # "" when the run proposes nothing (no gain, nothing to try, cancelled)
    proposal_url: str
    base_sha: str
    no_proposal: str = ""  # why nothing is proposed
    cancelled: bool = False


def finished(checkout: Path, op: str, base_sha: str) -> Finished | None:
    """The recorded run of `op` at `base_sha` is complete: delivered, and proposed or deliberately not."""
    path = local_records(checkout, op)
    if not path.is_file():
        return None
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    state = rs.replay(records)
    if not state.start or state.start.get("base_sha") != base_sha or not state.delivery:
        return None
    if state.proposal:
        return Finished(
            str(state.proposal.get("id")), str(state.proposal.get("url") or ""), base_sha
        )
    from bot import delivery
    from bot.loop import CANCELLED

    why = delivery.run_verdict(state)[1]
    if not why:
        return None  # delivered, proposal not yet opened: the loop resumes and opens it
    return Finished(
        "", "", base_sha, no_proposal=why, cancelled=(state.stop or {}).get("reason") == CANCELLED
    )


def recorded_base(checkout: Path, op: str) -> str | None:
    path = local_records(checkout, op)
    if not path.is_file():
        return None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("kind") == rs.START:
            return rec.get("base_sha")
    return None


def _delivery_sha(records_text: str) -> str | None:
    for line in records_text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("kind") == rs.DELIVERY:
            return rec.get("sha")
    return None


def _recorded_shas(records_text: str) -> set[str]:
    """Every commit the records say tunebot made (iterations and the delivery)."""
    shas = set()
    for line in records_text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("kind") in (rs.ITERATION, rs.DELIVERY) and isinstance(rec.get("sha"), str):
            shas.add(rec["sha"])
    return shas


class RemoteRuns:
    """Records and branches of runs on the repository's remote (see the module docstring)."""

    def __init__(
        self,
        url: str,
        token: str | None,
        checkout: Path,
        branch_prefix: str = "tunebot",
        before_credential: Callable[[], None] = lambda: None,
    ) -> None:
        self.url, self._token, self.checkout, self.branch_prefix = (
            url,
            token,
            checkout,
            branch_prefix,
        )
        self.before_credential = before_credential
        self.git_dir = common_git_dir(checkout)
        self.owned: dict[
            str, str
        ] = {}  # delivery branch -> the SHA tunebot's remote records say it pushed there
        self.triggers: dict[str, str] = {}  # op -> the trigger saved with its remote records

    def _git(self) -> IsolatedGit:
        self.before_credential()
        return IsolatedGit(
            self.url,
            self._token,
            objects_from=self.git_dir,
            allowed=(f"refs/heads/{self.branch_prefix}/", naming.RUN_RECORD_REFS),
        )

    def restore(self, ops: list[str]) -> list[str]:
        """Fetch the records and branches of `ops` that this checkout lacks or has older; returns the ops restored.

        Call before any PR code ran in this job: it writes into the checkout's repository.
        """
        restored = []
        with self._git() as g:
            remote = g.ls_remote(f"{naming.RUN_RECORD_REFS}*", f"refs/heads/{self.branch_prefix}/*")
            wanted = {
                ref: sha
                for ref, sha in remote.items()
                if any(
                    ref == naming.record_ref(op)
                    or ref.startswith(f"refs/heads/{self._prefix(op)}/")
                    for op in ops
                )
            }
            if not wanted:
                return []
            g.fetch([f"+{ref}:{ref}" for ref in wanted])
            for op in ops:
                ref = naming.record_ref(op)
                if ref not in wanted:
                    continue
                text = (g.read_blob(wanted[ref], RESULTS) or b"").decode("utf-8", errors="replace")
                self.triggers[op] = (
                    (g.read_blob(wanted[ref], TRIGGER) or b"")
                    .decode("utf-8", errors="replace")
                    .strip()
                )
                delivery = _delivery_sha(text)
                if delivery:
                    best = naming.op_delivery_branch(self.branch_prefix, op)
                    self.owned[f"refs/heads/{best}"] = delivery
                path = local_records(self.checkout, op)
                local_text = (
                    path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
                )
                # Records only grow: take the remote's when the local ones are an older prefix of them
                # (a persistent runner whose run another runner carried on); otherwise keep the local.
                if not text.strip() or (
                    local_text and (len(text) <= len(local_text) or not text.startswith(local_text))
                ):
                    continue
                # Only branches still at a commit the records name are tunebot's; one a person moved
                # stays theirs (the push later refuses to overwrite it and says so).
                ours = _recorded_shas(text)
                branches = {
                    r: s
                    for r, s in wanted.items()
                    if r.startswith(f"refs/heads/{self._prefix(op)}/") and s in ours
                }
                local = read_refs(self.git_dir, f"refs/heads/{self._prefix(op)}/")
                imported = {r: s for r, s in branches.items() if r not in local}
                g.export_to(self.git_dir, imported)
                self._register(imported)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                restored.append(op)
        return restored

    def _register(self, refs: dict[str, str]) -> None:
        """Record imported branches as tunebot's (bot.git.branches), so the loop may resume on them."""
        if not refs:
            return
        from bot.git import branches, repository

        repo = repository.open_repo(self.checkout)
        for ref, sha in refs.items():
            name = ref.removeprefix("refs/heads/")
            branches.create_branch(repo, name, sha)

    def save(self, op: str, trigger: str = "") -> bool:
        """Push the local records of `op` (and what triggered the run) to `refs/tunebot/runs/<op>`;
        False when there are none."""
        path = local_records(self.checkout, op)
        if not path.is_file():
            return False
        data = path.read_bytes()
        with self._git() as g:
            commit = g.commit_files(
                {RESULTS: data, TRIGGER: (trigger + "\n").encode()}, f"tunebot: records of {op}"
            )
            g.push([RefUpdate(naming.record_ref(op), commit, force=True)])
        return True

    def push_branches(self, head: str, base_sha: str | None) -> None:
        """Push the delivery branch `head` and its run's iteration branches, as the checkout holds them."""
        run_prefix = naming.run_of_delivery(head)
        refs = read_refs(self.git_dir, f"refs/heads/{run_prefix}/")
        delivery_ref = f"refs/heads/{head}"
        iterations = {
            r: s
            for r, s in refs.items()
            if naming.ends_as_iteration(r) and r.count("/") == delivery_ref.count("/")
        }
        if delivery_ref not in refs:
            raise PushError(f"{head} is missing in the checkout; nothing was pushed")
        wanted = {**iterations, delivery_ref: refs[delivery_ref]}
        with self._git() as g:
            if base_sha:
                g.verify_descends(base_sha, wanted)
            updates = [RefUpdate(r, s, force=True) for r, s in iterations.items()]
            updates.append(self._delivery_update(g, delivery_ref, refs[delivery_ref]))
            g.push(updates)

    def _delivery_update(self, g: IsolatedGit, ref: str, sha: str) -> RefUpdate:
        """Never force a delivery branch, except over the exact commit tunebot's own records put there."""
        current = g.ls_remote(ref).get(ref)
        if current is None or current == sha:
            return RefUpdate(ref, sha)
        if self.owned.get(ref) == current:
            return RefUpdate(ref, sha, lease=current)
        return RefUpdate(
            ref, sha
        )  # a fast-forward, or the remote refuses it and the error says why

    def _prefix(self, op: str) -> str:
        return naming.op_prefix(self.branch_prefix, op)
