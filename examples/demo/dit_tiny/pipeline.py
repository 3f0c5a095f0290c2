"""dit_tiny: a small diffusion-transformer pipeline on the CPU, the demo model target of tunebot.

A stand-in for a MindIE-SD pipeline (DESIGN.md says which table row each setting stands for):
a text "encoder" (fixed embeddings), a DiT of a few adaLN blocks run for a fixed number of
denoising steps with classifier-free guidance, and a small convolutional "VAE" decoder. Every
run uses the same seed, so outputs are comparable between runs.

    python pipeline.py --benchmark   prints tunebot.benchmark/v1 JSON (latency samples, stage
                                     times, workload facts); writes the output latent to
                                     $TUNEBOT_OUTPUT_DIR/latent.pt when that is set
    python pipeline.py --analysis    prints a tunebot.analysis/v1 report of one instrumented run
    python pipeline.py --quality     cosine of $TUNEBOT_OUTPUT_DIR vs $TUNEBOT_REFERENCE_DIR

The settings are read from settings.yaml beside this file (or $DIT_TINY_SETTINGS).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
import yaml
from torch import nn

torch.set_num_threads(1)  # stable timing on a shared machine
warnings.filterwarnings("ignore")  # torch.ao deprecation notes would clutter the JSON stream

HERE = Path(__file__).resolve().parent
SEED = 0
LATENT = (4, 32, 32)  # channels, height, width of the latent
PATCH = 2
DIM, HEADS, BLOCKS, MLP = 192, 4, 4, 4
STEPS = 8
GUIDANCE = 4.0
TEXT_TOKENS = 16
SAMPLES = 9  # timed pipeline runs per benchmark (after one warm-up)

DEFAULTS = {"fused": False, "quantize_linear": False, "attention_window": 0, "step_cache": 0, "cfg_batch": False}


def load_settings() -> dict:
    path = Path(os.environ.get("DIT_TINY_SETTINGS", HERE / "settings.yaml"))
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    unknown = set(data) - set(DEFAULTS)
    if unknown:
        raise SystemExit(f"{path}: unknown settings {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    return {**DEFAULTS, **data}


# ---------------------------------------------------------------- the model

class Timer:
    """Per-class wall time of one instrumented run (analysis mode only)."""

    def __init__(self) -> None:
        self.on = False
        self.totals = {"matmul": 0.0, "attention": 0.0}

    def wrap(self, kind: str, fn, *args):
        if not self.on:
            return fn(*args)
        start = time.perf_counter()
        out = fn(*args)
        self.totals[kind] += time.perf_counter() - start
        return out


TIMER = Timer()


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(DIM, elementwise_affine=False)
        self.norm2 = nn.LayerNorm(DIM, elementwise_affine=False)
        self.q, self.k, self.v = nn.Linear(DIM, DIM), nn.Linear(DIM, DIM), nn.Linear(DIM, DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.fc1, self.fc2 = nn.Linear(DIM, MLP * DIM), nn.Linear(MLP * DIM, DIM)
        self.ada = nn.Linear(DIM, 6 * DIM)
        self.qkv: nn.Linear | None = None  # the fused projection (fused path)
        self.fused = False
        self.window = 0

    def fuse(self) -> None:
        """One QKV projection instead of three (same weights, concatenated)."""
        qkv = nn.Linear(DIM, 3 * DIM)
        with torch.no_grad():
            qkv.weight.copy_(torch.cat([self.q.weight, self.k.weight, self.v.weight]))
            qkv.bias.copy_(torch.cat([self.q.bias, self.k.bias, self.v.bias]))
        self.qkv, self.fused = qkv, True

    def lin(self, layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return TIMER.wrap("matmul", layer, x)

    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        b, s, _ = q.shape
        q, k, v = (t.view(b, s, HEADS, DIM // HEADS).transpose(1, 2) for t in (q, k, v))
        if self.window and self.window < s:  # block-local (windowed) attention: s/w blocks of w tokens
            w = self.window
            q, k, v = (t.reshape(b, HEADS, s // w, w, DIM // HEADS) for t in (q, k, v))
        if self.fused:
            out = F.scaled_dot_product_attention(q, k, v)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(DIM // HEADS)
            out = scores.softmax(-1) @ v
        return out.reshape(b, HEADS, s, DIM // HEADS).transpose(1, 2).reshape(b, s, DIM)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        shift1, scale1, gate1, shift2, scale2, gate2 = self.lin(self.ada, F.silu(c)).unsqueeze(1).chunk(6, dim=-1)
        if self.fused:
            h = torch.addcmul(shift1, self.norm1(x), 1 + scale1)
            q, k, v = self.lin(self.qkv, h).chunk(3, dim=-1)
        else:
            h = self.norm1(x) * (1 + scale1) + shift1
            q, k, v = self.lin(self.q, h), self.lin(self.k, h), self.lin(self.v, h)
        a = TIMER.wrap("attention", self.attention, q, k, v)
        x = x + gate1 * self.lin(self.proj, a)
        h = torch.addcmul(shift2, self.norm2(x), 1 + scale2) if self.fused else self.norm2(x) * (1 + scale2) + shift2
        return x + gate2 * self.lin(self.fc2, F.gelu(self.lin(self.fc1, h)))


class DiT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        c = LATENT[0] * PATCH * PATCH
        self.embed = nn.Linear(c, DIM)
        self.text = nn.Linear(DIM, DIM)
        self.time = nn.Sequential(nn.Linear(DIM, DIM), nn.SiLU(), nn.Linear(DIM, DIM))
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.out = nn.Linear(DIM, c)
        self.pos = nn.Parameter(torch.randn(1, (LATENT[1] // PATCH) * (LATENT[2] // PATCH), DIM) * 0.02)
        self.cache_interval = 0
        self.cache: dict[str, torch.Tensor] = {}
        # Scaled so that every part matters to the output, as in a trained model: stronger adaLN
        # modulation, sharper attention (so a window loses something) and a larger velocity.
        with torch.no_grad():
            for block in self.blocks:
                block.ada.weight.mul_(3.0)
                block.q.weight.mul_(3.0)
                block.k.weight.mul_(3.0)
            self.out.weight.mul_(4.0)

    def forward(self, tokens: torch.Tensor, t: torch.Tensor, text: torch.Tensor, step: int, branch: str) -> torch.Tensor:
        freqs = torch.exp(-math.log(1e4) * torch.arange(DIM // 2) / (DIM // 2))
        temb = torch.cat([torch.sin(t[:, None] * freqs), torch.cos(t[:, None] * freqs)], dim=-1)
        c = self.time(temb) + self.text(text).mean(1)
        x = self.embed(tokens) + self.pos
        x = self.blocks[0](x, c)
        key = branch
        # step cache: on steps that are not a multiple of the interval, the deeper blocks'
        # contribution of the last full step is reused instead of recomputed
        if self.cache_interval and step % self.cache_interval and key in self.cache:
            x = x + self.cache[key]
        else:
            first = x
            for block in self.blocks[1:]:
                x = block(x, c)
            self.cache[key] = x - first
        return self.out(x)


class Decoder(nn.Module):
    """The "VAE": latent 4x32x32 -> image 3x64x64."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(LATENT[0], 32, 4, stride=2, padding=1)
        self.conv = nn.Conv2d(32, 3, 3, padding=1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv(F.silu(self.up(z))))


