"""The GitHub flow's router: every request kind the events module can produce has one handler."""

from __future__ import annotations

from typing import get_args

from bot.forge.github import commands, flow
from bot.forge.github.events import Kind
from bot.forge.github.grammar import Action


def test_every_request_kind_is_routed_to_exactly_one_handler() -> None:
    in_comments = set(commands.OPEN_COMMANDS) | set(commands.AUTHORIZED_COMMANDS)
    assert set(commands.OPEN_COMMANDS).isdisjoint(commands.AUTHORIZED_COMMANDS)
    assert in_comments == set(get_args(Action))  # every command of the grammar
    assert set(flow.HANDLERS) | in_comments == set(get_args(Kind))
    # An unreadable comment (`invalid`) is answered in the comment's one reply before any command
    # runs; the router's `invalid` handler is for an unreadable schedule or dispatch input.
    assert set(flow.HANDLERS) & in_comments == set()


def test_commands_that_change_something_need_authorization() -> None:
    assert set(commands.AUTHORIZED_COMMANDS) == {"tune", "cancel"}
    assert set(commands.OPEN_COMMANDS) == {"help", "status"}
