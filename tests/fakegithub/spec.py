"""The cut-down GitHub OpenAPI description: routing, examples and validation.

Every request the fake receives and every answer it gives is checked here against
tests/fakegithub/openapi.json (see SOURCE.md); problems are returned as strings so the
fake can collect them and each test can assert there were none.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from openapi_schema_validator import OAS30Validator

HERE = Path(__file__).resolve().parent
SPEC_PATH = HERE / "openapi.json"
WEBHOOKS_DIR = HERE / "webhooks"


@lru_cache(maxsize=1)
def load_spec() -> dict:
    return json.loads(SPEC_PATH.read_text())


def resolve(node: dict) -> dict:
    spec = load_spec()
    while isinstance(node, dict) and "$ref" in node:
        target: object = spec
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]  # type: ignore[index]
        node = target  # type: ignore[assignment]
    return node


def validate(schema: dict, instance: object) -> list[str]:
    """Errors of `instance` against an OpenAPI 3.0 schema (refs resolve into the spec's components)."""
    root = {**schema, "components": load_spec()["components"]}
    validator = OAS30Validator(root, format_checker=OAS30Validator.FORMAT_CHECKER)
    errors = [
        e
        for e in validator.iter_errors(instance)
        # GitHub's spec pairs `nullable: true` with an `enum` lacking null (e.g. a running check's
        # `conclusion`); read it the OpenAPI 3.0.0 way: null is allowed.
        if not (
            e.instance is None
            and e.validator == "enum"
            and isinstance(e.schema, dict)
            and e.schema.get("nullable")
        )
    ]
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:300]}" for e in errors]


@dataclass(frozen=True)
class Operation:
    method: str
    template: str
    op_id: str
    regex: re.Pattern[str]
    definition: dict
    shared_params: tuple[dict, ...]

    @property
    def parameters(self) -> list[dict]:
        own = [resolve(p) for p in self.definition.get("parameters", [])]
        names = {(p["name"], p["in"]) for p in own}
        return own + [resolve(p) for p in self.shared_params if (p["name"], p["in"]) not in names]


def _compile(template: str) -> re.Pattern[str]:
    out = ""
    for literal, name in re.findall(r"([^{]*)(?:\{(\w+)\})?", template):
        out += re.escape(literal)
        if name:
            # Git refs contain slashes (heads/tunebot/op/v1); every other parameter is one segment.
            out += (
                f"(?P<{name}>.+)" if name == "ref" and "/git/" in template else f"(?P<{name}>[^/]+)"
            )
    return re.compile(f"^{out}$")


@lru_cache(maxsize=1)
def operations() -> tuple[Operation, ...]:
    ops = []
    for template, item in load_spec()["paths"].items():
        shared = tuple(item.get("parameters", []))
        for method, definition in item.items():
            if method == "parameters":
                continue
            ops.append(
                Operation(
                    method.upper(),
                    template,
                    definition["operationId"],
                    _compile(template),
                    definition,
                    shared,
                )
            )
    # The most literal template wins (…/commits/{ref}/status before a looser match).
    return tuple(sorted(ops, key=lambda o: -len(re.sub(r"\{\w+\}", "", o.template))))


def match(method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
    for op in operations():
        if op.method != method:
            continue
        m = op.regex.match(path)
        if m:
            return op, m.groupdict()
    return None


def _coerce(value: str, schema: dict) -> object:
    kind = schema.get("type")
    if kind == "integer" and re.fullmatch(r"-?\d+", value):
        return int(value)
    if kind == "boolean" and value in ("true", "false"):
        return value == "true"
    return value


def check_request(
    op: Operation,
    path_params: dict[str, str],
    query: dict[str, list[str]],
    body: object,
    has_body: bool,
) -> list[str]:
    problems: list[str] = []
    where = f"{op.method} {op.template}"
    declared = {(p["name"], p["in"]): p for p in op.parameters}
    for name, value in path_params.items():
        param = declared.get((name, "path"))
        if param is None:
            problems.append(f"{where}: undeclared path parameter {name}")
            continue
        problems += [
            f"{where}: path {name}: {e}"
            for e in validate(param["schema"], _coerce(value, param["schema"]))
        ]
    for name, values in query.items():
        param = declared.get((name, "query"))
        if param is None:
            problems.append(f"{where}: undeclared query parameter {name!r}")
            continue
        for value in values:
            problems += [
                f"{where}: query {name}: {e}"
                for e in validate(param["schema"], _coerce(value, param["schema"]))
            ]
    for (name, loc), param in declared.items():
        if loc == "query" and param.get("required") and name not in query:
            problems.append(f"{where}: missing required query parameter {name}")
    request_body = op.definition.get("requestBody")
    if request_body is None:
        if has_body:
            problems.append(f"{where}: sent a body but the operation takes none")
    elif not has_body:
        if resolve(request_body).get("required"):
            problems.append(f"{where}: required request body missing")
    else:
        schema = resolve(request_body)["content"]["application/json"]["schema"]
        problems += [f"{where}: request body: {e}" for e in validate(schema, body)]
    return problems


def response_schema(op: Operation, status: int) -> tuple[dict | None, list[str]]:
    responses = op.definition["responses"]
    entry = responses.get(str(status)) or responses.get("default")
    if entry is None:
        return None, [
            f"{op.method} {op.template}: status {status} is not a declared response ({', '.join(responses)})"
        ]
    content = resolve(entry).get("content", {}).get("application/json")
    return (content or {}).get("schema"), []


def check_response(op: Operation, status: int, body: object) -> list[str]:
    schema, problems = response_schema(op, status)
    if problems:
        return problems
    if schema is None:
        return (
            [f"{op.method} {op.template}: status {status} has no body in the spec"]
            if body is not None
            else []
        )
    return [f"{op.method} {op.template} -> {status}: {e}" for e in validate(schema, body)]


def example(op_id: str, status: int) -> object:
    """A deep copy of the spec's own example answer of an operation."""
    for op in operations():
        if op.op_id == op_id:
            entry = resolve(op.definition["responses"][str(status)])
            examples = entry["content"]["application/json"]["examples"]
            first = resolve(next(iter(examples.values())))
            return copy.deepcopy(first["value"])
    raise KeyError(op_id)


def webhook_schema(name: str) -> dict:
    spec = load_spec()
    hooks = spec.get("x-webhooks") or spec["webhooks"]
    return hooks[name]["post"]["requestBody"]["content"]["application/json"]["schema"]


def webhook_template(file_name: str) -> dict:
    return json.loads((WEBHOOKS_DIR / file_name).read_text())