def patchify(z: torch.Tensor) -> torch.Tensor:
    b, ch, h, w = z.shape
    z = z.reshape(b, ch, h // PATCH, PATCH, w // PATCH, PATCH).permute(0, 2, 4, 1, 3, 5)
    return z.reshape(b, (h // PATCH) * (w // PATCH), ch * PATCH * PATCH)


def unpatchify(x: torch.Tensor) -> torch.Tensor:
    ch, h, w = LATENT
    b = x.shape[0]
    x = x.reshape(b, h // PATCH, w // PATCH, ch, PATCH, PATCH).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, ch, h, w)


class Pipeline:
    def __init__(self, settings: dict) -> None:
        torch.manual_seed(SEED)
        self.dit, self.decoder = DiT().eval(), Decoder().eval()
        self.cond = torch.randn(1, TEXT_TOKENS, DIM)
        self.uncond = torch.zeros(1, TEXT_TOKENS, DIM)
        self.noise = torch.randn(1, *LATENT)
        self.settings = settings
        for block in self.dit.blocks:
            if settings["fused"]:
                block.fuse()
            block.window = int(settings["attention_window"])
        self.dit.cache_interval = int(settings["step_cache"])
        if settings["quantize_linear"]:
            from torch.ao.quantization import quantize_dynamic

            self.dit = quantize_dynamic(self.dit, {nn.Linear}, dtype=torch.qint8)
        self.stages = {"text_encoder": 0.0, "dit": 0.0, "vae": 0.0}

    def velocity(self, z: torch.Tensor, t: float, step: int) -> torch.Tensor:
        tokens = patchify(z)
        if self.settings["cfg_batch"]:  # conditional and unconditional branch in one batch of 2
            both = self.dit(torch.cat([tokens, tokens]), torch.full((2,), t), self.text_both, step, "both")
            cond, uncond = both.chunk(2)
        else:
            cond = self.dit(tokens, torch.full((1,), t), self.text_cond, step, "cond")
            uncond = self.dit(tokens, torch.full((1,), t), self.text_uncond, step, "uncond")
        return unpatchify(uncond + GUIDANCE * (cond - uncond))

    @torch.inference_mode()
    def __call__(self) -> tuple[torch.Tensor, torch.Tensor]:
        start = time.perf_counter()
        self.text_cond, self.text_uncond = self.cond.tanh(), self.uncond.tanh()
        self.text_both = torch.cat([self.text_cond, self.text_uncond])
        self.dit.cache = {}
        t1 = time.perf_counter()
        z = self.noise.clone()
        for step in range(STEPS):  # Euler steps of a rectified flow from t=1 to t=0
            t = 1.0 - step / STEPS
            z = z - (1.0 / STEPS) * self.velocity(z, t * 1000.0, step)
        t2 = time.perf_counter()
        image = self.decoder(z)
        t3 = time.perf_counter()
        for name, seconds in (("text_encoder", t1 - start), ("dit", t2 - t1), ("vae", t3 - t2)):
            self.stages[name] += seconds
        return z, image


# ---------------------------------------------------------------- modes

def workload() -> dict:
    return {"model": "dit_tiny", "resolution": f"{LATENT[1] * 2}x{LATENT[2] * 2}", "frames": 1, "steps": STEPS,
            "precision": "fp32", "device_count": 1, "hardware": "cpu"}


def benchmark(settings: dict) -> dict:
    pipe = Pipeline(settings)
    pipe()  # warm-up
    pipe.stages = dict.fromkeys(pipe.stages, 0.0)
    samples = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        z, image = pipe()
        samples.append((time.perf_counter() - start) * 1000.0)
    out_dir = os.environ.get("TUNEBOT_OUTPUT_DIR")
    if out_dir:
        torch.save({"latent": z, "image": image}, Path(out_dir) / "latent.pt")
    return {"schema": "tunebot.benchmark/v1", "latency_ms": samples,
            "stages_ms": {k: v * 1000.0 / SAMPLES for k, v in pipe.stages.items()},
            "workload": workload(), "settings": settings, "mindiesd_version": None}


def analysis(settings: dict) -> dict:
    pipe = Pipeline(settings)
    pipe()  # warm-up
    # step similarity: how alike the deeper blocks' contributions are at adjacent steps
    deltas: list[torch.Tensor] = []
    original = pipe.dit.forward if not settings["step_cache"] else None
    if original is not None:
        def record(tokens, t, text, step, branch):
            out = original(tokens, t, text, step, branch)
            if branch != "uncond":
                deltas.append(pipe.dit.cache[branch][:1].flatten().clone())
            return out
        pipe.dit.forward = record
    TIMER.on = True
    start = time.perf_counter()
    pipe()
    total = time.perf_counter() - start
    TIMER.on = False
    mm, at = TIMER.totals["matmul"], TIMER.totals["attention"]
    pct = (lambda x: round(min(100.0, 100.0 * x / total), 2))
    rest = max(0.0, total - mm - at)
    sims = [F.cosine_similarity(a, b, dim=0).item() for a, b in zip(deltas[:-1], deltas[1:])]  # cond branch
    pipeline_layer: dict = {"steps": STEPS}
    if sims:
        pipeline_layer["step_similarity"] = round(max(0.0, min(1.0, sum(sims) / len(sims))), 4)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024
    capacity_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024 ** 3
    return {"schema": "tunebot.analysis/v1", "layers": {
        "system": {"peak_memory_gb": round(peak_gb, 3), "memory_capacity_gb": round(capacity_gb, 1)},
        "pipeline": pipeline_layer,
        "compute": {"matmul_pct": pct(mm), "attention_pct": pct(at), "vector_pct": pct(rest), "comm_pct": 0,
                    "compiled": bool(settings["fused"])},
        "communication": {"comm_pct": 0},
        "operator": {"dit_matmul_pct": pct(mm), "fa_pct": pct(at), "vector_pct": pct(rest)},
    }}


def quality() -> dict:
    ref_dir, out_dir = os.environ.get("TUNEBOT_REFERENCE_DIR"), os.environ.get("TUNEBOT_OUTPUT_DIR")
    if not ref_dir or not out_dir:
        raise SystemExit("set TUNEBOT_REFERENCE_DIR and TUNEBOT_OUTPUT_DIR (tunebot does)")
    ref = torch.load(Path(ref_dir) / "latent.pt")
    out = torch.load(Path(out_dir) / "latent.pt")
    cos = {k: F.cosine_similarity(ref[k].flatten().double(), out[k].flatten().double(), dim=0).item() for k in ref}
    return {"schema": "tunebot.quality/v1", "cosine": min(cos.values()), "per_output": cos}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--benchmark", action="store_true")
    mode.add_argument("--analysis", action="store_true")
    mode.add_argument("--quality", action="store_true")
    args = parser.parse_args()
    if args.quality:
        result = quality()
    else:
        settings = load_settings()
        result = benchmark(settings) if args.benchmark else analysis(settings)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
