"""Per-repository evidence: how each strategy has fared on each kernel kind.

Stored per op as `.tunebot/evidence/<project>/<op>.json` in the user's
repository. The loop plans with the sum of every such file at the base commit
(plus the older single `.tunebot/evidence.json`, read but no longer written),
records every evaluated iteration in its own op's file, and commits that file
on the delivery branch. One file per op means proposals for different ops never
touch the same file, so they merge in any order.

Weight (see docs/strategies.md): a smoothed win rate relative to the prior,
times a smoothed mean-gain factor, clamped to [0.25, 2]. With no data the
weight is exactly 1 and the catalog order stands.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bot.errors import ConfigError

EVIDENCE_PATH = ".tunebot/evidence.json"  # the older shared file: read for planning, never written
EVIDENCE_DIR = ".tunebot/evidence"


def op_evidence_path(project: str, op: str) -> str:
    """The file one op's runs write: `.tunebot/evidence/<project>/<op>.json`."""
    return f"{EVIDENCE_DIR}/{project}/{op}.json"


VERSION = 1
PRIOR_TRIES = 2.0  # pseudo-observations: 1 win in 2 tries (a 50 % prior)
PRIOR_WINS = 1.0
PRIOR_GAIN = 0.10  # mean gain of a win assumed by the prior
MIN_WEIGHT, MAX_WEIGHT = 0.25, 2.0


@dataclass
class Tally:
    tries: int = 0
    wins: int = 0
    gain_sum: float = 0.0  # sum of the gains of wins (relative, positive = faster)

    def to_json(self) -> dict:
        return {"tries": self.tries, "wins": self.wins, "gain_sum": round(self.gain_sum, 6)}


class Evidence:
    def __init__(self, tallies: dict[tuple[str, str], Tally] | None = None) -> None:
        self.tallies: dict[tuple[str, str], Tally] = dict(tallies or {})

    @classmethod
    def combined(cls, files: dict[str, str | None]) -> Evidence:
        """The sum of several evidence files ({path: text}), e.g. every op's file at one commit."""
        total = cls()
        for path, text in sorted(files.items()):
            for key, t in cls.load(text, path).tallies.items():
                mine = total.tallies.setdefault(key, Tally())
                mine.tries += t.tries
                mine.wins += t.wins
                mine.gain_sum = round(mine.gain_sum + t.gain_sum, 6)
        return total

    @classmethod
    def load(cls, text: str | None, path: str = EVIDENCE_PATH) -> Evidence:
        """Parse the file's text; None or empty means no evidence yet. `path` names it in errors."""
        if text is None or not text.strip():
            return cls()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                path,
                "(file)",
                f"not valid JSON ({exc.msg} at line {exc.lineno})",
                "fix the JSON or delete the file to start the evidence afresh",
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("strategies", {}), dict):
            raise ConfigError(
                path,
                "strategies",
                "must be a mapping strategy -> kind -> tally",
                "delete the file to start the evidence afresh",
            )
        tallies: dict[tuple[str, str], Tally] = {}
        for strategy, kinds in data.get("strategies", {}).items():
            if not isinstance(kinds, dict):
                raise ConfigError(
                    path,
                    f"strategies.{strategy}",
                    "must map kernel kinds to tallies",
                    "delete the file to start the evidence afresh",
                )
            for kind, t in kinds.items():
                try:
                    tally = Tally(int(t["tries"]), int(t["wins"]), float(t.get("gain_sum", 0.0)))
                except (KeyError, TypeError, ValueError):
                    raise ConfigError(
                        path,
                        f"strategies.{strategy}.{kind}",
                        "needs integer 'tries' and 'wins' and a number 'gain_sum'",
                        "fix the entry or delete the file",
                    ) from None
                if tally.tries < 0 or not 0 <= tally.wins <= tally.tries:
                    raise ConfigError(
                        path,
                        f"strategies.{strategy}.{kind}",
                        "needs 0 <= wins <= tries",
                        "fix the entry or delete the file",
                    )
                tallies[(strategy, kind)] = tally
        return cls(tallies)

    def record(self, strategy: str, kind: str, gain: float | None, improved: bool) -> None:
        """One evaluated attempt of `strategy` on a `kind` kernel."""
        t = self.tallies.setdefault((strategy, kind), Tally())
        t.tries += 1
        if improved:
            t.wins += 1
            # rounded as stored, so a reloaded file weighs exactly like the in-memory one
            t.gain_sum = round(t.gain_sum + max(0.0, gain or 0.0), 6)

    def tally(self, strategy: str, kind: str) -> Tally:
        return self.tallies.get((strategy, kind), Tally())

    def weight(self, strategy: str, kind: str) -> float:
        """Multiplier of the strategy's catalog score for this kind; 1.0 without data."""
        t = self.tally(strategy, kind)
        if t.tries == 0:
            return 1.0
        prior_rate = PRIOR_WINS / PRIOR_TRIES
        rate = (PRIOR_WINS + t.wins) / (PRIOR_TRIES + t.tries)
        mean_gain = (PRIOR_GAIN * PRIOR_WINS + t.gain_sum) / (PRIOR_WINS + t.wins)
        w = (rate / prior_rate) * (mean_gain / PRIOR_GAIN) ** 0.5
        return round(min(MAX_WEIGHT, max(MIN_WEIGHT, w)), 6)

    def dumps(self) -> str:
        """Deterministic text: sorted keys, rounded numbers, trailing newline (clean merges)."""
        strategies: dict[str, dict[str, dict]] = {}
        for (strategy, kind), t in sorted(self.tallies.items()):
            strategies.setdefault(strategy, {})[kind] = t.to_json()
        return (
            json.dumps({"version": VERSION, "strategies": strategies}, indent=2, sort_keys=True)
            + "\n"
        )
