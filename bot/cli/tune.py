"""CLI commands of the tune area (see bot/cli/__init__.py for exit codes)."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
