"""Two variants timed alternately, each in its own child process, in lockstep on one core.

The parent forks one child per side before either variant is imported. A child loads its
variant and inputs, then waits for commands on a pipe: `u` runs one untimed call (warm-up),
`t` runs one timed call and answers with its wall and CPU time, `p` answers at once (the
parent's estimate of a round trip's own cost), `q` answers with the child's OS thread count
and ends it. Only one child runs at a time, so the pair shares the moment, the core and the
load, as two kernels in one process do, but not the interpreter, the allocator or the heap:
neither can change the other's speed through them.

The sides take turns in blocks of a few calls (a b b a ... by block), and the first call
after a switch is untimed: it refills the caches the other side used, so every timed call
finds its own data where a run of the kernel alone would. With turns of one call each, every
call started in the other kernel's data, and a kernel whose speed hangs on its cache ran up
to half again slower than alone (docs/measurement.md, "pairs").

The parent never runs variant code. It times every round trip with its own clock; the
backend checks each side's samples against those (bot/measure/backends/cpu.py). A child
that dies makes the parent end the same way (its exit code or its signal), so a crash or an
out-of-memory in a pair reads as it does in a single run. A child whose parent dies reads
end-of-file and exits.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import struct
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from bot.measure.runners.common import OpContractError, attribute, build_inputs, load_module

_SAMPLE = struct.Struct("<dd")  # wall us, cpu us
_COUNT = struct.Struct("<i")
PINGS = 15


class ChildGone(Exception):
    """A child closed its pipe: it crashed, was killed or exited."""


class ProtocolError(Exception):
    """A child wrote what the protocol does not allow: the variant wrote into tunebot's pipe."""


@dataclass(frozen=True)
class Hooks:
    """What a child needs from the runner: one timed call with clocks bound before any variant
    was imported, the runner's setup after the import (thread pins), its OS thread count."""

    timed: Callable[[Callable[..., Any], tuple], tuple[float, float]]
    prepare: Callable[[], None]
    os_threads: Callable[[], int]


@dataclass
class Side:
    pid: int
    source: Path
    cmd: int  # parent -> child
    data: int  # child -> parent
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    roundtrip: list[float] = field(default_factory=list)
    ping_us: float = 0.0
    threads: int = 1


