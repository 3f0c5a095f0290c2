"""The `tunebot` command line. Each area keeps its commands in its own module here.

Exit codes (docs/cli.md): 0 ok; 1 the run failed (a tool or git error); 2 bad
input (unknown op, malformed config, bad flag, missing docs dir); 3 nothing to
do / refused by a gate (e.g. merge without approval); 130 interrupted.
"""

from __future__ import annotations

import click

from bot import __version__
from bot.cli import features, github, show, tune


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tunebot")
def main() -> None:
    """tunebot: tune compute kernels one reviewable optimization at a time.

    Every iteration is a git commit on its own branch; the best variant is
    proposed for review. Start with `tunebot tune <op> --dry-run`.
    """


for _module in (tune, show, features, github):
    for _command in _module.COMMANDS:
        main.add_command(_command)
