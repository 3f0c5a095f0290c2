"""`python -m bot.cli` runs the tunebot CLI (same as the `tunebot` script)."""

from bot.cli import main

main()
