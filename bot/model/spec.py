"""model.yaml: what a model target declares (docs/model.md has every key).

    model: dit_tiny                  # optional: the folder name; branches tunebot/<model>/v<N>
    features_model: Wan2.1           # the model's name in the features table's support matrix
    hardware: cpu                    # optional: else the benchmark's workload.hardware
    features_file: references/mindiesd-features.md
    benchmark: [python, pipeline.py, --benchmark]   # argv, run in the model folder
    analysis: [python, pipeline.py, --analysis]     # optional
    quality: {command: [python, pipeline.py, --quality], min_cosine: 0.995}
    settings_file: settings.yaml     # the YAML the pipeline reads, relative to the model folder
    settings:                        # the moves: one key set to one value per iteration
      - {key: quantize_linear, values: [true], row: W8A8_DYNAMIC}
    stop: {max_iters: 10, target_ms: 50, noise_floor: 0.03, patience: 2}
    timeout_s: 600
    remeasure_rounds: 3

A leading `python` / `python3` in a command means the interpreter tunebot runs in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bot.errors import ConfigError

MODEL_FILE = "model.yaml"
DEFAULT_FEATURES = "references/mindiesd-features.md"
_TOP_KEYS = (
    "model",
    "features_model",
    "hardware",
    "features_file",
    "benchmark",
    "analysis",
    "quality",
    "settings_file",
    "settings",
    "stop",
    "timeout_s",
    "remeasure_rounds",
)
_STOP_KEYS = ("max_iters", "target_ms", "noise_floor", "patience")
_SCALAR = (bool, int, float, str)


@dataclass(frozen=True)
class SettingSpec:
    key: str  # key in the settings file
    values: tuple  # values to try, least aggressive first
    row: str  # the features-table row this setting switches (a feature, algorithm, value or switch)


@dataclass(frozen=True)
class StopSpec:
    max_iters: int = 10
    target_ms: float | None = None
    noise_floor: float = 0.03
    patience: int = 2  # iterations in a row within noise -> stop (差距在噪声内)


@dataclass(frozen=True)
class ModelSpec:
    project: str
    name: str
    dir: Path  # relative to the repository root
    features_model: str
    benchmark: tuple[str, ...]
    quality: tuple[str, ...]
    min_cosine: float
    settings_file: Path  # relative to the repository root
    settings: tuple[SettingSpec, ...]
    analysis: tuple[str, ...] | None = None
    hardware: str | None = None
    features_file: str = DEFAULT_FEATURES
    stop: StopSpec = StopSpec()
    timeout_s: float = 600.0
    remeasure_rounds: int = 3

    @property
    def qualified(self) -> str:
        return f"{self.project}/{self.name}"

    @property
    def perf_dir(self) -> Path:
        return self.dir / "perf_opt"

    def setting(self, key: str) -> SettingSpec:
        return next(s for s in self.settings if s.key == key)


class _Check:
    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, key: str, problem: str, fix: str) -> ConfigError:
        return ConfigError(self.file, key, problem, fix)

    def argv(self, value: Any, key: str) -> tuple[str, ...]:
        if (
            isinstance(value, str)
            or not isinstance(value, list)
            or not value
            or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value)
        ):
            raise self.fail(
                key,
                f"must be a non-empty list of arguments, got {value!r}",
                f"write e.g. '{key}: [python, pipeline.py, --benchmark]' (no shell string)",
            )
        return tuple(str(v) for v in value)

    def number(
        self, value: Any, key: str, low: float, high: float = math.inf, integer: bool = False
    ) -> float:
        ok = (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        )
        if integer:
            ok = ok and float(value).is_integer()
        if not ok or not low <= value <= high:
            kind = "a whole number" if integer else "a finite number"
            raise self.fail(
                key,
                f"must be {kind} in [{low:g}, {high:g}], got {value!r}",
                f"set {key} to such a number",
            )
        return value

    def text(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"must be a non-empty string, got {value!r}", f"set {key}")
        return value.strip()

    def relative(self, value: str, key: str) -> Path:
        path = Path(value)
        if path.is_absolute() or ".." in path.parts:
            raise self.fail(
                key,
                f"'{value}' must be a path inside the model folder",
                "use a relative path without '..'",
            )
        return path


def load(root: Path, model_dir: Path) -> ModelSpec:
    """Read `<root>/<model_dir>/model.yaml`; every problem names the key and the fix (exit 2)."""
    rel = (model_dir / MODEL_FILE).as_posix()
    check = _Check(rel)
    path = Path(root) / model_dir / MODEL_FILE
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise check.fail("-", "file not found", f"create {rel} (docs/model.md)") from None
    except yaml.YAMLError as exc:
        raise check.fail(
            "-", f"not valid YAML ({str(exc).splitlines()[0]})", "fix the YAML syntax"
        ) from None
    if not isinstance(data, dict):
        raise check.fail("-", "the top level must be a mapping", "see docs/model.md for the keys")
    unknown = sorted(set(data) - set(_TOP_KEYS))
    if unknown:
        raise check.fail(unknown[0], "unknown key", f"use only {', '.join(_TOP_KEYS)}")
    for required in ("features_model", "benchmark", "quality", "settings_file", "settings"):
        if data.get(required) is None:
            raise check.fail(required, "missing", f"add '{required}:' (docs/model.md)")
    project, folder = model_dir.parts[-2], model_dir.parts[-1]
    name = check.text(data.get("model", folder), "model")
    if name != folder:
        raise check.fail(
            "model",
            f"'{name}' differs from the folder name '{folder}'",
            "leave it out or use the folder name (branches are named after it)",
        )
    quality = data["quality"]
    if not isinstance(quality, dict) or set(quality) - {"command", "min_cosine"}:
        raise check.fail(
            "quality",
            f"must be a mapping with 'command' and 'min_cosine', got {quality!r}",
            "write 'quality: {command: [python, pipeline.py, --quality], min_cosine: 0.995}'",
        )
    min_cosine = check.number(quality.get("min_cosine"), "quality.min_cosine", -1.0, 1.0)
    settings_file = check.relative(
        check.text(data["settings_file"], "settings_file"), "settings_file"
    )
    settings = _settings(check, data["settings"])
    stop = _stop(check, data.get("stop") or {})
    analysis = (
        check.argv(data["analysis"], "analysis") if data.get("analysis") is not None else None
    )
    return ModelSpec(
        project=project,
        name=name,
        dir=model_dir,
        features_model=check.text(data["features_model"], "features_model"),
        benchmark=check.argv(data["benchmark"], "benchmark"),
        analysis=analysis,
        quality=check.argv(quality.get("command"), "quality.command"),
        min_cosine=float(min_cosine),
        settings_file=model_dir / settings_file,
        settings=settings,
        hardware=check.text(data["hardware"], "hardware")
        if data.get("hardware") is not None
        else None,
        features_file=check.text(data.get("features_file", DEFAULT_FEATURES), "features_file"),
        stop=stop,
        timeout_s=float(check.number(data.get("timeout_s", 600), "timeout_s", 1, 86400)),
        remeasure_rounds=int(
            check.number(data.get("remeasure_rounds", 3), "remeasure_rounds", 1, 20, integer=True)
        ),
    )


def _settings(check: _Check, items: Any) -> tuple[SettingSpec, ...]:
    if not isinstance(items, list) or not items:
        raise check.fail(
            "settings",
            "must be a non-empty list of {key, values, row}",
            "write e.g. '- {key: quantize_linear, values: [true], row: W8A8_DYNAMIC}'",
        )
    out: list[SettingSpec] = []
    for i, item in enumerate(items):
        where = f"settings[{i}]"
        if not isinstance(item, dict) or set(item) != {"key", "values", "row"}:
            raise check.fail(
                where,
                f"must have exactly the keys key, values, row; got {item!r}",
                "write e.g. '- {key: step_cache, values: [2, 4], row: DitCache}'",
            )
        key = check.text(item["key"], f"{where}.key")
        if any(s.key == key for s in out):
            raise check.fail(
                f"{where}.key",
                f"'{key}' is listed twice",
                "list each setting once, with all its values",
            )
        values = item["values"]
        if (
            not isinstance(values, list)
            or not values
            or not all(isinstance(v, _SCALAR) for v in values)
        ):
            raise check.fail(
                f"{where}.values",
                f"must be a non-empty list of plain values, got {values!r}",
                "write e.g. 'values: [2, 4]'",
            )
        out.append(
            SettingSpec(key=key, values=tuple(values), row=check.text(item["row"], f"{where}.row"))
        )
    return tuple(out)


def _stop(check: _Check, data: Any) -> StopSpec:
    if not isinstance(data, dict):
        raise check.fail(
            "stop", f"must be a mapping, got {data!r}", f"use the keys {', '.join(_STOP_KEYS)}"
        )
    unknown = sorted(set(data) - set(_STOP_KEYS))
    if unknown:
        raise check.fail(f"stop.{unknown[0]}", "unknown key", f"use only {', '.join(_STOP_KEYS)}")
    target = data.get("target_ms")
    return StopSpec(
        max_iters=int(
            check.number(data.get("max_iters", 10), "stop.max_iters", 1, 1000, integer=True)
        ),
        target_ms=None if target is None else float(check.number(target, "stop.target_ms", 1e-9)),
        noise_floor=float(
            check.number(data.get("noise_floor", 0.03), "stop.noise_floor", 0.0, 0.5)
        ),
        patience=int(check.number(data.get("patience", 2), "stop.patience", 1, 100, integer=True)),
    )


def check_rows(spec: ModelSpec, row_names: set[str]) -> None:
    """Every setting must cite a row that exists in the features table."""
    for i, s in enumerate(spec.settings):
        if s.row not in row_names:
            close = sorted(
                n for n in row_names if s.row.lower() in n.lower() or n.lower() in s.row.lower()
            )[:5]
            raise ConfigError(
                (spec.dir / MODEL_FILE).as_posix(),
                f"settings[{i}].row",
                f"'{s.row}' is not a row of {spec.features_file}"
                + (f" (close: {', '.join(close)})" if close else ""),
                "cite a row name exactly as the features table writes it",
            )


def read_settings(text: str | None, source: str) -> dict:
    """The pipeline's settings file as a mapping (missing file: empty)."""
    if text is None:
        return {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(
            source, "-", f"not valid YAML ({str(exc).splitlines()[0]})", "fix the YAML syntax"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            source,
            "-",
            "the settings file must be a mapping of setting -> value",
            "write one 'key: value' per line",
        )
    return data


def write_settings(original: str | None, values: dict) -> str:
    """The settings file with `values` applied: a changed key is rewritten on its own line
    (comments and order kept); a new key is appended."""
    lines = (original or "").splitlines()
    done: set[str] = set()
    for i, line in enumerate(lines):
        stripped = line.split("#", 1)[0]
        if ":" in stripped and not line.startswith((" ", "\t", "-")):
            key = stripped.split(":", 1)[0].strip()
            if key in values:
                comment = "  #" + line.split("#", 1)[1] if "#" in line else ""
                lines[i] = f"{key}: {_yaml_scalar(values[key])}{comment}"
                done.add(key)
    for key, value in values.items():
        if key not in done:
            lines.append(f"{key}: {_yaml_scalar(value)}")
    text = "\n".join(lines) + "\n"
    if {k: v for k, v in read_settings(text, "settings").items() if k in values} != values:
        raise ValueError(f"settings could not be written as plain YAML: {values!r}")
    return text


def _yaml_scalar(value: object) -> str:
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("\n...").strip()