def _read_exact(fd: int, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            raise ChildGone
        out += chunk
    return out


def _write(fd: int, data: bytes) -> None:
    try:
        os.write(fd, data)
    except BrokenPipeError:
        raise ChildGone from None


def current_cpu() -> int | None:
    """The CPU this process runs on now (Linux /proc), or None."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[36])  # field 39 of stat(5), counted after the command name
    except (OSError, IndexError, ValueError):
        return None


def _child(
    source: Path,
    module_name: str,
    entry: str,
    inputs_name: str,
    seed: int,
    cmd: int,
    data: int,
    hooks: Hooks,
) -> NoReturn:
    try:
        try:
            module = load_module(source, name=module_name)
            fn = attribute(module, entry, "the timed entry")
            inputs = build_inputs(module, inputs_name, seed)
        except OpContractError as exc:
            message = str(exc).encode()
            os.write(data, b"e" + _COUNT.pack(len(message)) + message)
            os._exit(3)
        hooks.prepare()
        # the collector's pass comes before "ready", in no call's round trip: in a process
        # holding torch it takes 50-100 ms, which the parent would otherwise count against
        # the first timed call (and refuse the samples as not accounting for it)
        gc.collect()
        gc.disable()
        os.write(data, b"r")
        while True:
            c = os.read(cmd, 1)
            if c == b"u":
                fn(*inputs)
                os.write(data, b"k")
            elif c == b"t":
                os.write(data, _SAMPLE.pack(*hooks.timed(fn, inputs)))
            elif c == b"p":
                os.write(data, b"k")
            else:  # b"q", or end-of-file: the parent is gone
                if c == b"q":
                    os.write(data, _COUNT.pack(hooks.os_threads()))
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
    except BaseException:  # noqa: BLE001 - the kernel's own error: its traceback, then exit 1
        import traceback

        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


def _spawn(
    source: Path,
    module_name: str,
    args: Any,
    cpu: int | None,
    closed_fds: list[int],
    hooks: Hooks,
) -> Side:
    cmd_r, cmd_w = os.pipe()
    data_r, data_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        for fd in (cmd_w, data_r, *closed_fds):
            with contextlib.suppress(OSError):
                os.close(fd)  # the result channel and the sibling's pipes stay with the parent
        if cpu is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, {cpu})
        _child(
            source,
            module_name,
            args.entry,
            args.inputs,
            args.seed,
            cmd_r,
            data_w,
            hooks,
        )
    os.close(cmd_r)
    os.close(data_w)
    return Side(pid, source, cmd_w, data_r)


def _expect(side: Side, byte: bytes) -> None:
    if _read_exact(side.data, 1) != byte:
        raise ProtocolError


def _ready(side: Side) -> None:
    """Wait for a child's `r`; a broken op contract arrives as an error message."""
    first = _read_exact(side.data, 1)
    if first == b"e":
        (n,) = _COUNT.unpack(_read_exact(side.data, _COUNT.size))
        raise OpContractError(_read_exact(side.data, min(n, 1 << 16)).decode(errors="replace"))
    if first != b"r":
        raise ProtocolError


def _ping(side: Side, clock: Callable[[], int]) -> None:
    trips = []
    for _ in range(PINGS):
        t0 = clock()
        _write(side.cmd, b"p")
        _expect(side, b"k")
        trips.append((clock() - t0) / 1000.0)
    trips.sort()
    side.ping_us = trips[len(trips) // 2]


def _end_like(side: Side) -> NoReturn:
    """A child died: end this process the same way. A child that closed its pipe but lives on
    gets a few seconds to exit, then is killed."""
    for _ in range(100):
        pid, status = os.waitpid(side.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.05)
    else:
        os.kill(side.pid, signal.SIGKILL)
        _, status = os.waitpid(side.pid, 0)
    sys.stdout.flush()
    sys.stderr.flush()
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


class PairBroken(Exception):
    """The pair cannot give trustworthy figures (the message says why)."""


def _kill(sides: Iterable[Side]) -> None:
    for side in sides:
        try:
            os.kill(side.pid, signal.SIGKILL)
            os.waitpid(side.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def block_order(repeats: int, block: int) -> list[str]:
    """Which side runs each timed call: blocks of `block` calls, a b b a a b ... by block."""
    block = max(1, min(block, repeats))
    order: list[str] = []
    i = 0
    while len(order) < 2 * repeats:
        for name in "ab" if i % 2 == 0 else "ba":
            order.extend(name * min(block, repeats - order.count(name)))
        i += 1
    return order


def time_pair_forked(
    args: Any,
    block: int,
    pinned: bool,
    hooks: Hooks,
    clock: Callable[[], int],
    started: Callable[[], None],
    keep_closed: list[int],
) -> dict:
    """Time `args.source` (a) and `args.source_b` (b) in two children; samples per side.

    Raises OpContractError when a variant breaks the op contract and PairBroken when one
    breaks the protocol; a child that dies ends this process the same way (see the module
    docstring)."""
    cpu = current_cpu() if pinned and hasattr(os, "sched_setaffinity") else None
    sides: dict[str, Side] = {}
    for name, source, module_name in (
        ("a", args.source, "tunebot_variant"),
        ("b", args.source_b, "tunebot_variant_b"),
    ):
        others = keep_closed + [fd for s in sides.values() for fd in (s.cmd, s.data)]
        sides[name] = _spawn(source, module_name, args, cpu, others, hooks)
    current = sides["a"]
    try:
        for side in sides.values():
            current = side
            _ready(side)
        # each side warms up in one turn of its own: warm-up calls that alternate never reach
        # the steady state, and the first timed turn then ran cold (up to 1.7x its later calls)
        for side in sides.values():
            current = side
            for _ in range(args.warmup):
                _write(side.cmd, b"u")
                _expect(side, b"k")
        for side in sides.values():
            current = side
            _ping(side, clock)
        started()
        previous = ""
        for name in block_order(args.repeats, block):
            current = side = sides[name]
            if name != previous and block > 1:
                # the first call after a switch refills the caches the other side used: untimed
                _write(side.cmd, b"u")
                _expect(side, b"k")
            previous = name
            t0 = clock()
            _write(side.cmd, b"t")
            wall, cpu_us = _SAMPLE.unpack(_read_exact(side.data, _SAMPLE.size))
            side.roundtrip.append((clock() - t0) / 1000.0)
            side.wall.append(wall)
            side.cpu.append(cpu_us)
        for side in sides.values():
            current = side
            _write(side.cmd, b"q")
            (side.threads,) = _COUNT.unpack(_read_exact(side.data, _COUNT.size))
            os.waitpid(side.pid, 0)
    except ChildGone:
        for side in sides.values():
            if side is not current:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(side.pid, signal.SIGKILL)
        _end_like(current)
    except ProtocolError:
        _kill(sides.values())
        name = "a" if current is sides["a"] else "b"
        raise PairBroken(
            f"the variant on side {name} ({current.source.name}) wrote into the pipe tunebot times "
            "it through; its figures cannot be trusted"
        ) from None
    except OpContractError:
        _kill(sides.values())
        raise
    a, b = sides["a"], sides["b"]
    return {
        "samples_us": a.wall,
        "cpu_samples_us": a.cpu,
        "b_samples_us": b.wall,
        "b_cpu_samples_us": b.cpu,
        "roundtrip_us": a.roundtrip,
        "b_roundtrip_us": b.roundtrip,
        "ping_us": [a.ping_us, b.ping_us],
        "threads": max(a.threads, b.threads),
        "isolated": True,
        "cpu": cpu,
    }
