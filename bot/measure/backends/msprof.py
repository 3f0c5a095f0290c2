"""npu-msprof backend: `msprof op` collects the device duration of each kernel launch.

    msprof op --kernel-name=<prefix> --output=<dir> --launch-count=<n> --warm-up=<w> <command>

`--launch-count` is the maximum number of matching launches collected (not a
repeat count), so the launched command calls the entry warm-up + n times.
With one launch msprof writes OPPROF_<ts>_<x>/OpBasicInfo.csv; with several,
OPPROF_<ts>_<x>/<OpName>/<i>/OpBasicInfo_<ts>.csv (and a device<N>/ level on
several cards), so CSVs are searched recursively.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from bot.errors import MeasureError
from bot.measure import backends as probes
from bot.measure import reaper
from bot.measure.backends.base import DeviceKind, OneVariantPerProcess, Request
from bot.measure.backends.common import from_failure, from_samples
from bot.measure.sandbox import run_sandboxed, runner_argv, runner_env, tail_of
from bot.measure.types import LatencyResult

NAME = "npu-msprof"
# `msprof op --launch-count`: "an integer in 1~100" (CANN msProf docs, msprof op optional
# parameters, e.g. CANNCommunityEdition 80RC3alpha003 atlasopdev_16_0082); more is refused
MAX_LAUNCH_COUNT = 100
# the no-filter rerun only lists kernel names: it must not cost a second full timeout
NAMES_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Launch:
    """One row of OpBasicInfo.csv: one collected kernel launch."""

    op_name: str
    op_type: str | None
    duration_us: float | None
    block_dim: int | None
    mix_block_dim: int | None
    device_id: int | None
    current_freq: float | None
    rated_freq: float | None
    file: str = ""

    @property
    def down_clocked(self) -> bool:
        """The AI core ran below its rated frequency: the duration is not comparable."""
        return (
            self.current_freq is not None
            and self.rated_freq is not None
            and self.current_freq < self.rated_freq
        )


def _num(value: str | None, kind=float):
    """'NA', '' and absent cells are None; so is anything that is not a finite number
    (inf, nan, 1e999, a cell cut short) or does not fit the kind."""
    if value is None:
        return None
    value = value.strip()
    if not value or value.upper() in ("NA", "N/A") or len(value) > 64:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    if kind is int:
        return int(number) if number.is_integer() else None
    return number


def _duration(value: str | None) -> float | None:
    """A Task Duration: a finite, positive number of microseconds, else None."""
    number = _num(value)
    return number if number is not None and number > 0 else None


# OpBasicInfo cells are short; a longer one means a damaged file, read anyway (csv's own limit is 128 KiB)
_FIELD_LIMIT = 16 * 1024 * 1024


def parse_opbasicinfo(text: str, file: str = "") -> list[Launch]:
    """Rows of an OpBasicInfo*.csv, by column name (910B/A5 and 310P headers; trailing commas)."""
    if csv.field_size_limit() < _FIELD_LIMIT:
        csv.field_size_limit(_FIELD_LIMIT)
    try:
        rows = [
            r
            for r in csv.reader(io.StringIO(text.lstrip("\ufeff").replace("\0", "")))
            if any(c.strip() for c in r)
        ]
    except csv.Error as exc:
        raise MeasureError(
            f"{file or 'OpBasicInfo.csv'}: not a readable CSV file ({exc})"
        ) from None
    if not rows:
        return []
    header = [h.strip() for h in rows[0]]
    if "Op Name" not in header or "Task Duration(us)" not in header:
        raise MeasureError(
            f"{file or 'OpBasicInfo.csv'}: not an msprof OpBasicInfo file "
            f"(header: {','.join(h for h in header if h)})"
        )
    launches = []
    named = max(i for i, h in enumerate(header) if h) + 1
    for full_row in rows[1:]:
        # a row cut short (a truncated file): its last cell may be cut too
        row = full_row[:-1] if len(full_row) < named else full_row
        cell = {h: (row[i] if i < len(row) else None) for i, h in enumerate(header) if h}
        launches.append(
            Launch(
                op_name=(cell.get("Op Name") or "").strip(),
                op_type=(cell.get("Op Type") or "").strip() or None,
                duration_us=_duration(cell.get("Task Duration(us)")),
                block_dim=_num(cell.get("Block Dim"), int),
                mix_block_dim=_num(cell.get("Mix Block Dim"), int),  # absent on 310P
                device_id=_num(cell.get("Device Id"), int),
                current_freq=_num(cell.get("Current Freq")),
                rated_freq=_num(cell.get("Rated Freq")),
                file=file,
            )
        )
    return launches


def _launch_order(path: Path) -> tuple:
    # nested layout: .../<OpName>/<i>/OpBasicInfo_<ts>.csv; order launches by <i> numerically
    parts = path.parts
    idx = int(parts[-2]) if len(parts) >= 2 and parts[-2].isdigit() else -1
    return (str(path.parent.parent) if idx >= 0 else str(path.parent), idx, path.name)


def find_csvs(output_dir: Path) -> list[Path]:
    return sorted(Path(output_dir).rglob("OpBasicInfo*.csv"), key=_launch_order)


def collect(output_dir: Path, kernel_prefix: str) -> tuple[list[Launch], list[str]]:
    """Launches whose Op Name starts with `kernel_prefix`, and every op name seen.

    Raises MeasureError when msprof wrote no CSV or nothing matched the prefix.
    """
    files = find_csvs(output_dir)
    if not files:
        raise MeasureError(f"msprof wrote no OpBasicInfo*.csv under {output_dir}")
    launches: list[Launch] = []
    for f in files:
        launches += parse_opbasicinfo(
            f.read_text(encoding="utf-8", errors="replace"), str(f.relative_to(output_dir))
        )
    seen = sorted({la.op_name for la in launches})
    matched = [la for la in launches if la.op_name.startswith(kernel_prefix)]
    if not matched:
        raise MeasureError(
            f"kernel name '{kernel_prefix}' matched no launch msprof collected; kernels seen: "
            f"{', '.join(seen) or '(none)'}. Fix: set latency.kernel_name in tune.yaml to one of them "
            f"(a prefix is enough)"
        )
    return matched, seen


def summarize_launches(launches: list[Launch]) -> tuple[list[float], dict, list[str], bool]:
    """(durations, extra, notes, suspect) from matched launches."""
    durations = [la.duration_us for la in launches if la.duration_us is not None]
    missing = len(launches) - len(durations)
    down = [la for la in launches if la.down_clocked]
    notes = []
    if missing:
        notes.append(
            f"{missing} launch(es) without a Task Duration (NA, empty, negative, zero or not "
            "a finite number) were skipped"
        )
    if down:
        worst = min(down, key=lambda la: la.current_freq or 0)
        notes.append(
            f"{len(down)} of {len(launches)} launches ran down-clocked "
            f"(Current Freq {worst.current_freq:g} < Rated Freq {worst.rated_freq:g} MHz): suspect"
        )
    extra = {
        "launches": len(launches),
        "op_names": sorted({la.op_name for la in launches}),
        "op_type": sorted({la.op_type for la in launches if la.op_type}),
        "block_dim": sorted({la.block_dim for la in launches if la.block_dim is not None}),
        "mix_block_dim": sorted(
            {la.mix_block_dim for la in launches if la.mix_block_dim is not None}
        ),
        "current_freq": sorted({la.current_freq for la in launches if la.current_freq is not None}),
        "rated_freq": sorted({la.rated_freq for la in launches if la.rated_freq is not None}),
        "down_clocked": len(down),
        "rows": [asdict(la) for la in launches],
    }
    return durations, extra, notes, bool(down)


def msprof_argv(
    msprof: str,
    kernel_name: str | None,
    output: Path,
    launch_count: int,
    warmup: int,
    command: list[str],
) -> list[str]:
    argv = [msprof, "op"]
    if kernel_name:
        argv.append(f"--kernel-name={kernel_name}")
    argv += [f"--output={output}", f"--launch-count={launch_count}", f"--warm-up={warmup}"]
    return argv + command


def private_dir(parent: Path | None = None) -> Path:
    """A fresh mode-700 directory whose parent is not group/other writable (msprof checks)."""
    base = Path(
        tempfile.mkdtemp(prefix=reaper.temp_prefix("msprof"), dir=parent)
    )  # mkdtemp: mode 700
    out = base / "out"
    out.mkdir(mode=0o700)
    os.chmod(out, 0o700)  # umask may have masked bits of mkdir's mode
    return out


def kernel_name_of(source_text: str) -> str | None:
    """The first `@T.prim_func` function's name: what msprof sees as the kernel name."""
    m = re.search(r"@T\.prim_func\s*(?:\([^)]*\))?\s*\n\s*def\s+(\w+)", source_text)
    return m.group(1) if m else None


