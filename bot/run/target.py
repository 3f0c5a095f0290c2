"""What a name in a tune request names, resolved once per run against a commit.

A target is an op (`<ops_root>/<project>/<op>/<op>.py`) or a model (`.../<model>/model.yaml`,
docs/model.md). `resolve` reads `.tunebot.yml` and lists the ops folder at the commit once,
through one `CommitTree`; the run reuses both (its config is read again only when it resumes
at another recorded base). Config is read as committed, never from the (maybe dirty) checkout,
and nothing is written to disk to read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config.discovery import find_op, load_op_config, resolve_op
from bot.config.repo import load_repo_config
from bot.config.schema import OpConfig, RepoConfig
from bot.config.tree import CommitTree, Tree
from bot.errors import TunebotError
from bot.git import repository
from bot.model.targets import ModelTarget, match_model, models_in
from bot.run.errors import BadRequest
from bot.run.request import TuneRequest


@dataclass(frozen=True)
class Resolved:
    """A request's name resolved at `sha`: exactly one of `op` and `model` is set."""

    sha: str
    repo_cfg: RepoConfig  # .tunebot.yml at `sha`
    op: OpConfig | None = None
    model: ModelTarget | None = None

    @property
    def qualified(self) -> str:
        if self.model is not None:
            return self.model.qualified
        assert self.op is not None
        return self.op.qualified


def resolve_request(request: TuneRequest) -> Resolved:
    """The request's target at its base (`--base`, else HEAD)."""
    repo = repository.open_repo(request.repo)
    return resolve(repo, repository.resolve(repo, request.base_ref or "HEAD"), request.op)


def resolve(repo: Any, sha: str, name: str) -> Resolved:
    """Models first (by folder), then ops; an unknown name is an OpNotFound (exit 2)."""
    tree = CommitTree(repo, sha)
    repo_cfg = load_repo_config(tree)
    model = match_model(models_in(tree, repo_cfg.ops_root), name)
    if model is not None:
        return Resolved(sha, repo_cfg, model=model)
    return Resolved(sha, repo_cfg, op=_resolve_op(repo, sha, tree, repo_cfg, name))


def find_model(repo: Any, ref: str, name: str) -> ModelTarget | None:
    """The model `name` at `ref`, or None (not a model, or `ref` names no commit)."""
    try:
        sha = repository.resolve(repo, ref)
    except TunebotError:
        return None
    tree = CommitTree(repo, sha)
    return match_model(models_in(tree, load_repo_config(tree).ops_root), name)


def repo_config_at(repo: Any, sha: str) -> RepoConfig:
    """.tunebot.yml as committed at `sha` (the defaults when there is none)."""
    return load_repo_config(CommitTree(repo, sha))


def _resolve_op(repo: Any, sha: str, tree: Tree, repo_cfg: RepoConfig, name: str) -> OpConfig:
    """Resolve an op name against the tree of `sha` (the code that will be tuned); its tune.yaml
    and DESIGN.md are read by `op_config_at` at the run's base."""
    try:
        op_dir = find_op(tree, repo_cfg, name)
    except TunebotError:
        _refuse_uncommitted(repo, sha, name)
        raise
    return OpConfig(project=op_dir.parent.name, name=op_dir.name, dir=op_dir)


def _refuse_uncommitted(repo: Any, sha: str, name: str) -> None:
    """If the op exists in the checkout only, say that it needs committing."""
    checkout = Path(str(repo.working_tree_dir))
    try:
        op = resolve_op(checkout, load_repo_config(checkout), name)
    except TunebotError:
        return
    raise BadRequest(
        f"{op.source.as_posix()} is not committed at {sha[:10]}; tunebot tunes committed code "
        "only: commit the op (or pass --base with a commit that has it)"
    )


def op_config_at(repo: Any, sha: str, op: OpConfig) -> OpConfig:
    """The op's tune.yaml and DESIGN.md target as committed at `sha`."""
    # read as text: a source that is not valid in its declared encoding is a clear error here
    if repository.read_file(repo, sha, op.source.as_posix(), missing_ok=True) is None:
        raise BadRequest(
            f"{op.source.as_posix()} is not committed at {sha[:10]}; tunebot tunes committed code "
            "only: commit the op (or pass --base with a commit that has it)"
        )
    return load_op_config(CommitTree(repo, sha), op.dir)
