"""The 5-layer performance analysis `advise` reads: a JSON document, or a torch_npu kernel_details.csv.

JSON form (docs/features.md has the full description); every field is optional,
and a branch of the decision tree whose inputs are missing is reported as not
evaluated rather than guessed:

    {"schema": "tunebot.analysis/v1",
     "layers": {
       "system":        {"peak_memory_gb": 61.0, "memory_capacity_gb": 64.0},
       "pipeline":      {"steps": 50, "redundant_steps": true},
       "compute":       {"matmul_pct": 42, "attention_pct": 31, "vector_pct": 18, "comm_pct": 9, "compiled": false},
       "communication": {"comm_pct": 9, "exposed_comm_pct": 40},
       "operator":      {"dit_matmul_pct": 52, "fa_pct": 31, "vector_pct": 21, "host_bound_pct": 6}}}
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import TunebotError

SCHEMA = "tunebot.analysis/v1"
LAYERS: dict[str, dict[str, str]] = {  # layer -> field -> kind ("pct", "number", "bool")
    "system": {"peak_memory_gb": "number", "memory_capacity_gb": "number", "host_bound_pct": "pct"},
    "pipeline": {"steps": "number", "redundant_steps": "bool", "step_similarity": "fraction"},
    "compute": {
        "matmul_pct": "pct",
        "attention_pct": "pct",
        "vector_pct": "pct",
        "comm_pct": "pct",
        "compiled": "bool",
    },
    "communication": {"comm_pct": "pct", "exposed_comm_pct": "pct"},
    "operator": {
        "dit_matmul_pct": "pct",
        "fa_pct": "pct",
        "vector_pct": "pct",
        "host_bound_pct": "pct",
    },
}


class AnalysisError(TunebotError):
    """The analysis report cannot be read: names the file, the field and the fix."""

    exit_code = 2


@dataclass
class Analysis:
    source: str  # file the analysis came from
    layers: dict[str, dict[str, float | bool]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # how values were derived (kernel_details)

    def get(self, layer: str, name: str) -> float | bool | None:
        return self.layers.get(layer, {}).get(name)


def load(path: Path) -> Analysis:
    """Read a JSON analysis or a kernel_details.csv (chosen by content, not by file name)."""
    path = Path(path)
    if not path.is_file():
        raise AnalysisError(
            f"report {path} does not exist. Pass a 5-layer analysis JSON or a torch_npu kernel_details.csv."
        )
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    if text.lstrip().startswith("{"):
        return from_json(text, str(path))
    return from_kernel_details(text, str(path))


def from_json(text: str, source: str) -> Analysis:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AnalysisError(
            f"{source}: not valid JSON ({exc.msg} at line {exc.lineno}). Fix the file, see docs/features.md."
        ) from None
    if not isinstance(data, dict):
        raise AnalysisError(
            f"{source}: the top level must be an object with a 'layers' key (docs/features.md)."
        )
    schema = data.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise AnalysisError(f"{source}: key 'schema' is '{schema}'; this tunebot reads '{SCHEMA}'.")
    layers = data.get("layers")
    if not isinstance(layers, dict) or not layers:
        raise AnalysisError(
            f"{source}: key 'layers' must be a non-empty object with any of {', '.join(LAYERS)}."
        )
    out = Analysis(source=source)
    for layer, values in layers.items():
        if layer not in LAYERS:
            raise AnalysisError(
                f"{source}: unknown layer 'layers.{layer}'. Known layers: {', '.join(LAYERS)}."
            )
        if not isinstance(values, dict):
            raise AnalysisError(f"{source}: 'layers.{layer}' must be an object of measurements.")
        out.layers[layer] = {}
        for name, value in values.items():
            kind = LAYERS[layer].get(name)
            where = f"layers.{layer}.{name}"
            if kind is None:
                raise AnalysisError(
                    f"{source}: unknown field '{where}'. Fields of {layer}: {', '.join(LAYERS[layer])}."
                )
            out.layers[layer][name] = _check(source, where, kind, value)
    return out


def _check(source: str, where: str, kind: str, value: object) -> float | bool:
    if kind == "bool":
        if not isinstance(value, bool):
            raise AnalysisError(
                f"{source}: '{where}' must be true or false, not {json.dumps(value)}."
            )
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AnalysisError(f"{source}: '{where}' must be a number, not {json.dumps(value)}.")
    if kind == "pct" and not 0 <= value <= 100:
        raise AnalysisError(
            f"{source}: '{where}' is a percentage and must be within 0..100, not {value}."
        )
    if kind == "fraction" and not 0 <= value <= 1:
        raise AnalysisError(f"{source}: '{where}' must be within 0..1, not {value}.")
    if kind == "number" and value < 0:
        raise AnalysisError(f"{source}: '{where}' must not be negative, not {value}.")
    return float(value)


# ---------------------------------------------------------------- kernel_details.csv

CLASSES = ("FA", "MatMul", "Vector", "Comm")
_COMM = re.compile(
    r"hcom|hccl|all_?reduce|all_?gather|all_?to_?all|reduce_?scatter|broadcast|batch_?send_?recv"
    r"|(?<![a-z])(send|recv|receive)(?![a-z])",
    re.I,
)
_FA = re.compile(r"attention|flash|(?<![a-z])fa(?![a-z])", re.I)
_MATMUL = re.compile(r"mat_?mul|gemm|(?<![a-z])mm(?![a-z])|conv|linear|mmad", re.I)


def classify_op(name: str, op_type: str = "", core: str = "") -> str:
    """FA / MatMul / Vector / Comm for one kernel, by its name and type (communication first)."""
    text = f"{name} {op_type}"
    if _COMM.search(text) or core.strip().upper() in ("HCCL", "COMMUNICATION"):
        return "Comm"
    if _FA.search(text):
        return "FA"
    if _MATMUL.search(text):
        return "MatMul"
    return "Vector"


def _column(header: list[str], *names: str) -> int | None:
    lowered = [h.strip().lower() for h in header]
    for name in names:
        if name in lowered:
            return lowered.index(name)
    return None


def _cell(row: list[str], col: int | None) -> str:
    """The row's value in column `col`; empty when the column is absent or the row is short."""
    return row[col] if col is not None and col < len(row) else ""


