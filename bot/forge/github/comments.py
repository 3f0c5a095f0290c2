"""What the bot says on GitHub: its marked comments, reactions and commit statuses.

A comment is the bot's only when its author is the bot's login (any user can write a marker);
each one is found by its marker, edited in place, created once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from github.IssueComment import IssueComment

from bot.forge.github.client import GithubClient, GithubError

DEFAULT_BOT_LOGIN = (
    "github-actions[bot]"  # who GITHUB_TOKEN comments as; an App token: "<app-slug>[bot]"
)
CANCEL_MARKER = "<!-- tunebot:cancel -->"
GATE_MARKER = "<!-- tunebot:gate -->"
STATUS_PREFIX = "<!-- tunebot:status:"


def status_marker(op: str) -> str:
    return f"{STATUS_PREFIX}{op} -->"


def reply_marker(comment_id: int | str, index: int = 0) -> str:
    return (
        f"<!-- tunebot:reply:{comment_id} -->"
        if index == 0
        else f"<!-- tunebot:reply:{comment_id}:{index} -->"
    )


class Comments:
    """The bot's comments on pull requests, its reactions and its commit statuses."""

    def __init__(
        self, client: GithubClient, bot_login: str = DEFAULT_BOT_LOGIN, run_url: str | None = None
    ) -> None:
        self.client, self.bot_login, self.run_url = client, bot_login, run_url
        self._ids: dict[str, int] = {}  # marker -> id of the bot's comment holding it
        self._bodies: dict[int, str] = {}  # id -> the body as last written or read

    def mine(self, comment: IssueComment) -> bool:
        # Any bot (or user) can write a marker; only the bot's own login makes a comment the bot's.
        return comment.user is not None and comment.user.login.lower() == self.bot_login.lower()

    def _list(self, number: int) -> Iterable[IssueComment]:
        return self.client.repo.get_pull(number).get_issue_comments()

    def upsert(self, number: int, marker: str, text: str, aliases: tuple[str, ...] = ()) -> int:
        """The bot's comment holding `marker` (or an alias, e.g. the op as typed), edited in place, or created once.

        Once found, the comment's id is kept: later edits are one API call, not a search of the thread.
        """
        body = f"{marker}\n{text}"
        known = self._ids.get(marker)
        if known is not None:
            if self._bodies.get(known) == body:
                return known  # unchanged: no call
            try:
                self.client.call(
                    f"update comment {known}",
                    lambda: self.client.api(
                        "PATCH", f"/issues/comments/{known}", input={"body": body}
                    ),
                )
                self._bodies[known] = body
                return known
            except GithubError:
                self._ids.pop(marker, None)  # deleted or unreachable: search again

        def step() -> int:
            issue_pr = self.client.repo.get_pull(number)
            for comment in issue_pr.get_issue_comments():
                current = comment.body or ""
                if self.mine(comment) and any(m in current for m in (marker, *aliases)):
                    if current != body:
                        comment.edit(body)
                    return comment.id
            return issue_pr.create_issue_comment(body).id

        found = self.client.call(f"update the comment on #{number}", step)
        self._ids[marker], self._bodies[found] = found, body
        return found

    def find(self, number: int, marker: str) -> str | None:
        """The body of the bot's comment holding `marker` (by its known id: one call)."""
        known = self._ids.get(marker)
        if known is not None:
            data: Any
            try:
                data = self.client.call(
                    f"read comment {known}",
                    lambda: self.client.api("GET", f"/issues/comments/{known}"),
                )
            except GithubError:
                data = None
            login = (
                ((data or {}).get("user") or {}).get("login", "") if isinstance(data, dict) else ""
            )
            if (
                isinstance(data, dict)
                and login.lower() == self.bot_login.lower()
                and marker in (data.get("body") or "")
            ):
                self._bodies[known] = data["body"]
                return str(data["body"])

        def step() -> str | None:
            for comment in self._list(number):
                if marker in (comment.body or "") and self.mine(comment):
                    return comment.body
            return None

        return self.client.call(f"read comments of #{number}", step)

    def find_any(self, number: int, markers: tuple[str, ...]) -> str | None:
        """The body of the bot's first comment holding any of `markers`."""
        for marker in markers:
            body = self.find(number, marker)
            if body is not None:
                return body
        return None

    def status_comments(self, number: int) -> dict[str, str]:
        """op -> body of every status comment of the bot on the pull request."""

        def step() -> dict[str, str]:
            out = {}
            for comment in self._list(number):
                body = comment.body or ""
                if self.mine(comment) and body.startswith(STATUS_PREFIX):
                    out[body.split(":", 2)[2].split(" -->", 1)[0]] = body
            return out

        return self.client.call(f"read comments of #{number}", step)

    def reply(self, number: int, comment_id: int | None, text: str, index: int = 0) -> int:
        """Answer a command once (re-delivered events edit the same reply)."""
        return self.upsert(
            number, reply_marker(comment_id if comment_id is not None else "none", index), text
        )

    def react(self, comment_id: int, content: str = "eyes") -> None:
        self.client.call(
            "react to the comment",
            lambda: self.client.api(
                "POST", f"/issues/comments/{comment_id}/reactions", input={"content": content}
            ),
        )

    def set_status(self, sha: str, state: str, description: str, context: str) -> None:
        """A commit status on `sha` (state: pending | success | failure | error)."""
        payload = {"state": state, "description": description[:140], "context": context}
        if self.run_url:
            payload["target_url"] = self.run_url
        self.client.call(
            "set the commit status",
            lambda: self.client.api("POST", f"/statuses/{sha}", input=payload),
        )

    def commit_statuses(self, sha: str) -> dict[str, str]:
        """context -> latest state of the commit statuses on `sha`."""
        return self.client.call(
            f"read the statuses of {sha[:10]}",
            lambda: {
                st["context"]: st["state"]
                for st in self.client.paged(f"/commits/{sha}/status", "statuses")
            },
        )
