"""The peer `gcrun bench reducers` is measured against (issue #14): each compressor written with
whole-tensor PyTorch ops, as GRACE and Horovod write them, timed compress + decompress at one
worker (no communication) on the same gradient shapes and settings as gcrun's benchmark.

Settings are gcrun's defaults: qsgd 256 levels, top-k / global-top-k / random-k / random-block
compression 0.01 (the same k formulas), svd and powersgd rank 4. Containers follow GRACE: qsgd
sends int16 levels and terngrad int8 (gcrun packs 10 and 2 bits), the sign compressors pack one bit
per element with tensor ops as gcrun's wire does. Gradients are fresh N(0, 1) draws every step.

Prints one JSON object per line: {"model", "reducer", "ms" (median), "relative_error" (mean)}.
"""

import argparse
import json
import math
import statistics
import time

import torch

from ddp_peer import Lstm, ResNet18

SHIFTS = torch.arange(8, dtype=torch.uint8)


def pack_signs(flat):
    negative = torch.zeros(((flat.numel() + 31) // 32) * 32, dtype=torch.uint8)
    negative[: flat.numel()] = flat < 0
    return (negative.view(-1, 8) << SHIFTS).sum(1, dtype=torch.uint8)


def unpack_signs(packed, count):
    bits = (packed.unsqueeze(1) >> SHIFTS) & 1
    return 1 - 2 * bits.view(-1)[:count].float()


def qsgd(grads, levels=256):
    out = []
    for g in grads:
        norm = g.norm()
        level = (g.abs() / norm * levels + torch.rand_like(g)).floor_()
        sent = (level * g.sign()).to(torch.int16)
        out.append(sent.float() * (norm / levels))
    return out


def terngrad(grads):
    out = []
    for g in grads:
        scale = g.abs().max()
        sent = ((torch.rand_like(g) < g.abs() / scale) * g.sign()).to(torch.int8)
        out.append(sent.float() * scale)
    return out


def sign_norm(grads):
    flat = torch.cat([g.reshape(-1) for g in grads])
    scales = torch.stack([g.abs().mean() for g in grads])
    signs = unpack_signs(pack_signs(flat), flat.numel())
    sizes = [g.numel() for g in grads]
    return [s.view_as(g) * scale for s, g, scale in zip(signs.split(sizes), grads, scales)]


def signum(grads):
    flat = torch.cat([g.reshape(-1) for g in grads])
    vote = unpack_signs(pack_signs(flat), flat.numel()).sign()
    return [v.view_as(g) for v, g in zip(vote.split([g.numel() for g in grads]), grads)]


def cast(dtype):
    return lambda grads: [g.to(dtype).float() for g in grads]


def svd(grads, rank=4):
    out = []
    for g in grads:
        if g.dim() < 2:
            out.append(g.clone())
            continue
        u, s, vh = torch.linalg.svd(g.reshape(g.shape[0], -1), full_matrices=False)
        r = min(rank, s.numel())
        out.append(((u[:, :r] * s[:r]) @ vh[:r]).view_as(g))
    return out


def sparse(g, positions):
    flat = torch.zeros(g.numel())
    flat.index_add_(0, positions, g.reshape(-1).index_select(0, positions))
    return flat.view_as(g)


def topk(grads, compression=0.01):
    out = []
    for g in grads:
        k = max(1, int(0.5 * compression * g.numel()))
        out.append(sparse(g, torch.topk(g.reshape(-1).abs(), k, sorted=False)[1]))
    return out


def global_topk(grads, compression=0.01):
    flat = torch.cat([g.reshape(-1) for g in grads])
    k = max(1, int(0.5 * compression * flat.numel()))
    dense = sparse(flat, torch.topk(flat.abs(), k, sorted=False)[1])
    return [d.view_as(g) for d, g in zip(dense.split([g.numel() for g in grads]), grads)]


def random_k(grads, compression=0.01):
    return [sparse(g, torch.randperm(g.numel())[: max(1, int(compression * g.numel()))]) for g in grads]


def random_block(grads, compression=0.01):
    out = []
    for g in grads:
        k = max(1, int(compression * g.numel()))
        start = int(torch.randint(g.numel(), (1,)))
        out.append(sparse(g, torch.arange(start, start + k) % g.numel()))
    return out


def minifloat(mantissa_bits, bias, largest, block=128):
    """fp8 / fp4 as gcrun's defaults send them: per block of 128 elements the multiplier
    m = largest / amax (1 where infinite), y = x * m rounded to the format's grid with frexp/ldexp
    (the quantum of y's binade, at least the subnormal one, round half to even), saturating at
    +-largest, decoded as q / m. torch 1.13 has no float8 dtype, so q stays float32. At
    mantissa_bits = 0 (E3M0) a tie goes to the larger power here, to the even exponent in gcrun."""

    def compress(grads):
        out = []
        for g in grads:
            n = g.numel()
            blocks = torch.zeros((n + block - 1) // block * block)
            blocks[:n] = g.reshape(-1)
            blocks = blocks.view(-1, block)
            m = largest / blocks.abs().amax(1, keepdim=True)
            m = torch.where(torch.isinf(m), torch.ones_like(m), m)
            y = blocks * m
            quantum = torch.clamp(torch.frexp(y).exponent - 1, min=1 - bias) - mantissa_bits
            q = torch.ldexp(torch.round(torch.ldexp(y, -quantum)), quantum).clamp_(-largest, largest)
            out.append((q / m).view(-1)[:n].view_as(g))
        return out

    return compress


def int8(grads):
    """INTELLECT-1's min-max uint8 per tensor, as gcrun's int8."""
    out = []
    for g in grads:
        low, high = g.min(), g.max()
        width = high - low
        q = torch.round((g - low) / width * 255).to(torch.uint8)
        out.append(low + q.float() * (width / 255))
    return out


class PowerSgd:
    """powerSGD_hook's compress and decompress per matrix (one power iteration, warm start)."""

    def __init__(self, rank=4):
        self.rank, self.queries = rank, {}

    def __call__(self, grads):
        out = []
        for i, g in enumerate(grads):
            if g.dim() < 2:
                out.append(g.clone())
                continue
            m = g.reshape(g.shape[0], -1)
            r = min(self.rank, *m.shape)
            q = self.queries.setdefault(i, torch.randn(m.shape[1], r))
            p = torch.linalg.qr(m @ q).Q
            q.copy_(m.t() @ p)
            out.append((p @ q.t()).view_as(g))
        return out


COMPRESSORS = {
    "qsgd": qsgd, "terngrad": terngrad, "sign-norm": sign_norm, "signum": signum,
    "fp16": cast(torch.half), "bf16": cast(torch.bfloat16), "svd": svd, "topk": topk,
    "global-topk": global_topk, "random-k": random_k, "random-block": random_block, "powersgd": PowerSgd(),
    "fp8": minifloat(3, 7, 448.0), "fp4": minifloat(0, 3, 16.0), "int8": int8,
}


# SparseLoCo's and DeMo's codecs (issue 43), at gcrun's defaults: two-bit-topk's 2% of each
# 4096-value chunk, positions in 12 bits and 2-bit codes packed and unpacked with tensor ops;
# dct-topk's top 32 of each DCT block of side up to 64, int64 positions and float32 values.
def pack_bits(codes, bits):
    expanded = ((codes.unsqueeze(1) >> torch.arange(bits)) & 1).reshape(-1).to(torch.uint8)
    padded = torch.zeros(((expanded.numel() + 7) // 8) * 8, dtype=torch.uint8)
    padded[: expanded.numel()] = expanded
    return (padded.view(-1, 8) << SHIFTS).sum(1, dtype=torch.uint8)


def unpack_bits(packed, bits, count):
    expanded = ((packed.unsqueeze(1) >> SHIFTS) & 1).reshape(-1)[: count * bits].view(count, bits)
    return (expanded.long() << torch.arange(bits)).sum(1)


def two_bit_topk_rows(rows, density, bits):
    k = min(rows.shape[1], max(1, math.ceil(density * rows.shape[1] - 1e-9)))
    positions = rows.abs().topk(k, 1).indices
    kept = rows.gather(1, positions)
    magnitudes, lower = kept.abs(), k // 2
    upper_level = magnitudes[:, : k - lower].mean(1)
    lower_level = magnitudes[:, k - lower :].mean(1) if lower else upper_level
    codes = (kept < 0).long() + 2 * (torch.arange(k) < k - lower).long()
    positions = unpack_bits(pack_bits(positions.reshape(-1), bits), bits, positions.numel()).view(-1, k)
    codes = unpack_bits(pack_bits(codes.reshape(-1), 2), 2, codes.numel()).view(-1, k)
    levels = torch.stack([lower_level, upper_level], 1)
    values = levels.gather(1, codes // 2)
    return torch.zeros_like(rows).scatter_(1, positions, torch.where(codes % 2 == 1, -values, values))


def two_bit_topk(grads, chunk=4096, density=0.02):
    bits = (chunk - 1).bit_length()
    out = []
    for g in grads:
        flat = g.reshape(-1)
        full = flat.numel() // chunk * chunk
        parts = [two_bit_topk_rows(flat[:full].view(-1, chunk), density, bits).reshape(-1)] if full else []
        if full < flat.numel():
            parts.append(two_bit_topk_rows(flat[full:].view(1, -1), density, bits).reshape(-1))
        out.append(torch.cat(parts).view_as(g))
    return out


def dct_matrix(n):
    k, j = torch.arange(n, dtype=torch.float64).unsqueeze(1), torch.arange(n, dtype=torch.float64)
    matrix = torch.cos(math.pi * (2 * j + 1) * k / (2 * n)) * math.sqrt(2 / n)
    matrix[0] = math.sqrt(1 / n)
    return matrix.float()


def largest_divisor(size, limit):
    return next(d for d in range(min(size, limit), 0, -1) if size % d == 0)


def dct_topk(grads, block=64, topk=32):
    out = []
    for g in grads:
        rows = g.shape[0] if g.dim() >= 2 else 1
        cols = g.numel() // rows
        r, c = largest_divisor(rows, block), largest_divisor(cols, block)
        cr, cc = dct_matrix(r), dct_matrix(c)
        blocks = g.reshape(rows // r, r, cols // c, c).permute(0, 2, 1, 3)
        coefficients = torch.einsum("ij,abjk,lk->abil", cr, blocks, cc).reshape(-1, r * c)
        positions = coefficients.abs().topk(min(topk, r * c), 1).indices  # int64, as DeMo sends them
        values = coefficients.gather(1, positions).float()
        kept = torch.zeros_like(coefficients).scatter_(1, positions, values).view(rows // r, cols // c, r, c)
        decoded = torch.einsum("ji,abjk,kl->abil", cr, kept, cc).permute(0, 2, 1, 3)
        out.append(decoded.reshape(g.shape))
    return out


COMPRESSORS.update({"two-bit-topk": two_bit_topk, "dct-topk": dct_topk})


def shapes(model):
    net = ResNet18() if model == "resnet18" else Lstm()
    return [p.shape for p in net.parameters()]


def measure(model, name, steps, warmup):
    compress = COMPRESSORS[name]
    times, errors = [], []
    for step in range(warmup + steps):
        grads = [torch.randn(s) for s in shapes_of[model]]
        start = time.perf_counter()
        out = compress(grads)
        elapsed = time.perf_counter() - start
        if step < warmup:
            continue
        times.append(elapsed)
        difference = sum(float((o - g).pow(2).sum()) for o, g in zip(out, grads))
        errors.append((difference / sum(float(g.pow(2).sum()) for g in grads)) ** 0.5)
    return {"model": model, "reducer": name, "ms": 1000 * statistics.median(times),
            "relative_error": statistics.mean(errors)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18")
    parser.add_argument("--reducers", default=",".join(COMPRESSORS))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(42)
    for model in args.models.split(","):
        shapes_of[model] = shapes(model)
        for name in args.reducers.split(","):
            if name in COMPRESSORS:
                print(json.dumps(measure(model, name, args.steps, args.warmup)), flush=True)


shapes_of = {}

if __name__ == "__main__":
    main()