def from_kernel_details(text: str, source: str) -> Analysis:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise AnalysisError(
            f"{source}: empty file. Pass a kernel_details.csv from torch_npu profiler, or a JSON analysis."
        )
    header = rows[0]
    name_col = _column(header, "name", "op name")
    dur_col = _column(header, "duration(us)", "task duration(us)", "duration")
    if name_col is None or dur_col is None:
        raise AnalysisError(
            f"{source}: neither JSON nor a kernel_details.csv (needs columns 'Name' and 'Duration(us)'; "
            f"found {', '.join(h.strip() for h in header[:8])}...)."
        )
    type_col = _column(header, "type", "op type")
    core_col = _column(header, "accelerator core", "task type")
    wait_col = _column(header, "wait time(us)")
    totals = dict.fromkeys(CLASSES, 0.0)
    wait = 0.0
    for number, row in enumerate(rows[1:], start=2):
        if not row or not any(c.strip() for c in row):
            continue
        try:
            duration = float(row[dur_col])
        except (ValueError, IndexError):
            raise AnalysisError(
                f"{source}: line {number}: Duration '{row[dur_col] if dur_col < len(row) else ''}' is not a number."
            ) from None
        totals[classify_op(row[name_col], _cell(row, type_col), _cell(row, core_col))] += duration
        if wait_col is not None and _cell(row, wait_col).strip():
            with contextlib.suppress(ValueError):
                wait += float(_cell(row, wait_col))
    busy = sum(totals.values())
    if busy <= 0:
        raise AnalysisError(
            f"{source}: no kernel with a positive duration; profile a real run and pass its kernel_details.csv."
        )
    pct = {k: round(100.0 * v / busy, 2) for k, v in totals.items()}
    out = Analysis(source=source)
    out.layers["compute"] = {
        "matmul_pct": pct["MatMul"],
        "attention_pct": pct["FA"],
        "vector_pct": pct["Vector"],
        "comm_pct": pct["Comm"],
    }
    out.layers["communication"] = {"comm_pct": pct["Comm"]}
    out.layers["operator"] = {
        "dit_matmul_pct": pct["MatMul"],
        "fa_pct": pct["FA"],
        "vector_pct": pct["Vector"],
    }
    out.notes.append(
        "shares are of summed kernel time in kernel_details.csv; all MatMul counts as DiT MatMul."
    )
    if wait_col is not None:
        host = round(100.0 * wait / (wait + busy), 2)
        out.layers["operator"]["host_bound_pct"] = host
        out.notes.append("host bound = summed 'Wait Time(us)' / (wait + kernel time).")
    return out
