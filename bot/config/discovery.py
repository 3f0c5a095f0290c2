"""Op discovery: which ops a folder or commit holds, and loading one op's configuration.

An op is a folder `<ops_root>/<project>/<op>/` holding `<op>.py`, with an optional
`tune.yaml` and DESIGN.md beside it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path, PurePosixPath

from bot.config.checker import Checker
from bot.config.design import design_target_us
from bot.config.names import NAME_PART, OpNameError, op_name_problem, suggest
from bot.config.opfile import op_from_data
from bot.config.schema import OP_CONFIG_FILE, REPO_CONFIG_FILE, OpConfig, RepoConfig
from bot.config.shapes import design_shapes
from bot.config.tree import Tree, as_tree
from bot.config.yamlfile import read_yaml
from bot.errors import ConfigError


def list_ops(root: Path | Tree, cfg: RepoConfig) -> list[str]:
    """Every op under the ops root as "project/op", sorted."""
    tree = as_tree(root)
    base = PurePosixPath(cfg.ops_root)
    if not tree.is_dir(base.as_posix()):
        return []
    found = []
    for project in tree.subdirs(base.as_posix()):
        if project.startswith(".") or not NAME_PART.match(project):
            continue
        for op in tree.subdirs((base / project).as_posix()):
            if (
                not op.startswith(".")
                and NAME_PART.match(op)
                and tree.is_file((base / project / op / f"{op}.py").as_posix())
            ):
                found.append(f"{project}/{op}")
    return sorted(found)


def find_op(root: Path | Tree, cfg: RepoConfig, name: str) -> Path:
    """The folder (relative to the root) of op `name` ("op" or "project/op").

    Raises OpNotFound (an OpNameError) for refused, unknown or ambiguous names.
    """
    tree = as_tree(root)
    name = name.strip() if isinstance(name, str) else ""
    problem = op_name_problem(name)
    if problem:
        raise OpNameError(name, [], problem=problem)
    if not tree.is_dir(cfg.ops_root):
        raise ConfigError(
            REPO_CONFIG_FILE,
            "ops_root",
            f"the ops folder '{cfg.ops_root}' does not exist",
            "create it with <project>/<op>/<op>.py inside, "
            "or point ops_root at the folder that has them",
        )
    ops = list_ops(tree, cfg)
    short = "/" not in name
    matches = [q for q in ops if (q.split("/", 1)[1] if short else q) == name]
    if len(matches) > 1:
        raise OpNameError(name, matches, ambiguous=True)
    if not matches:
        raise OpNameError(name, ops, suggestions=suggest(name, ops))
    project, op = matches[0].split("/")
    op_dir = Path(cfg.ops_root) / project / op
    # A symlinked folder could point anywhere: the op must really live under the ops root.
    if not tree.stays_inside(op_dir.as_posix(), cfg.ops_root):
        raise OpNameError(
            name, ops, problem=f"'{op_dir.as_posix()}' points outside '{cfg.ops_root}'"
        )
    return op_dir


def resolve_op(root: Path | Tree, cfg: RepoConfig, name: str) -> OpConfig:
    """Find op `name` ("op" or "project/op") and load its config."""
    tree = as_tree(root)
    return load_op_config(tree, find_op(tree, cfg, name))


def load_op_config(root: Path | Tree, op_dir: Path) -> OpConfig:
    """Read `<op_dir>/tune.yaml` (optional) and DESIGN.md's target and shapes for the op in `op_dir`.

    `op_dir` may be absolute or relative to the root; the returned OpConfig.dir is relative.
    """
    tree = as_tree(root)
    op_dir = Path(op_dir)
    relative = tree.relative(op_dir)
    folder = op_dir.as_posix()  # read where the caller pointed; name it by `relative`
    if not tree.is_dir(folder):
        raise ConfigError(
            relative.as_posix(),
            "(folder)",
            "the op folder does not exist",
            "create <ops_root>/<project>/<op>/ with <op>.py, DESIGN.md and tune.yaml",
        )
    project, name = relative.parent.name, relative.name
    shown = (relative / OP_CONFIG_FILE).as_posix()
    config_file = f"{folder}/{OP_CONFIG_FILE}"
    data = read_yaml(tree, config_file, shown) if tree.exists(config_file) else {}
    op = op_from_data(Checker(shown), data, project, name, relative)
    design = _design_text(tree, f"{folder}/DESIGN.md", relative / "DESIGN.md")
    if design is None:
        return op
    if op.target_us is None:
        target = design_target_us(design)
        if target is not None:
            op = replace(op, target_us=target)
    # both declare sizes the op runs with: a kernel rule must hold for every one of them
    declared = design_shapes(design, (relative / "DESIGN.md").as_posix())
    return replace(op, shapes=op.shapes + declared) if declared else op


def _design_text(tree: Tree, rel: str, shown: Path) -> str | None:
    if not tree.is_file(rel):
        return None
    try:
        return tree.read_bytes(rel).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            shown.as_posix(),
            "(file)",
            f"not UTF-8 text ({exc.reason} at byte {exc.start})",
            "save DESIGN.md as UTF-8 (e.g. `iconv -f gbk -t utf-8`)",
        ) from None
