"""Harness-mode L0 runner: kernel vs reference on generated inputs.

Writes per-output error metrics to --result; the parent decides pass/fail
from them (bot/measure/accuracy.py), so the rule lives in one place.
"""

from __future__ import annotations

import copy
import json

from bot.measure.runners.common import (
    OpContractError,
    attribute,
    base_parser,
    build_inputs,
    fail_contract,
    load_module,
    parse_args,
    write_result,
)

_FLOAT_PREFIXES = ("float", "bfloat", "complex")


def flatten(value) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in flatten(v)]
    return [value]


def tolerances(dtype: str, rtols: dict, atols: dict) -> tuple[float, float]:
    """Per-dtype (rtol, atol); integers and bools must match exactly."""
    if not dtype.startswith(_FLOAT_PREFIXES):
        return 0.0, 0.0
    return rtols.get(dtype, rtols.get("float32", 1e-4)), atols.get(
        dtype, atols.get("float32", 1e-4)
    )


def compare(got, want, rtols: dict, atols: dict, torch) -> dict:
    """Errors of one output, computed in float64 on the CPU.

    max_rel_err only counts elements whose reference exceeds atol: relative
    error against a ~0 reference says nothing. Mismatch follows
    torch.testing.assert_close: |got - want| > atol + rtol * |want|.
    """
    want_t, got_t = torch.as_tensor(want), torch.as_tensor(got)
    dtype = str(want_t.dtype).removeprefix("torch.")
    info: dict = {"dtype": dtype, "shape": list(want_t.shape)}
    if got_t.shape != want_t.shape:
        info["problem"] = (
            f"shape {list(got_t.shape)} differs from the reference's {list(want_t.shape)}"
        )
        return info
    rtol, atol = tolerances(dtype, rtols, atols)
    g = got_t.detach().to("cpu").to(torch.float64).reshape(-1)
    w = want_t.detach().to("cpu").to(torch.float64).reshape(-1)
    same_nan = torch.isnan(g) & torch.isnan(w)
    g = torch.where(same_nan, torch.zeros_like(g), g)
    w = torch.where(same_nan, torch.zeros_like(w), w)
    diff = (g - w).abs()
    ref = w.abs()
    bad = ~(diff <= atol + rtol * ref)  # NaN in only one of them counts as bad
    finite = ~torch.isnan(diff)
    meaningful = finite & (ref > atol)
    norms = float(g.norm() * w.norm())
    if norms > 0 and bool(finite.all()):
        cosine = float(torch.dot(g, w) / norms)
    elif bool(finite.all()) and float(diff.sum()) == 0.0:
        cosine = 1.0  # both all zero
    else:
        cosine = 0.0
    info.update(
        rtol=rtol,
        atol=atol,
        numel=int(diff.numel()),
        mismatched=int(bad.sum()),
        max_abs_err=float(diff[finite].max()) if bool(finite.any()) else 0.0,
        max_rel_err=float((diff[meaningful] / ref[meaningful]).max())
        if bool(meaningful.any())
        else 0.0,
        cosine=cosine,
        nan_mismatch=int((~finite).sum()),
    )
    return info


def main() -> None:
    p = base_parser(__doc__)
    p.add_argument("--reference", default="reference")
    p.add_argument("--rtol", default="{}", help="JSON: dtype -> rtol")
    p.add_argument("--atol", default="{}", help="JSON: dtype -> atol")
    args = parse_args(p)
    try:
        module = load_module(args.source)
    except OpContractError as exc:
        fail_contract(args.result, exc)
    try:
        kernel = attribute(module, args.entry, "the kernel under test")
        reference = attribute(module, args.reference, "the reference implementation")
        inputs = build_inputs(module, args.inputs, args.seed)
    except OpContractError as exc:
        fail_contract(
            args.result,
            OpContractError(
                f"{exc}. Harness mode compares the file's kernel with its reference on its "
                "get_inputs(); a file that runs its own check (an upstream example with an "
                "assert_close in its __main__) needs `accuracy.mode: command` in tune.yaml"
            ),
        )
    import torch  # only the harness needs torch; the timing runners do not

    rtols, atols = json.loads(args.rtol), json.loads(args.atol)
    want = flatten(reference(*copy.deepcopy(inputs)))  # a kernel may write into its inputs
    got = flatten(kernel(*copy.deepcopy(inputs)))
    if len(got) != len(want):
        write_result(
            args.result,
            {
                "outputs": [],
                "problem": f"kernel returned {len(got)} outputs, the reference {len(want)}",
            },
        )
        return
    outputs = []
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        info = {"index": i, **compare(g, w, rtols, atols, torch)}
        outputs.append(info)
        print(
            f"output {i} ({info['dtype']}): "
            + (
                info.get("problem")
                or f"max_abs_err={info['max_abs_err']:.3g} max_rel_err={info['max_rel_err']:.3g} "
                f"cosine={info['cosine']:.6f} mismatched={info['mismatched']}/{info['numel']}"
            )
        )
    write_result(args.result, {"outputs": outputs})


if __name__ == "__main__":
    main()
