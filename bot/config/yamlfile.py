"""YAML text of a configuration file -> a mapping, with duplicate keys and syntax errors
reported as ConfigErrors that name the line.
"""

from __future__ import annotations

import yaml

from bot.config.checker import kind
from bot.config.tree import Tree
from bot.errors import ConfigError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen: dict[object, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # unhashable key: let the base class report it
                    break
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {key!r} (first defined at line {first})",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def read_yaml(tree: Tree, rel: str, shown: str) -> dict:
    """The mapping in file `rel` of `tree`; `shown` is the name errors give the file."""
    try:
        text = tree.read_bytes(rel).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            shown,
            "(file)",
            f"not UTF-8 text ({exc.reason} at byte {exc.start})",
            "save the file as UTF-8",
        ) from None
    except OSError as exc:
        raise ConfigError(
            shown, "(file)", f"cannot be read ({exc.strerror})", "check that it is a readable file"
        ) from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        column = mark.column + 1 if mark else 0
        problem = exc.problem or exc.context or "syntax error"
        raise ConfigError(
            shown,
            f"line {line}",
            f"not valid YAML: {problem} (line {line}, column {column})",
            f"correct line {line}: indent with spaces, write `key: value`, "
            "and quote text that contains ':' or '#'",
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(
            shown, "(file)", f"not valid YAML: {exc}", "correct the YAML syntax"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            shown,
            "(top level)",
            f"must be a mapping of keys to values, got {kind(data)}",
            "write one `key: value` per line (see docs/config.md)",
        )
    return data
