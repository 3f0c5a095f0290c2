"""Shared by the runners: load a variant file by path, build its inputs, report.

Results go to the parent on a channel (`Channel`): the write end of a pipe the parent
passed by descriptor number, with a nonce read from stdin before the variant is imported,
so nothing the kernel writes to a path can become the result, and a line without the
nonce is noticed by the parent. `--result PATH` (a plain file) remains for the profiler
backends, whose launcher cannot pass a descriptor through msprof.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

EXIT_BAD_OP = 3  # the op module breaks the contract (missing entry, inputs not a tuple)


class OpContractError(Exception):
    """The variant module lacks what the op contract requires."""


def load_module(source: Path, name: str = "tunebot_variant") -> ModuleType:
    """Import `source` by path; its own directory and the working directory are importable
    (sibling helpers).

    The runner's own flags are parsed before this, so the variant sees the command line of
    `python <source>` with no flags: upstream example files call a strict `parse_args()` at
    import time, which would otherwise exit on "unrecognized arguments: --source ...". A
    variant that exits while being imported is an op-contract error naming the exit code."""
    source = source.resolve()
    # the variant's folder, then the working directory, as `python <file>` run there would see
    # them; only now, after the runner's own imports (sandbox.runner_argv)
    for folder in (os.getcwd(), str(source.parent)):
        if folder not in sys.path[:2]:
            sys.path.insert(0, folder)
    sys.argv = [str(source)]
    spec = importlib.util.spec_from_file_location(name, source)
    if spec is None or spec.loader is None:
        raise OpContractError(f"cannot import {source}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        raise OpContractError(
            f"{source.name} exited with code {exc.code!r} while being imported (a sys.exit() or a "
            "failed argparse parse_args() at module level); tunebot imports the file with no "
            'command-line flags, so move that code under `if __name__ == "__main__":`'
        ) from None
    return module


def attribute(module: ModuleType, name: str, what: str) -> Callable[..., Any]:
    fn = getattr(module, name, None)
    if not callable(fn):
        raise OpContractError(
            f"{module.__file__} has no function '{name}' ({what}); define it or set its name in tune.yaml"
        )
    return fn


def build_inputs(module: ModuleType, inputs_name: str, seed: int) -> tuple:
    make = attribute(module, inputs_name, "the input generator")
    try:
        inputs = make(seed=seed)
    except TypeError:
        inputs = make()  # generators without a seed parameter are allowed
    if not isinstance(inputs, (tuple, list)):
        inputs = (inputs,)
    return tuple(inputs)


def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--source", type=Path, required=True, help="variant file to import")
    p.add_argument("--entry", default="kernel")
    p.add_argument("--inputs", default="get_inputs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--result", type=Path, help="JSON result file to write (default: the parent's channel)"
    )
    return p


class Channel:
    """The runner's end of the result channel (see the module docstring)."""

    def __init__(self, fd: int, nonce: str) -> None:
        self._fd, self._nonce = fd, nonce

    @property
    def fd(self) -> int:
        return self._fd

    def send(self, kind: str, data: object = None) -> None:
        line = (
            json.dumps({"n": self._nonce, "k": kind, "d": data}, allow_nan=False).encode() + b"\n"
        )
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view) :]

    def finish(self, payload: dict, code: int = 0) -> NoReturn:
        """Send the result and end the process at once: nothing the kernel registered to run at
        exit (atexit, finalizers) gets a chance to send or change anything afterwards."""
        self.send("result", payload)
        os.close(self._fd)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def parse_args(p: argparse.ArgumentParser) -> argparse.Namespace:
    """Parse the runner's arguments and open the result channel before any variant code runs."""
    args = p.parse_args()
    fd = os.environ.pop("TUNEBOT_RESULT_FD", None)
    if args.result is None:
        if fd is None:
            p.error("--result is required when not started by tunebot")
        nonce = sys.stdin.buffer.readline().decode().strip()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # the nonce is read; the kernel gets an empty stdin
        os.close(devnull)
        os.set_inheritable(int(fd), False)  # the kernel's own child processes do not inherit it
        args.result = Channel(int(fd), nonce)
    return args


def mark(target: Path | Channel, kind: str) -> None:
    """Tell the parent a phase starts now (e.g. "timing"): it stamps the arrival with its own clock."""
    if isinstance(target, Channel):
        target.send(kind)


def write_result(target: Path | Channel, payload: dict, code: int = 0) -> None:
    if isinstance(target, Channel):
        target.finish(payload, code)
    target.write_text(json.dumps(payload), encoding="utf-8")


def fail_contract(target: Path | Channel, exc: OpContractError) -> NoReturn:
    print(f"tunebot: {exc}", file=sys.stderr)
    write_result(target, {"error": str(exc)}, EXIT_BAD_OP)
    sys.exit(EXIT_BAD_OP)


def load_entry(args: argparse.Namespace, what: str) -> tuple[Callable[..., Any], tuple]:
    """The variant's entry and its inputs; a broken op contract is reported on --result and exits."""
    try:
        module = load_module(args.source)
        return attribute(module, args.entry, what), build_inputs(module, args.inputs, args.seed)
    except OpContractError as exc:
        fail_contract(args.result, exc)


def to_device(value: Any, torch: ModuleType, device: str) -> Any:
    """Move every tensor in (nested tuples/lists of) inputs to `device`."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(v, torch, device) for v in value)
    return value
