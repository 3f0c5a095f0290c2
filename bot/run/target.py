"""What a name in a tune request names, resolved once per run against a commit.

A target is an op (`<ops_root>/<project>/<op>/<op>.py`) or a model (`.../<model>/model.yaml`,
docs/model.md). `resolve` reads `.tunebot.yml` and lists the ops folder at the commit once;
the run reuses both (its config is read again only when it resumes at another recorded base).
Config is read as committed, never from the (maybe dirty) checkout.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot import config as cfgmod
from bot import gitops, source_text
from bot.errors import TunebotError
from bot.measure import reaper
from bot.model.targets import ModelTarget, match_model, models_in
from bot.run.errors import BadRequest
from bot.run.request import TuneRequest


@dataclass(frozen=True)
class Resolved:
    """A request's name resolved at `sha`: exactly one of `op` and `model` is set."""

    sha: str
    repo_cfg: cfgmod.RepoConfig  # .tunebot.yml at `sha`
    op: cfgmod.OpConfig | None = None
    model: ModelTarget | None = None

    @property
    def qualified(self) -> str:
        if self.model is not None:
            return self.model.qualified
        assert self.op is not None
        return self.op.qualified


def resolve_request(request: TuneRequest) -> Resolved:
    """The request's target at its base (`--base`, else HEAD)."""
    repo = gitops.open_repo(request.repo)
    return resolve(repo, gitops.resolve(repo, request.base_ref or "HEAD"), request.op)


def resolve(repo: Any, sha: str, name: str) -> Resolved:
    """Models first (by folder), then ops; an unknown name is an OpNotFound (exit 2)."""
    repo_cfg = repo_config_at(repo, sha)
    files = gitops.list_files(repo, sha, repo_cfg.ops_root)
    model = match_model(models_in(files, repo_cfg.ops_root), name)
    if model is not None:
        return Resolved(sha, repo_cfg, model=model)
    return Resolved(sha, repo_cfg, op=_resolve_op(repo, sha, repo_cfg, files, name))


def find_model(repo: Any, ref: str, name: str) -> ModelTarget | None:
    """The model `name` at `ref`, or None (not a model, or `ref` names no commit)."""
    try:
        sha = gitops.resolve(repo, ref)
    except TunebotError:
        return None
    repo_cfg = repo_config_at(repo, sha)
    return match_model(
        models_in(gitops.list_files(repo, sha, repo_cfg.ops_root), repo_cfg.ops_root), name
    )


def repo_config_at(repo: Any, sha: str) -> cfgmod.RepoConfig:
    """.tunebot.yml as committed at `sha` (the defaults when there is none)."""
    with tempfile.TemporaryDirectory(prefix=reaper.temp_prefix("config")) as tmp:
        root = Path(tmp)
        data = gitops.read_bytes(repo, sha, cfgmod.REPO_CONFIG_FILE, missing_ok=True)
        if data is not None:  # as bytes: the config loader names a file that is not UTF-8
            (root / cfgmod.REPO_CONFIG_FILE).write_bytes(data)
        return cfgmod.load_repo_config(root)


def _resolve_op(
    repo: Any, sha: str, repo_cfg: cfgmod.RepoConfig, files: list[str], name: str
) -> cfgmod.OpConfig:
    """Resolve an op name against the tree of `sha` (the code that will be tuned)."""
    with tempfile.TemporaryDirectory(prefix=reaper.temp_prefix("ops")) as tmp:
        root = Path(tmp)
        for rel in files:
            parts = Path(rel).parts[len(Path(repo_cfg.ops_root).parts) :]
            if len(parts) == 3 and parts[2] == f"{parts[1]}.py":  # <project>/<op>/<op>.py
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).touch()
        try:
            return cfgmod.resolve_op(root, repo_cfg, name)
        except TunebotError:
            _refuse_uncommitted(repo, sha, name)
            raise


def _refuse_uncommitted(repo: Any, sha: str, name: str) -> None:
    """If the op exists in the checkout only, say that it needs committing."""
    checkout = Path(repo.working_tree_dir)
    try:
        op = cfgmod.resolve_op(checkout, cfgmod.load_repo_config(checkout), name)
    except TunebotError:
        return
    raise BadRequest(
        f"{op.source.as_posix()} is not committed at {sha[:10]}; tunebot tunes committed code "
        "only: commit the op (or pass --base with a commit that has it)"
    )


def op_config_at(repo: Any, sha: str, op: cfgmod.OpConfig) -> cfgmod.OpConfig:
    """The op's tune.yaml and DESIGN.md target as committed at `sha`."""
    source = gitops.read_file(repo, sha, op.source.as_posix(), missing_ok=True)
    if source is None:
        raise BadRequest(
            f"{op.source.as_posix()} is not committed at {sha[:10]}; tunebot tunes committed code "
            "only: commit the op (or pass --base with a commit that has it)"
        )
    with tempfile.TemporaryDirectory(prefix=reaper.temp_prefix("config")) as tmp:
        root = Path(tmp)
        for rel in ((op.dir / cfgmod.OP_CONFIG_FILE).as_posix(), (op.dir / "DESIGN.md").as_posix()):
            data = gitops.read_bytes(repo, sha, rel, missing_ok=True)
            if data is not None:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_bytes(data)
        (root / op.source).parent.mkdir(parents=True, exist_ok=True)
        (root / op.source).write_bytes(source_text.encode(source))
        return cfgmod.load_op_config(root, op.dir)
