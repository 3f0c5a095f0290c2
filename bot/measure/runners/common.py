"""Shared by the runners: load a variant file by path, build its inputs, report."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, NoReturn

EXIT_BAD_OP = 3  # the op module breaks the contract (missing entry, inputs not a tuple)


class OpContractError(Exception):
    """The variant module lacks what the op contract requires."""


def load_module(source: Path, name: str = "tunebot_variant") -> ModuleType:
    """Import `source` by path; its own directory is importable (sibling helpers)."""
    source = source.resolve()
    sys.path.insert(0, str(source.parent))
    spec = importlib.util.spec_from_file_location(name, source)
    if spec is None or spec.loader is None:
        raise OpContractError(f"cannot import {source}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def attribute(module: ModuleType, name: str, what: str) -> Callable[..., Any]:
    fn = getattr(module, name, None)
    if not callable(fn):
        raise OpContractError(
            f"{module.__file__} has no function '{name}' ({what}); define it or set its name in tune.yaml")
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
    p.add_argument("--result", type=Path, required=True, help="JSON result file to write")
    return p


def write_result(path: Path, payload: dict) -> None:
    path.write_text(json.dumps(payload), encoding="utf-8")


def fail_contract(path: Path, exc: OpContractError) -> NoReturn:
    write_result(path, {"error": str(exc)})
    print(f"tunebot: {exc}", file=sys.stderr)
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
