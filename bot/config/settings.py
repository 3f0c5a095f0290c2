"""The effective settings of one run: command-line flags > the op's tune.yaml (and DESIGN.md
target) > `.tunebot.yml` defaults.
"""

from __future__ import annotations

from bot.config.checker import Checker
from bot.config.opfile import strategy_ids
from bot.config.schema import OpConfig, RepoConfig, RunSettings


def effective_settings(
    cfg: RepoConfig,
    op: OpConfig,
    max_iters: int | None = None,
    target_us: float | None = None,
    strategies: tuple[str, ...] | None = None,
    patience: int | None = None,
    noise_floor: float | None = None,
) -> RunSettings:
    """Command-line flags > the op's tune.yaml (and DESIGN.md target) > `.tunebot.yml` defaults."""
    flags = Checker("command line")
    if max_iters is not None:
        flags.integer(max_iters, "--max-iters", minimum=1, example=10)
    if patience is not None:
        flags.integer(patience, "--patience", minimum=1, example=3)
    if target_us is not None:
        target_us = flags.number(target_us, "--target-us", above=0, example="120")
    if noise_floor is not None:
        noise_floor = flags.number(noise_floor, "--noise-floor", minimum=0, below=1, example="0.03")
    strategies = (
        strategy_ids(flags, tuple(strategies), "--strategies", indexed=False)
        if strategies
        else None
    )

    def pick(flag, from_op, from_repo):
        if flag is not None:
            return flag
        return from_op if from_op is not None else from_repo

    return RunSettings(
        max_iters=pick(max_iters, op.max_iters, cfg.max_iters),
        patience=pick(patience, op.patience, cfg.patience),
        noise_floor=pick(noise_floor, op.noise_floor, cfg.noise_floor),
        target_us=pick(target_us, op.target_us, cfg.target_us),
        strategies=pick(strategies, op.strategies, None),
        noise_warn=cfg.noise_warn,
    )