def find_msprof() -> str:
    path = shutil.which("msprof")
    if path is None:
        raise MeasureError(
            "msprof was not found on PATH. Fix: source the CANN toolkit's set_env.sh "
            "(e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh) or set latency.backend "
            "to npu-torch or cpu in tune.yaml"
        )
    return path


def measure_msprof(
    source: Path,
    kernel_name: str,
    entry: str = "kernel",
    inputs: str = "get_inputs",
    warmup: int = 5,
    repeats: int = 30,
    timeout_s: float = 300.0,
    cwd: Path | None = None,
    memory_limit_mb: int | None = None,
) -> LatencyResult:
    """Device time of each launch of `kernel_name*` from `msprof op` around the launch runner."""
    msprof = find_msprof()
    source = Path(source).resolve()
    cwd = cwd or source.parent
    launch_count = max(1, min(repeats, MAX_LAUNCH_COUNT))
    out = private_dir()
    try:
        result_file = out.parent / "launch.json"
        command = runner_argv(
            "bot.measure.runners.launch",
            "--source",
            str(source),
            "--entry",
            entry,
            "--inputs",
            inputs,
            "--calls",
            str(warmup + launch_count),
            "--result",
            str(result_file),
        )
        argv = msprof_argv(msprof, kernel_name, out, launch_count, warmup, command)
        env = runner_env()
        run = run_sandboxed(
            argv,
            cwd,
            timeout_s,
            env=env,
            memory_limit_mb=memory_limit_mb,
            extra_writable=(out.parent,),
        )
        if not run.ok:
            return from_failure(NAME, run)
        crashed = _launch_failure(result_file)
        if crashed:  # msprof exited 0, but the program it profiled did not finish: a result, not a setup error
            return LatencyResult(
                status="error",
                backend=NAME,
                command=list(argv),
                tail=run.tail,
                notes=[crashed, f"msprof itself: {run.reason}"],
            )
        try:
            launches, _ = collect(out, kernel_name)
        except MeasureError as exc:
            if find_csvs(out):
                raise
            seen = _names_without_filter(msprof, command, cwd, timeout_s, env, memory_limit_mb)
            hint = (
                (
                    f"kernel name '{kernel_name}' matched no launch; kernels seen: {', '.join(seen)}. "
                    f"Fix: set latency.kernel_name in tune.yaml to one of them"
                )
                if seen
                else str(exc)
            )
            raise MeasureError(
                f"{hint}\nmsprof output (tail):\n{tail_of(run.output, 15)}"
            ) from None
        durations, extra, notes, suspect = summarize_launches(launches)
        if not durations:
            raise MeasureError(
                f"msprof collected {len(launches)} launches of '{kernel_name}' "
                "but none had a Task Duration (all NA)"
            )
        notes.insert(0, f"msprof op: launch-count={launch_count} warm-up={warmup}")
        if repeats > MAX_LAUNCH_COUNT:
            notes.insert(
                1, f"repeats={repeats} clamped to msprof's maximum launch-count {MAX_LAUNCH_COUNT}"
            )
        return from_samples(
            NAME, durations, argv, tail=run.tail, notes=notes, extra=extra, suspect=suspect
        )
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


