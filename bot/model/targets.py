"""Model targets in a tree: `<ops_root>/<project>/<model>/model.yaml` (docs/model.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bot.config.names import NAME_PART
from bot.config.tree import Tree
from bot.model import spec as spec_mod
from bot.run.errors import BadRequest


@dataclass(frozen=True)
class ModelTarget:
    project: str
    name: str
    dir: Path  # relative to the repository root

    @property
    def qualified(self) -> str:
        return f"{self.project}/{self.name}"


def models_in(tree: Tree, ops_root: str) -> list[ModelTarget]:
    """Every `<ops_root>/<project>/<model>/model.yaml` in `tree` (a folder or a commit)."""
    base = PurePosixPath(ops_root)
    if not tree.is_dir(base.as_posix()):
        return []
    found = []
    for project in tree.subdirs(base.as_posix()):
        for name in tree.subdirs((base / project).as_posix()):
            if (
                NAME_PART.match(project)
                and NAME_PART.match(name)
                and tree.is_file((base / project / name / spec_mod.MODEL_FILE).as_posix())
            ):
                found.append(ModelTarget(project, name, Path(ops_root) / project / name))
    return sorted(found, key=lambda t: t.qualified)


def match_model(models: list[ModelTarget], name: str) -> ModelTarget | None:
    """The model `name` ("model" or "project/model") names, or None: the name is not a model.
    Two projects with a model of that name are an error (say which one)."""
    matches = [m for m in models if m.qualified == name or ("/" not in name and m.name == name)]
    if len(matches) > 1:
        raise BadRequest(
            f"model '{name}' is ambiguous; say which one as <project>/<model>: "
            f"{', '.join(m.qualified for m in matches)}"
        )
    return matches[0] if matches else None


def model_in_tree(root: Path, ops_root: str, name: str) -> str | None:
    """`project/model` when the checkout at `root` has `<ops_root>/<project>/<model>/model.yaml` for
    `name` (one match only), else None. For checks made on a working tree (the /tune gate)."""
    base = Path(root) / ops_root
    parts = name.split("/")
    if len(parts) > 2 or not all(NAME_PART.match(p) for p in parts):
        return None
    pattern = (
        f"{parts[0]}/{parts[1]}/{spec_mod.MODEL_FILE}"
        if len(parts) == 2
        else f"*/{parts[0]}/{spec_mod.MODEL_FILE}"
    )
    found = sorted(p for p in base.glob(pattern) if p.is_file()) if base.is_dir() else []
    return f"{found[0].parent.parent.name}/{found[0].parent.name}" if len(found) == 1 else None
