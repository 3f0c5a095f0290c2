"""Model targets in a tree: `<ops_root>/<project>/<model>/model.yaml` (docs/model.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot import config as cfgmod
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


def models_in(files: list[str], ops_root: str) -> list[ModelTarget]:
    """Every `<ops_root>/<project>/<model>/model.yaml` among `files` (repo-relative paths)."""
    out = []
    root_parts = Path(ops_root).parts
    for rel in files:
        parts = Path(rel).parts[len(root_parts) :]
        if (
            len(parts) == 3
            and parts[2] == spec_mod.MODEL_FILE
            and cfgmod.NAME_PART.match(parts[0])
            and cfgmod.NAME_PART.match(parts[1])
        ):
            out.append(ModelTarget(parts[0], parts[1], Path(ops_root) / parts[0] / parts[1]))
    return sorted(out, key=lambda t: t.qualified)


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
    if len(parts) > 2 or not all(cfgmod.NAME_PART.match(p) for p in parts):
        return None
    pattern = (
        f"{parts[0]}/{parts[1]}/{spec_mod.MODEL_FILE}"
        if len(parts) == 2
        else f"*/{parts[0]}/{spec_mod.MODEL_FILE}"
    )
    found = sorted(p for p in base.glob(pattern) if p.is_file()) if base.is_dir() else []
    return f"{found[0].parent.parent.name}/{found[0].parent.name}" if len(found) == 1 else None
