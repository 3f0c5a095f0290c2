"""What every CLI area shares: turning user-facing errors into a line and an exit code.

`handle_errors` is the one place an error becomes an exit code (the codes: bot/errors.py,
docs/cli.md)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path

import click

from bot import diskfull
from bot.errors import EXIT_FAILED, EXIT_INTERRUPTED, TunebotError

EXIT_DISK_FULL = EXIT_FAILED  # docs/cli.md


def handle_errors(func: Callable) -> Callable:
    """A TunebotError becomes one red line on stderr and its exit code, never a traceback;
    Ctrl-C says that nothing recorded is lost."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except TunebotError as exc:
            if diskfull.is_disk_full(exc):
                click.secho(f"error: {diskfull.message(exc)}\n({exc})", fg="red", err=True)
                sys.exit(EXIT_DISK_FULL)
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(exc.exit_code)
        except Exception as exc:  # a full disk surfaces as OSError or a library's git error
            if not diskfull.is_disk_full(exc):
                raise
            click.secho(f"error: {diskfull.message(exc)}", fg="red", err=True)
            sys.exit(EXIT_DISK_FULL)
        except KeyboardInterrupt:
            click.secho(
                "interrupted: every recorded iteration is kept; run the same command again to resume",
                fg="yellow",
                err=True,
            )
            sys.exit(EXIT_INTERRUPTED)

    return wrapper


def repo_option(help: str = "The git repository (any directory inside it).") -> Callable:
    """The `--repo` option every local command takes (a directory, default the current one)."""
    return click.option(
        "--repo",
        type=click.Path(file_okay=False, path_type=Path),
        default=".",
        show_default=True,
        help=help,
    )
