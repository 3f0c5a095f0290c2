"""`python -m bot` runs the tunebot CLI."""

from bot.cli import main

main()