def _launch_failure(result_file: Path) -> str | None:
    """Why the launch runner did not finish, from its launch.json; None when it did.

    msprof can exit 0 although the program it launched crashed: then the runner
    never wrote its result (or wrote an op-contract error), and no CSV exists.
    """
    if not result_file.is_file():
        return "the launched program ended without writing its result (it crashed under msprof)"
    try:
        payload = json.loads(result_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return "the launched program wrote an unreadable result"
    if not isinstance(payload, dict) or payload.get("error") or "calls" not in payload:
        return f"the launched program failed: {payload.get('error') if isinstance(payload, dict) else payload}"
    return None


def _names_without_filter(
    msprof: str,
    command: list[str],
    cwd: Path,
    timeout_s: float,
    env: dict,
    memory_limit_mb: int | None = None,
) -> list[str]:
    """Diagnose a prefix that matched nothing: profile once without --kernel-name, list names.

    Same memory limit as the measurement, and a shorter timeout: it only lists names.
    """
    out = private_dir()
    try:
        argv = msprof_argv(msprof, None, out, 20, 0, command)
        run_sandboxed(
            argv,
            cwd,
            min(timeout_s, NAMES_TIMEOUT_S),
            env=env,
            memory_limit_mb=memory_limit_mb,
            extra_writable=(out.parent,),
        )
        names = set()
        for f in find_csvs(out):
            names |= {la.op_name for la in parse_opbasicinfo(f.read_text(errors="replace"))}
        return sorted(names)
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


class MsprofBackend(OneVariantPerProcess):
    """`msprof op` device time per launch on Ascend; needs torch_npu and msprof on PATH."""

    name = NAME
    memory_kind: Literal["as", "data"] = "data"
    device: DeviceKind = "npu"
    auto_rank = 40
    requires: tuple[tuple[str, str, str], ...] = ()

    def unavailable(self) -> str | None:
        if not probes.torch_npu_imports():
            return "torch_npu does not import here (no Ascend stack)"
        if shutil.which("msprof") is None:
            return "msprof is not on PATH (source CANN's set_env.sh)"
        return None

    def measure(self, source: Path, request: Request) -> LatencyResult:
        return measure_msprof(
            source,
            kernel_name_for(source, request),
            entry=request.entry,
            inputs=request.inputs,
            warmup=request.warmup,
            repeats=request.repeats,
            timeout_s=request.timeout_s,
            cwd=request.cwd,
            memory_limit_mb=request.memory_limit_mb,
        )


def kernel_name_for(source: Path, request: Request) -> str:
    """msprof's --kernel-name prefix: tune.yaml's, else the @T.prim_func name, else the op name."""
    if request.kernel_name:
        return request.kernel_name
    try:
        text = Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    return kernel_name_of(text) or request.op_name
