"""Robustness sweep: every strategy over every TileLang file of some git repositories.

    python scripts/strategy_sweep.py /path/to/repo.git [more repos] --json out.json
    python scripts/strategy_sweep.py REPO --under examples/ --limit 300 --half look

The corpus contract (tests/test_strategies_upstream_corpus.py) judges each move against a
hand-written expectation, so it covers the few hundred kernels someone read. This sweep
needs no expectation: it runs the planner's discovery and every value of every space it
finds on each `.py` file that imports tilelang (read from a git revision, a bare mirror is
enough), and checks what must hold on any input:

- no exception escapes discovery or a transform (a crash on a user's file is day-one breakage);
- every file finishes within `--timeout` seconds (a hang stalls the loop);
- every variant is valid Python and differs from its parent;
- the change round-trips: reading the variant back gives the value that was set;
- a block-size variant changes only the line of the knob's binding site that discovery named;
- every refusal and every dropped knob carries a reason;
- the multi-buffer flag is never set on a file that names no NPUIR target.

Files are deduplicated by content (forks share most files) and split in two halves by the
hash of their content: `--half look` (used to find and fix bugs) and `--half held` (run only
to report), so a fix can be judged on files it was not made from. Each finding keeps the
repository, commit and path it came from.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import json
import multiprocessing
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from bot.strategies.base import Variant
    from bot.strategies.planner import Planner
    from bot.strategies.protocol import KnobSpec

STRATEGIES = ["block_size", "pipeline_depth", "multi_buffer", "vprefix"]
IMPORTS = ("import tilelang", "from tilelang")


@dataclass
class FileResult:
    origin: str  # repo@commit:path
    seconds: float = 0.0
    specs: int = 0
    variants: int = 0
    refusals: int = 0
    findings: list[str] = field(default_factory=list)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def gather(repos: list[Path], under: str) -> list[tuple[str, str]]:
    """(origin, source) of every distinct `.py` file importing tilelang under `under`."""
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for repo in repos:
        commit = _git(repo, "rev-parse", "HEAD").strip()
        name = repo.parent.name if repo.name == "repo" else repo.name
        listing = _git(repo, "ls-tree", "-r", "HEAD", "--", under or ".")
        for line in listing.splitlines():
            meta, _, path = line.partition("\t")
            _mode, kind, blob = meta.split()
            if kind != "blob" or not path.endswith(".py") or blob in seen:
                continue
            seen.add(blob)
            text = subprocess.run(
                ["git", "-C", str(repo), "cat-file", "-p", blob], check=True, capture_output=True
            ).stdout.decode("utf-8", "replace")
            if any(line.lstrip().startswith(IMPORTS) for line in text.splitlines()):
                out.append((f"{name}@{commit[:10]}:{path}", text))
    return out


def half_of(source: str) -> str:
    return "look" if hashlib.sha256(source.encode()).digest()[0] % 2 == 0 else "held"


def _changed_lines(parent: str, variant: str) -> set[int]:
    lines: set[int] = set()
    sm = difflib.SequenceMatcher(None, parent.splitlines(), variant.splitlines(), autojunk=False)
    for tag, i1, i2, _j1, _j2 in sm.get_opcodes():
        if tag != "equal":
            lines.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    return lines


class _Timeout(BaseException):  # not caught by the crash handlers below
    pass


def _alarm(_signum: int, _frame: object) -> None:
    raise _Timeout


def sweep_one(origin: str, source: str, timeout: float) -> FileResult:
    """Every check above on one file (runs in a worker process), cut off after `timeout` s."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return _sweep(origin, source)
    except _Timeout:
        return FileResult(origin, timeout, findings=[f"timeout after {timeout:g} s"])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _sweep(origin: str, source: str) -> FileResult:
    from bot.config.schema import OpConfig
    from bot.strategies import knobs
    from bot.strategies.base import Refusal, Variant
    from bot.strategies.planner import Planner
    from bot.strategies.registry import STRATEGIES as REGISTRY

    r = FileResult(origin)
    started = time.perf_counter()
    op = OpConfig(project="sweep", name="kernel", dir=Path("ops/kernel"), kernel_kind="mix")
    planner = Planner(op)
    try:
        specs, skipped = planner.specs(source, STRATEGIES)
    except Exception:  # noqa: BLE001 - a crash is what this sweep looks for
        r.findings.append("crash in discovery: " + traceback.format_exc(limit=-3).strip())
        r.seconds = time.perf_counter() - started
        return r
    r.specs = len(specs)
    for line in skipped:
        if not line.split(":", 2)[-1].strip():
            r.findings.append(f"dropped without a reason: {line!r}")
    npuir = "npuir" in source
    for spec in specs:
        try:
            current = planner._current(spec, source)
        except Exception:  # noqa: BLE001
            r.findings.append(
                f"crash reading {spec.key}: " + traceback.format_exc(limit=-3).strip()
            )
            continue
        site = knobs.locate(source, spec.key) if spec.kind == "knob" else None
        for new in spec.values:
            if new == current:
                continue
            try:
                if spec.kind == "knob":
                    assert spec.knob is not None
                    v = knobs.set_knob(source, spec.knob, new, spec.strategy, "kernel.py")
                else:
                    v = REGISTRY[spec.strategy].apply(source, spec, new, "kernel.py")
            except Exception:  # noqa: BLE001
                r.findings.append(
                    f"crash setting {spec.key}={new!r}: " + traceback.format_exc(limit=-3).strip()
                )
                continue
            if isinstance(v, Refusal):
                r.refusals += 1
                if not any(reason.strip() for reason in v.reasons):
                    r.findings.append(f"refusal without a reason: {spec.key}={new!r}")
                continue
            assert isinstance(v, Variant)
            r.variants += 1
            _check_variant(r, planner, spec, source, v, new, site, npuir)
    try:
        once = REGISTRY["vprefix"].once(source, "kernel.py")
    except Exception:  # noqa: BLE001
        r.findings.append("crash in vprefix: " + traceback.format_exc(limit=-3).strip())
        once = None
    if isinstance(once, Variant):
        r.variants += 1
        if once.source == source:
            r.findings.append("vprefix: variant equals its parent")
        elif not _parses(once.source):
            r.findings.append("vprefix: variant does not parse")
    r.seconds = time.perf_counter() - started
    return r


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def _check_variant(
    r: FileResult,
    planner: Planner,
    spec: KnobSpec,
    source: str,
    v: Variant,
    new: object,
    site: object,
    npuir: bool,
) -> None:
    """The checks every produced variant must pass (module docstring)."""
    what = f"{spec.key}={new!r}"
    if v.source == source:
        r.findings.append(f"no change: {what}")
        return
    if not _parses(v.source):
        r.findings.append(f"variant does not parse: {what}")
        return
    try:
        back = planner._current(spec, v.source)
    except Exception:  # noqa: BLE001
        r.findings.append(f"crash reading back {what}: " + traceback.format_exc(limit=-3).strip())
        return
    if back != new:
        r.findings.append(f"does not round-trip: {what} reads back as {back!r}")
    lines = _changed_lines(source, v.source)
    if spec.kind == "knob" and site is not None and hasattr(site, "line") and lines != {site.line}:
        r.findings.append(f"changed lines {sorted(lines)} besides the site {site.line}: {what}")
    if spec.kind == "flag" and not npuir:
        r.findings.append(f"multi-buffer flag set on a file with no NPUIR target: {what}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repos", nargs="+", type=Path, help="git directories (bare is fine)")
    parser.add_argument("--under", default="", help="only files under this folder")
    parser.add_argument("--half", choices=("look", "held", "both"), default="both")
    parser.add_argument("--limit", type=int, default=0, help="at most this many files (0: all)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per file")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write every file's result here")
    args = parser.parse_args()
    for repo in args.repos:
        if subprocess.run(
            ["git", "-C", str(repo), "rev-parse"], check=False, capture_output=True
        ).returncode:
            print(f"error: {repo} is not a git directory", file=sys.stderr)
            return 2
    files = [f for f in gather(args.repos, args.under) if args.half in ("both", half_of(f[1]))]
    files.sort(key=lambda f: hashlib.sha256(f[1].encode()).hexdigest())
    if args.limit:
        files = files[: args.limit]
    started = time.time()
    with multiprocessing.Pool(args.jobs, maxtasksperchild=50) as pool:
        results = pool.starmap(sweep_one, [(o, s, args.timeout) for o, s in files], chunksize=1)
    bad = [r for r in results if r.findings]
    print(
        f"{len(results)} files, {sum(r.specs for r in results)} spaces, "
        f"{sum(r.variants for r in results)} variants, {sum(r.refusals for r in results)} "
        f"refusals, {len(bad)} files with findings, {time.time() - started:.0f} s"
    )
    slow = sorted(results, key=lambda r: -r.seconds)[:3]
    print("slowest: " + ", ".join(f"{r.origin} {r.seconds:.1f} s" for r in slow))
    for r in bad:
        for finding in r.findings:
            print(f"{r.origin}: {finding.splitlines()[0] if 'crash' not in finding else finding}")
    if args.json:
        args.json.write_text(
            json.dumps([r.__dict__ for r in results], indent=1) + "\n", encoding="utf-8"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
