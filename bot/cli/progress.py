"""Terminal output of a run: results on stdout (one line per step), progress on stderr.

Progress says the phase (baseline / L0 / timing / deciding / commit / delivery), the
iteration N of the maximum, the time elapsed and an estimate of the time left. On a
terminal it is one line rewritten in place; otherwise (a pipe, a log file) one line per
phase. NO_COLOR (https://no-color.org) turns colour off. An iteration line starts with its
numbers (within 80 columns), then the verdict and its reason, then the change and branch.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TextIO

import click

from bot.run.request import ProgressEvent
from bot.run.stops import stop_reason_text


def colour_on() -> bool:
    return "NO_COLOR" not in os.environ


def style(text: str, fg: str | None) -> str:
    return click.style(text, fg=fg) if fg and colour_on() else text


def fmt_duration(seconds: float) -> str:
    seconds = round(seconds)
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60}:{seconds % 60:02d}"
    )


def _us(value: float | None) -> str:
    return f"{value:.2f} us" if value is not None else "- us"


def _pct(value: float | None) -> str:
    return f"{value:+.1f}%" if value is not None else "-"


class Progress:
    """The stderr progress line, with an estimate from the iterations done so far."""

    def __init__(
        self, stream: TextIO | None = None, live: bool | None = None, clock=time.monotonic
    ) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.clock = clock
        self.started = clock()
        self.current: int | None = None
        self.iter_started: float | None = None
        self.durations: list[float] = []
        self.shown = False

    def estimate(self, n: int, max_iters: int | None) -> float | None:
        """Seconds left if every remaining iteration (this one included) takes the mean so far."""
        if not self.durations or not max_iters or n < 1:
            return None
        mean = sum(self.durations) / len(self.durations)
        spent = self.clock() - self.iter_started if self.iter_started is not None else 0.0
        return max(0.0, mean * (max_iters - n + 1) - spent)

    def phase(self, event: ProgressEvent) -> None:
        n, max_iters = event.iteration, event.data.get("max_iters")
        now = self.clock()
        if n is None:  # after the loop: no iteration, no estimate
            self.finished_iteration()
            self._write(f"[{fmt_duration(now - self.started)}] {event.op}: {event.message}")
            return
        if n >= 1 and n != self.current:
            if self.current is not None and self.current >= 1 and self.iter_started is not None:
                self.durations.append(now - self.iter_started)
            self.current, self.iter_started = n, now
        where = f"iter {n} of {max_iters}" if n >= 1 and max_iters else "baseline" if n == 0 else ""
        left = self.estimate(n, max_iters)
        line = f"[{fmt_duration(now - self.started)}] {event.op} {where}: {event.message}"
        if left is not None:
            line += f"; about {fmt_duration(left)} left at most"
        self._write(line)

    def finished_iteration(self) -> None:
        if self.current is not None and self.iter_started is not None:
            self.durations.append(self.clock() - self.iter_started)
        self.iter_started = None

    def _write(self, line: str) -> None:
        if self.live:
            self.stream.write("\r\x1b[2K" + line)
            self.shown = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def clear(self) -> None:
        """Remove the live line before a result line is printed."""
        if self.live and self.shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self.shown = False


class Printer:
    """The loop's progress callback for the terminal (`as_json`: one JSON object per line)."""

    def __init__(self, as_json: bool = False, progress: Progress | None = None) -> None:
        self.as_json = as_json
        self.progress = progress if progress is not None else Progress()
        self.max_iters: int | None = None

    def __call__(self, event: ProgressEvent) -> None:
        if event.kind == "phase":  # progress is for people: --json prints result events only
            self.max_iters = event.data.get("max_iters") or self.max_iters
            if not self.as_json:
                self.progress.phase(event)
            return
        self.progress.clear()
        if self.as_json:
            import dataclasses

            click.echo(json.dumps({"event": dataclasses.asdict(event)}, ensure_ascii=False))
            return
        click.echo(self.line(event))

    def line(self, event: ProgressEvent) -> str:
        if event.kind == "iteration" and event.verdict == "rejected":
            return (
                f"  rejected      {event.strategy or '-'}: {event.change or ''}  "
                f"refused before evaluation: {event.message}"
            )
        if event.kind == "iteration":
            self.progress.finished_iteration()
            colour = {"better": "green", "not_better": "yellow", "style": None}.get(
                event.verdict or "", "red"
            )
            max_iters = event.data.get("max_iters") or self.max_iters
            of = f"/{max_iters}" if max_iters else ""
            vs_best = _pct(event.data.get("gain_vs_best_pct"))
            # numbers first, so an 80-column terminal never breaks one; the change and branch last
            return (
                f"  iter {event.iteration}{of}  L0 {event.accuracy:<4}  {_us(event.latency_us):>11}  "
                f"{_pct(event.gain_pct):>6} vs baseline  {vs_best:>6} vs best  "
                + style(event.verdict or "", colour)
                + f": {event.message}  ({event.strategy}: {event.change}; {event.branch})"
            )
        if event.kind == "plan":
            lines = [
                f"plan for {event.op} (nothing will be run or written):",
                f"  settings: {json.dumps(event.data.get('settings', {}), ensure_ascii=False)}",
            ]
            return "\n".join(lines + [f"  - {line}" for line in event.message.splitlines()])
        if event.kind == "delivered":
            return f"delivered: branch {event.branch} ({(event.sha or '')[:10]})"
        if event.kind == "stop":
            d = event.data
            reason, _, warning = event.message.partition(" · ")  # "reason · noise warning"
            text = stop_reason_text(
                reason,
                max_iters=d.get("max_iters"),
                patience=d.get("patience"),
                target_us=d.get("target_us"),
            )
            return f"stop: {text}" + (f" · {warning}" if warning else "")
        return f"{event.kind}: {event.message}"
