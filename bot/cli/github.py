"""CLI commands of the github area (see bot/cli/__init__.py for exit codes)."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
