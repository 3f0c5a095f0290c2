"""Exhaustive knob sweep of the CPU demo ops: every point of each op's knob space.

Each point is a copy of the op's source with the knob constants rewritten,
timed exactly as a tuning run times it: `bot.measure.backends.cpu.measure_cpu`
(a fresh interpreter per point, warmup, then `repeats` timed calls of the
entry only). Points are visited in a shuffled order, `--rounds` times. A
point's figure is the median of its per-round medians: on a shared machine a
burst of someone else's work slows every sample of one round, and this
statistic drops such rounds instead of averaging them in. The pooled samples
give min and IQR.

    python benchmarks/sweep.py                   # sweep the ops whose cache is stale
    python benchmarks/sweep.py demo/matmul --force --rounds 3
    python benchmarks/sweep.py --docs            # only re-render docs/ops.md from the cache

Results: benchmarks/data/sweep_<project>_<op>.json (environment, per-point
median/min/IQR, best point, whether it is interior). docs/ops.md shows them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import itertools
import json
import platform
import random
import re
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bot.config.discovery import list_ops, resolve_op
from bot.config.repo import load_repo_config
from bot.config.schema import OpConfig
from bot.measure.backends.cpu import measure_cpu

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
DOCS = ROOT / "docs" / "ops.md"
DEMO_PROJECT = "demo"


@dataclass
class Point:
    knobs: dict[str, int]
    status: str
    samples_us: list[float]
    median_us: float | None = None
    min_us: float | None = None
    q1_us: float | None = None
    q3_us: float | None = None
    round_medians_us: list[float] = field(default_factory=list)

    @property
    def rel_iqr(self) -> float | None:
        if self.median_us and self.q1_us is not None and self.q3_us is not None:
            return (self.q3_us - self.q1_us) / self.median_us
        return None


def set_knobs(source: str, values: dict[str, int]) -> str:
    """Rewrite `NAME = <int>` module constants; every knob must be found exactly once."""
    for name, value in values.items():
        pattern = re.compile(rf"^{re.escape(name)}(\s*(?::\s*int)?\s*=\s*)-?\d+", re.MULTILINE)
        source, count = pattern.subn(lambda m, v=value: f"{name}{m.group(1)}{v}", source)
        if count != 1:
            raise SystemExit(
                f"sweep: expected one `{name} = <int>` line in the op source, found {count}"
            )
    return source


def knob_defaults(source: str, names: list[str]) -> dict[str, int]:
    out = {}
    for name in names:
        match = re.search(rf"^{re.escape(name)}\s*(?::\s*int)?\s*=\s*(-?\d+)", source, re.MULTILINE)
        if match:
            out[name] = int(match.group(1))
    return out


def _quartiles(samples: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1, median, q3


def space_key(op: OpConfig, source: str) -> str:
    """Identifies what was measured: the kernel source (knob lines blanked) and the knob space."""
    body = re.sub(
        rf"^({'|'.join(k.name for k in op.knobs)})\s*=.*$", "", source, flags=re.MULTILINE
    )
    space = [(k.name, list(k.values)) for k in op.knobs]
    return hashlib.sha256((body + json.dumps(space)).encode()).hexdigest()[:16]


def environment(warmup: int, repeats: int, rounds: int) -> dict:
    import torch  # the ops' own dependency; only needed for the version string

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    return {
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "warmup": warmup,
        "repeats": repeats,
        "rounds": rounds,
        "timer": "bot.measure.backends.cpu.measure_cpu (fresh interpreter per point, entry call only)",
    }


def sweep_op(op: OpConfig, warmup: int, repeats: int, rounds: int, seed: int) -> dict:
    source = (ROOT / op.source).read_text(encoding="utf-8")
    names = [k.name for k in op.knobs]
    grid = [dict(zip(names, combo)) for combo in itertools.product(*(k.values for k in op.knobs))]
    samples: dict[int, list[float]] = {i: [] for i in range(len(grid))}
    round_medians: dict[int, list[float]] = {i: [] for i in range(len(grid))}
    failures: dict[int, str] = {}
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="tunebot-sweep-") as tmp:
        paths = []
        for i, point in enumerate(grid):
            folder = Path(tmp) / f"p{i}"
            folder.mkdir()
            path = folder / op.source.name
            path.write_text(set_knobs(source, point), encoding="utf-8")
            paths.append(path)
        for r in range(rounds):
            order = list(range(len(grid)))
            rng.shuffle(order)
            for n, i in enumerate(order, 1):
                result = measure_cpu(
                    paths[i],
                    entry=op.entry,
                    inputs=op.inputs,
                    warmup=warmup,
                    repeats=repeats,
                    timeout_s=op.latency.timeout_s,
                    cwd=paths[i].parent,
                )
                if result.ok:
                    samples[i].extend(result.samples_us)
                    round_medians[i].append(statistics.median(result.samples_us))
                else:
                    failures[i] = f"{result.status}: {'; '.join(result.notes)} {result.tail[-300:]}"
                print(
                    f"\r{op.qualified}: round {r + 1}/{rounds}, point {n}/{len(grid)}   ",
                    end="",
                    file=sys.stderr,
                )
    print(file=sys.stderr)
    points = []
    for i, point in enumerate(grid):
        if i in failures or not samples[i]:
            points.append(Point(point, failures.get(i, "error: no samples"), []))
            continue
        q1, _, q3 = _quartiles(samples[i])
        points.append(
            Point(
                point,
                "ok",
                samples[i],
                statistics.median(round_medians[i]),
                min(samples[i]),
                q1,
                q3,
                round_medians[i],
            )
        )
    return table(op, source, points, environment(warmup, repeats, rounds))


def table(op: OpConfig, source: str, points: list[Point], env: dict) -> dict:
    ok = [p for p in points if p.status == "ok"]
    best = min(ok, key=lambda p: p.median_us) if ok else None
    defaults = knob_defaults(source, [k.name for k in op.knobs])
    default = next((p for p in points if p.knobs == defaults), None)
    edges = {k.name: (k.values[0], k.values[-1]) for k in op.knobs}
    on_edge = sorted(
        n
        for n, v in (best.knobs.items() if best else [])
        if v in edges[n] and len(set(edges[n])) > 1
    )
    return {
        "op": op.qualified,
        "space_key": space_key(op, source),
        "environment": env,
        "knobs": [
            {
                "name": k.name,
                "strategy": k.strategy,
                "values": list(k.values),
                "default": defaults.get(k.name),
            }
            for k in op.knobs
        ],
        "best": best.knobs if best else None,
        "best_median_us": best.median_us if best else None,
        "default_median_us": default.median_us if default else None,
        "best_on_edge_of": on_edge,
        "points": [
            {
                **{k: v for k, v in asdict(p).items() if k != "samples_us"},
                "n": len(p.samples_us),
                "rel_iqr": p.rel_iqr,
            }
            for p in points
        ],
    }


# ---------------------------------------------------------------- rendering


def _ms(us: float | None) -> str:
    return "—" if us is None else f"{us / 1000:.2f}"


def render(data: dict) -> str:
    """The sweep as markdown: a grid for two knobs, a row for one, a list beyond."""
    env = data["environment"]
    knobs = data["knobs"]
    points = {tuple(p["knobs"][k["name"]] for k in knobs): p for p in data["points"]}
    best = tuple(data["best"][k["name"]] for k in knobs) if data["best"] else None
    default = tuple(k["default"] for k in knobs)

    def cell(key: tuple) -> str:
        p = points.get(key)
        text = _ms(p["median_us"]) if p and p["status"] == "ok" else "fail"
        if key == best:
            text = f"**{text}** ★"
        if key == default:
            text += " (default)"
        return text

    lines = [
        f"Kernel time in ms, median of {env['rounds']} round medians (★ best, bold; "
        "`(default)` = the module's baseline values). "
        f"{env['cpu_model']}, {env['cpu_count']} cores, torch {env['torch_version']}, "
        f"warmup {env['warmup']}, {env['repeats']} timed calls x {env['rounds']} shuffled rounds, {env['date'][:10]}.",
        "",
    ]
    if len(knobs) == 1:
        name, values = knobs[0]["name"], knobs[0]["values"]
        lines += [
            f"| {name} | " + " | ".join(map(str, values)) + " |",
            "|---|" + "---|" * len(values),
            "| ms | " + " | ".join(cell((v,)) for v in values) + " |",
        ]
    elif len(knobs) == 2:
        rows, cols = knobs
        lines += [
            f"| {rows['name']} \\ {cols['name']} | " + " | ".join(map(str, cols["values"])) + " |",
            "|---|" + "---|" * len(cols["values"]),
        ]
        for r in rows["values"]:
            lines.append(f"| **{r}** | " + " | ".join(cell((r, c)) for c in cols["values"]) + " |")
    else:
        names = [k["name"] for k in knobs]
        lines += ["| " + " | ".join(names) + " | ms |", "|" + "---|" * (len(names) + 1)]
        for key in sorted(points):
            lines.append("| " + " | ".join(map(str, key)) + f" | {cell(key)} |")
    if data["best"]:
        gain = ""
        if data["default_median_us"]:
            gain = f", {100 * (1 - data['best_median_us'] / data['default_median_us']):.0f} % faster than the default"
        where = (
            "interior point of the space"
            if not data["best_on_edge_of"]
            else f"ON THE EDGE of {', '.join(data['best_on_edge_of'])}"
        )
        best_text = ", ".join(f"{k}={v}" for k, v in data["best"].items())
        lines += ["", f"Best: {best_text} at {_ms(data['best_median_us'])} ms ({where}{gain})."]
    return "\n".join(lines)


def update_docs(tables: dict[str, dict]) -> None:
    """Replace each `<!-- sweep:<op> -->...<!-- /sweep -->` block of docs/ops.md."""
    if not DOCS.exists():
        return
    text = DOCS.read_text(encoding="utf-8")
    for name, data in tables.items():
        block = re.compile(rf"(<!-- sweep:{re.escape(name)} -->\n).*?(<!-- /sweep -->)", re.DOTALL)
        text = block.sub(lambda m, d=data: m.group(1) + render(d) + "\n" + m.group(2), text)
    DOCS.write_text(text, encoding="utf-8")


def cache_path(qualified: str) -> Path:
    return DATA / f"sweep_{qualified.replace('/', '_')}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "ops", nargs="*", help="ops to sweep (default: every op of the demo project)"
    )
    parser.add_argument(
        "--warmup", type=int, help="warmup calls per point (default: the op's tune.yaml)"
    )
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per point and round")
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="shuffled passes over the space; a point's figure is the median of its round medians",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the visiting order")
    parser.add_argument(
        "--force", action="store_true", help="re-measure even if the cache matches the source"
    )
    parser.add_argument(
        "--docs", action="store_true", help="only re-render docs/ops.md from the cached tables"
    )
    args = parser.parse_args(argv)
    cfg = load_repo_config(ROOT)
    names = args.ops or [q for q in list_ops(ROOT, cfg) if q.startswith(f"{DEMO_PROJECT}/")]
    tables = {}
    for name in names:
        op = resolve_op(ROOT, cfg, name)
        path = cache_path(op.qualified)
        cached = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
        source = (ROOT / op.source).read_text(encoding="utf-8")
        fresh = cached is not None and cached.get("space_key") == space_key(op, source)
        if args.docs or (fresh and not args.force):
            if cached is None:
                print(f"{op.qualified}: no cached sweep; run without --docs", file=sys.stderr)
                continue
            if not fresh:
                print(
                    f"{op.qualified}: cached sweep is STALE (source or knob space changed)",
                    file=sys.stderr,
                )
            tables[op.qualified] = cached
            continue
        data = sweep_op(
            op,
            args.warmup if args.warmup is not None else op.latency.warmup,
            args.repeats,
            args.rounds,
            args.seed,
        )
        DATA.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        tables[op.qualified] = data
    for name, data in tables.items():
        print(f"## {name}\n\n{render(data)}\n")
    update_docs(tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
