"""Configuration: `.tunebot.yml` (repository) and per-op `tune.yaml`, with clear errors.

Modules, each with one job (import from them directly; this package re-exports nothing):
- `schema`: the typed settings (RepoConfig, OpConfig, ...) and the file names.
- `tree`: where files are read from: a folder (`DirTree`) or a git commit (`CommitTree`).
- `yamlfile`: YAML text -> mapping, duplicate keys and syntax errors named by line.
- `checker`: typed reads of one value; every failure is a ConfigError (file, key, problem, fix).
- `fields`: declarative field specs (`Field`, `Section`, `Nested` and the value kinds).
- `names`: op, folder and branch names; `OpNameError` with did-you-mean suggestions.
- `repo`: `.tunebot.yml` as field specs; `load_repo_config`.
- `opfile`: `tune.yaml` as field specs; knobs, tolerances, strategy ids.
- `discovery`: `list_ops`, `find_op`, `resolve_op`, `load_op_config`.
- `design`: the latency target in DESIGN.md.
- `settings`: `effective_settings` (flags > op > repo defaults).

Never reads the network. Reference: docs/config.md.
"""
