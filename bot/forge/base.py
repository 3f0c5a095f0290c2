"""One interface, two implementations (local, github). CONTRACT used by loop, cli, features.

A forge never runs the loop; it only stores proposals, status and reviews.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from bot.errors import TunebotError


@dataclass
class Proposal:
    id: str  # local: "1", "2", ...; github: the PR number as text
    title: str
    body: str
    head: str  # branch proposed, e.g. tunebot/rms_norm
    base: str  # branch it merges into
    head_sha: str
    state: str = "open"  # open | merged | closed
    approved_sha: str | None = None  # head sha an approval was given on
    url: str | None = None
    labels: list[str] = field(default_factory=list)


class Forge(Protocol):
    def find_proposal(self, head: str) -> Proposal | None:
        """The open proposal from branch `head`, if any (used to update instead of duplicate)."""

    def propose(
        self, head: str, base: str, title: str, body: str, labels: list[str] | None = None
    ) -> Proposal:
        """Open a proposal, or update title/body of the open one from `head` (idempotent)."""

    def list_proposals(self, state: str | None = "open") -> list[Proposal]: ...

    def get(self, proposal_id: str) -> Proposal: ...

    def approve(self, proposal_id: str, reviewer: str) -> Proposal:
        """Record an approval on the current head sha."""

    def merge(self, proposal_id: str) -> Proposal:
        """Merge only if approved on the current head sha; raises MergeBlocked naming the missing gates."""

    def post_status(self, text: str) -> None:
        """Create or edit the one status message of this run (GitHub: the sticky comment)."""

    def close(self, proposal_id: str) -> Proposal:
        """Close an open proposal without merging (its branch stays)."""

    def cancel_requested(self) -> bool:
        """Whether someone asked this run, through the forge, to stop after its current iteration.

        GitHub: `/tune cancel` marked the run's status comment. Local: never (`tunebot cancel`
        runs in another process and leaves the run's cancel file, which the loop reads itself).
        """


# Errors every forge raises the same way (additive to the contract above).


class ProposalNotFound(TunebotError):
    """No proposal with that id: bad input."""

    exit_code = 2


class MergeBlocked(TunebotError):
    """A merge gate is not met (approval on the current head, state, checks); names each gate.

    `missing` lists the gates one by one (the GitHub flow posts them as a list); a forge that
    stops at the first gate gives its message as the only item.
    """

    exit_code = 3

    def __init__(self, message: str, missing: list[str] | None = None) -> None:
        super().__init__(message)
        self.missing = list(missing) if missing else [message]

    @classmethod
    def gates(cls, proposal_id: str | int, missing: list[str]) -> MergeBlocked:
        """Every gate that does not hold on proposal `proposal_id`."""
        return cls(f"not merging #{proposal_id}: " + "; ".join(missing), missing)
