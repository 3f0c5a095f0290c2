"""`tunebot cancel` / `/tune cancel`: ask the live run of a target to stop (stop reason 已取消).

The run checks the flag before each iteration (bot/run/stops/cancelled.py); a cancelled run
proposes nothing, and its branches, records and delivery branch stay.
"""

from __future__ import annotations

from pathlib import Path

from bot import fs
from bot.config.discovery import resolve_op
from bot.config.repo import load_repo_config
from bot.git import repository
from bot.run import common
from bot.run.errors import NothingToCancel
from bot.run.target import find_model


def cancel(repo_path: Path, name: str) -> Path:
    """Leave the cancel flag of the live run of `name` (a model at HEAD, else an op in the
    checkout); returns the flag's path."""
    repo = repository.open_repo(repo_path)
    model = find_model(repo, "HEAD", name)
    if model is not None:
        project, short, qualified = model.project, model.name, model.qualified
    else:
        checkout = Path(str(repo.working_tree_dir))
        op = resolve_op(checkout, load_repo_config(checkout), name)
        project, short, qualified = op.project, op.name, op.qualified
    state_dir = common.runs_dir(repo) / project / short
    if not fs.lock_is_held(state_dir / "run.lock"):
        raise NothingToCancel(f"no tunebot run of {qualified} is in progress; nothing to cancel")
    flag = common.cancel_file(state_dir)
    flag.write_text(common.now())
    return flag
