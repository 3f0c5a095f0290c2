"""What the GitHub modules share about pull requests and permissions (no network, no PyGithub)."""

from __future__ import annotations

from dataclasses import dataclass

# Repository roles in increasing power, as the collaborator-permission API names them.
ROLE_RANK = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}


def role_allows(role: str, minimum: str) -> bool:
    """Whether `role` is at least `minimum` (an unknown minimum counts as `write`)."""
    return ROLE_RANK.get(role, 0) >= ROLE_RANK.get(minimum, ROLE_RANK["write"])


@dataclass(frozen=True)
class PullInfo:
    number: int
    state: str
    head_sha: str
    head_ref: str
    head_repo: str | None  # None: the fork was deleted
    base_ref: str
    base_repo: str
    author: str
    merged: bool = False

    @property
    def from_fork(self) -> bool:
        return self.head_repo != self.base_repo
