"""The `/tune` comment grammar: which lines are commands and what each one asks.

Pure: no network, no shell. Untrusted text from comments is only ever split on whitespace and
matched against strict patterns; it never reaches a shell or a path outside the repository's ops.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from bot.errors import TunebotError

GRAMMAR = """\
/tune <op> [<op>...] [--max-iters N] [--target-us X] [--strategies a,b]
/tune status
/tune cancel
/tune help
(ASCII only: plain spaces, digits 0-9; at most 3 commands per comment)"""

HELP = f"""\
**tunebot commands** (comment on a pull request; needs write permission or higher):

```
{GRAMMAR}
```

- `<op>`: an op of this repository, `<op>` or `<project>/<op>` (e.g. `rms_norm`).
- `--max-iters N`: stop after N iterations (1-100). `--target-us X`: stop once latency <= X us.
- `--strategies a,b`: only try these strategies (catalog names).
- `status`: where the runs of this pull request are. `cancel`: stop them after the current iteration.
- Commands are read as ASCII: separate words with plain spaces, write numbers with the digits 0-9.
  At most 3 commands per comment; the bot answers each comment once.
"""

# Op names: `op` or `project/op`; each part starts with a letter, digit or underscore, so
# `.`/`..` segments, absolute paths and shell metacharacters can never pass.
OP_NAME = re.compile(
    r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(/[A-Za-z0-9_][A-Za-z0-9_.-]{0,63})?$", re.ASCII
)
STRATEGY_NAME = re.compile(r"^[a-z0-9_][a-z0-9_-]{0,63}$", re.ASCII)
MAX_OPS = 8
MAX_COMMANDS = 3  # per comment: bounds the API calls one comment can cause
ASCII_BLANK = re.compile(r"[ \t]+")
Action = Literal["tune", "status", "cancel", "help"]


class CommandError(TunebotError):
    """A `/tune` line that does not follow the grammar; the message is the reply."""

    exit_code = 2

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"{problem}\n\nUsage:\n{GRAMMAR}")


@dataclass(frozen=True)
class TuneCommand:
    action: Action
    ops: tuple[str, ...] = ()
    max_iters: int | None = None
    target_us: float | None = None
    strategies: tuple[str, ...] | None = None


def _option_value(name: str, tokens: list[str], i: int) -> tuple[str, int]:
    token = tokens[i]
    if "=" in token:
        return token.split("=", 1)[1], i + 1
    if i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
        raise CommandError(f"`{name}` needs a value")
    return tokens[i + 1], i + 2


def parse_command(line: str) -> TuneCommand:
    """Parse one `/tune ...` line (ASCII only); raises CommandError with a helpful message."""
    for column, char in enumerate(line, 1):
        if not (char.isascii() and (char.isprintable() or char == "\t")):
            name = unicodedata.name(char, "a control character")
            raise CommandError(
                f"only ASCII is read: column {column} holds U+{ord(char):04X} ({name}); "
                "type plain spaces and the digits 0-9"
            )
    tokens = [t for t in ASCII_BLANK.split(line.strip(" \t")) if t]
    if not tokens or tokens[0] != "/tune":
        raise CommandError("a command starts with `/tune`")
    args = tokens[1:]
    if not args:
        raise CommandError("`/tune` needs an op name or one of status, cancel, help")
    if args[0] in ("status", "cancel", "help"):
        if len(args) > 1:
            raise CommandError(
                f"`/tune {args[0]}` takes no arguments (got `{' '.join(args[1:])[:60]}`)"
            )
        return TuneCommand(args[0])  # type: ignore[arg-type]
    ops: list[str] = []
    max_iters: int | None = None
    target_us: float | None = None
    strategies: tuple[str, ...] | None = None
    i = 0
    while i < len(args):
        token = args[i]
        name = token.split("=", 1)[0]
        if name == "--max-iters":
            value, i = _option_value(name, args, i)
            if not re.fullmatch(r"[0-9]{1,3}", value) or not 1 <= int(value) <= 100:
                raise CommandError(
                    f"`--max-iters` must be a whole number from 1 to 100 (got `{value[:20]}`)"
                )
            max_iters = int(value)
        elif name == "--target-us":
            value, i = _option_value(name, args, i)
            if not re.fullmatch(r"[0-9]{1,9}(\.[0-9]{1,6})?", value) or float(value) <= 0:
                raise CommandError(
                    f"`--target-us` must be a positive number of microseconds (got `{value[:20]}`)"
                )
            target_us = float(value)
        elif name == "--strategies":
            value, i = _option_value(name, args, i)
            names = tuple(s for s in value.split(",") if s)
            bad = [s for s in names if not STRATEGY_NAME.match(s)]
            if not names or bad:
                raise CommandError(
                    f"`--strategies` takes comma-separated strategy names (bad: `{(bad or [value])[0][:40]}`)"
                )
            strategies = names
        elif token.startswith("-"):
            raise CommandError(f"unknown option `{token[:40]}`")
        else:
            if not OP_NAME.match(token):
                raise CommandError(
                    f"`{token[:60]}` is not an op name (use `<op>` or `<project>/<op>`)"
                )
            if token not in ops:
                ops.append(token)
            i += 1
    if not ops:
        raise CommandError("name at least one op to tune, e.g. `/tune rms_norm`")
    if len(ops) > MAX_OPS:
        raise CommandError(f"at most {MAX_OPS} ops per command (got {len(ops)})")
    return TuneCommand("tune", tuple(ops), max_iters, target_us, strategies)


def command_lines(body: str) -> list[str]:
    """The lines of a comment that are commands (start with `/tune`, outside code blocks).

    `/tune` followed by anything but a letter, digit, `_` or `-` starts a command, so `/tune`
    followed by a no-break space is a command (answered: ASCII only), never silently skipped.
    """
    lines, fenced = [], False
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced and line.startswith("/tune") and not re.match(r"[A-Za-z0-9_-]", line[5:6]):
            lines.append(line)
    return lines
