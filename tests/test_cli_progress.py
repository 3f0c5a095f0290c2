"""The terminal's stop line keeps the stop reason's meaning when a noise warning rides along."""

from __future__ import annotations

from bot.cli.progress import Printer
from bot.run.request import ProgressEvent


def _stop(message: str) -> str:
    event = ProgressEvent(kind="stop", op="demo/rms_norm", message=message, data={"max_iters": 3})
    return Printer().line(event)


def test_stop_line_explains_the_reason() -> None:
    assert _stop("迭代上限") == "stop: 迭代上限 (iteration limit 3 reached)"


def test_stop_line_keeps_the_explanation_beside_a_noise_warning() -> None:
    warning = "this runner is too noisy to see gains below 10 % (warning level 10 %)"
    line = _stop(f"迭代上限 · {warning}")
    assert line == f"stop: 迭代上限 (iteration limit 3 reached) · {warning}"
