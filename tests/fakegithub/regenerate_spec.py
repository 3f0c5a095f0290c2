"""Cut GitHub's OpenAPI description down to the operations tunebot uses.

Usage (needs npm; run from anywhere):

    python tests/fakegithub/regenerate_spec.py [--openapi-version 23.0.2] [--examples-version 7.6.1]

It downloads `@octokit/openapi` and `@octokit/webhooks-examples` with `npm pack` into a
temporary directory, keeps only the operations in OPERATIONS plus the two webhooks the
bot handles (and every component they reference), and writes:

- tests/fakegithub/openapi.json            the cut-down spec
- tests/fakegithub/webhooks/*.json         payloads derived from the examples package,
                                           validated against the spec's webhook schemas
- tests/fakegithub/SOURCE.md               versions, how it was made, the MIT licence text
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (method, path) of every REST operation the bot (through PyGithub) sends.
OPERATIONS: list[tuple[str, str]] = [
    ("get", "/repos/{owner}/{repo}"),
    ("get", "/repos/{owner}/{repo}/pulls"),
    ("post", "/repos/{owner}/{repo}/pulls"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("patch", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("put", "/repos/{owner}/{repo}/pulls/{pull_number}/merge"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"),
    ("post", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"),
    ("post", "/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/labels"),
    ("get", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("patch", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("post", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions"),
    ("get", "/repos/{owner}/{repo}/collaborators/{username}/permission"),
    ("post", "/repos/{owner}/{repo}/statuses/{sha}"),
    ("get", "/repos/{owner}/{repo}/commits/{ref}/status"),
    ("get", "/repos/{owner}/{repo}/commits/{ref}/check-runs"),
    ("get", "/repos/{owner}/{repo}/git/matching-refs/{ref}"),
    ("delete", "/repos/{owner}/{repo}/git/refs/{ref}"),
]

# webhook key in the spec -> (event name in the examples package, action, derived file name)
WEBHOOKS: dict[str, tuple[str, str, str]] = {
    "issue-comment-created": ("issue_comment", "created", "issue_comment.pr.created.json"),
    "pull-request-review-submitted": (
        "pull_request_review",
        "submitted",
        "pull_request_review.approved.json",
    ),
}


def npm_pack(package: str, version: str, dest: Path) -> Path:
    """Download and unpack an npm package; returns its `package/` directory."""
    out = (
        subprocess.run(
            ["npm", "pack", f"{package}@{version}", "--silent"],
            cwd=dest,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    target = dest / package.replace("/", "_")
    target.mkdir()
    with tarfile.open(dest / out) as tar:
        tar.extractall(target, filter="data")
    return target / "package"


def _refs(node: object, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref)
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def _lookup(spec: dict, ref: str) -> object:
    node: object = spec
    for part in ref.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]  # type: ignore[index]
    return node


def cut(spec: dict, operations: list[tuple[str, str]], webhooks: list[str]) -> dict:
    """Keep the given operations and webhooks and the transitive closure of their $refs."""
    paths: dict[str, dict] = {}
    for method, path in operations:
        item = spec["paths"][path]
        kept = paths.setdefault(path, {k: v for k, v in item.items() if k == "parameters"})
        kept[method] = item[method]
    hooks_key = "x-webhooks" if "x-webhooks" in spec else "webhooks"
    hooks = {name: spec[hooks_key][name] for name in webhooks}
    pending: set[str] = set()
    _refs([paths, hooks], pending)
    done: set[str] = set()
    components: dict[str, dict] = {}
    while pending:
        ref = pending.pop()
        if ref in done:
            continue
        done.add(ref)
        _, _, section, name = ref.split("/", 3)
        node = _lookup(spec, ref)
        components.setdefault(section, {})[name] = node
        _refs(node, pending)
    return {
        "openapi": spec["openapi"],
        "info": spec["info"],
        "servers": spec.get("servers", []),
        "paths": paths,
        hooks_key: hooks,
        "components": {k: dict(sorted(v.items())) for k, v in sorted(components.items())},
    }


def webhook_schema(spec: dict, name: str) -> dict:
    hooks = spec.get("x-webhooks") or spec["webhooks"]
    body = hooks[name]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return {**body, "components": spec["components"]}


def _resolve(spec: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = _lookup(spec, schema["$ref"])  # type: ignore[assignment]
    return schema


def _minimal(spec: dict, schema: dict) -> object:
    """The smallest value a schema accepts (null where allowed); `complete` fills objects later."""
    schema = _resolve(spec, schema)
    if schema.get("nullable"):
        return None
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [_resolve(spec, s) for s in schema[key]]
            return _minimal(spec, next((o for o in options if o.get("nullable")), options[0]))
    if "allOf" in schema:
        return _minimal(spec, schema["allOf"][0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    return {"object": {}, "array": [], "string": "", "integer": 0, "number": 0, "boolean": False}[
        kind
    ]


def complete(spec: dict, schema: dict, payload: dict) -> dict:
    """Add required fields the examples package leaves out (its examples trail the spec)."""
    from openapi_schema_validator import OAS30Validator

    for _ in range(50):
        missing = [
            e for e in OAS30Validator(schema).iter_errors(payload) if e.validator == "required"
        ]
        if not missing:
            return payload
        for err in missing:
            target = payload
            for part in err.absolute_path:
                target = target[part]
            props = err.schema.get("properties", {})
            for name in err.validator_value:
                if name not in target:
                    target[name] = _minimal(spec, props.get(name, {}))
    return payload


def derive_payloads(examples: list[dict]) -> dict[str, dict]:
    """Payloads the examples package lacks: a comment on a pull request, an approving review."""

    def first(event: str, action: str, want=lambda e: True) -> dict:
        for entry in examples:
            if entry["name"] == event:
                for ex in entry["examples"]:
                    if ex.get("action") == action and want(ex):
                        return copy.deepcopy(ex)
        raise SystemExit(f"no {event}.{action} example in @octokit/webhooks-examples")

    comment = first("issue_comment", "created")
    issue = comment["issue"]
    api = comment["repository"]["url"]
    html = comment["repository"]["html_url"]
    number = issue["number"]
    # An issue comment on a pull request carries `issue.pull_request` (what GitHub sends).
    issue["pull_request"] = {
        "url": f"{api}/pulls/{number}",
        "html_url": f"{html}/pull/{number}",
        "diff_url": f"{html}/pull/{number}.diff",
        "patch_url": f"{html}/pull/{number}.patch",
        "merged_at": None,
    }
    comment["comment"]["body"] = "/tune rms_norm"
    comment["comment"]["author_association"] = "MEMBER"

    review = first("pull_request_review", "submitted")
    review["review"]["state"] = "approved"
    review["review"]["body"] = "Looks good"
    return {"issue-comment-created": comment, "pull-request-review-submitted": review}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--openapi-version", default="23.0.2")
    ap.add_argument("--examples-version", default="7.6.1")
    args = ap.parse_args(argv)
    from openapi_schema_validator import OAS30Validator

    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        openapi_dir = npm_pack("@octokit/openapi", args.openapi_version, tmpdir)
        examples_dir = npm_pack("@octokit/webhooks-examples", args.examples_version, tmpdir)
        full = json.loads((openapi_dir / "generated" / "api.github.com.json").read_text())
        licence = (openapi_dir / "LICENSE").read_text()
        examples = json.loads((examples_dir / "api.github.com" / "index.json").read_text())

    small = cut(full, OPERATIONS, list(WEBHOOKS))
    (HERE / "openapi.json").write_text(json.dumps(small, indent=1, sort_keys=False) + "\n")
    hooks_dir = HERE / "webhooks"
    hooks_dir.mkdir(exist_ok=True)
    for name, derived in derive_payloads(examples).items():
        payload = complete(small, webhook_schema(small, name), derived)
        errors = list(OAS30Validator(webhook_schema(small, name)).iter_errors(payload))
        if errors:
            raise SystemExit(f"derived {name} payload violates the spec: {errors[0].message}")
        (hooks_dir / WEBHOOKS[name][2]).write_text(json.dumps(payload, indent=1) + "\n")

    (HERE / "SOURCE.md").write_text(
        "# Where the fake GitHub's spec comes from\n\n"
        f"- `openapi.json`: cut from `@octokit/openapi@{args.openapi_version}` "
        "(generated/api.github.com.json, OpenAPI "
        f"{full['openapi']}, info.version {full['info']['version']}), keeping "
        f"{len(OPERATIONS)} operations, the webhooks {', '.join(WEBHOOKS)} and the components they reference.\n"
        f"- `webhooks/*.json`: derived from `@octokit/webhooks-examples@{args.examples_version}` "
        "(a comment on a pull request, an approving review) and validated against the webhook schemas above.\n"
        "- Regenerate: `python tests/fakegithub/regenerate_spec.py` (needs npm and network).\n\n"
        "## Licence of @octokit/openapi (MIT)\n\n```\n" + licence.strip() + "\n```\n"
    )
    print(f"wrote {HERE / 'openapi.json'} ({(HERE / 'openapi.json').stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
