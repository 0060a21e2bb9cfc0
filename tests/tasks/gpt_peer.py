"""The language-model task's first training step in PyTorch, from the shared spec alone (no gcrun
code): synthetic char ids, the epoch-0 permutation, nanoGPT's GPT initialised and run as the spec
fixes it. Prints `name repr(value)` lines that language_model_test compares bit for bit.

usage: gpt_peer.py SEED SAMPLES CONTEXT LAYERS HEADS WIDTH BIAS(0|1) DROPOUT BATCH
"""
import math
import sys

import torch
import torch.nn.functional as F

MASK = (1 << 64) - 1


def stream_seed(seed, rank, epoch):
    def mix(x):
        x = (x + 0x9E3779B97F4A7C15) & MASK
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
        return x ^ (x >> 31)

    return mix(mix(mix(seed) ^ (rank & MASK)) ^ (epoch & MASK))


def generator(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def build(seed, V, T, L, d, bias):
    names = [("transformer.wte.weight", (V, d)), ("transformer.wpe.weight", (T, d))]
    for i in range(L):
        p = "transformer.h.%d." % i
        for name, shape, b in [("ln_1", (d,), d), ("attn.c_attn", (3 * d, d), 3 * d), ("attn.c_proj", (d, d), d),
                               ("ln_2", (d,), d), ("mlp.c_fc", (4 * d, d), 4 * d), ("mlp.c_proj", (d, 4 * d), d)]:
            names.append((p + name + ".weight", shape))
            if bias:
                names.append((p + name + ".bias", (b,)))
    names.append(("transformer.ln_f.weight", (d,)))
    if bias:
        names.append(("transformer.ln_f.bias", (d,)))
    g = generator(seed)
    params = {}
    with torch.no_grad():
        for name, shape in names:
            t = torch.empty(shape)
            if name.endswith(".bias"):
                t.zero_()
            elif ".ln_" in name:
                t.fill_(1.0)
            elif name.endswith(".c_proj.weight"):
                t.normal_(0.0, 0.02 / math.sqrt(2 * L), generator=g)
            else:
                t.normal_(0.0, 0.02, generator=g)
            params[name] = t.requires_grad_()
    return params


def forward(P, idx, T, L, H, d, p, g):
    def drop(x):
        if p == 0:
            return x
        keep = torch.empty_like(x).bernoulli_(1 - p, generator=g)
        return x * keep.div_(1 - p)

    B, t = idx.shape
    mask = torch.ones(T, T).tril()
    x = drop(F.embedding(idx, P["transformer.wte.weight"]) + F.embedding(torch.arange(t), P["transformer.wpe.weight"]))
    for i in range(L):
        b = lambda n: P.get("transformer.h.%d.%s" % (i, n))
        h = F.layer_norm(x, [d], b("ln_1.weight"), b("ln_1.bias"), 1e-5)
        q, k, v = F.linear(h, b("attn.c_attn.weight"), b("attn.c_attn.bias")).split(d, dim=2)
        q, k, v = [z.view(B, t, H, d // H).transpose(1, 2) for z in (q, k, v)]
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(mask[:t, :t] == 0, float("-inf"))
        att = drop(F.softmax(att, dim=-1))
        y = torch.matmul(att, v).transpose(1, 2).contiguous().view(B, t, d)
        x = x + drop(F.linear(y, b("attn.c_proj.weight"), b("attn.c_proj.bias")))
        h = F.layer_norm(x, [d], b("ln_2.weight"), b("ln_2.bias"), 1e-5)
        h = F.gelu(F.linear(h, b("mlp.c_fc.weight"), b("mlp.c_fc.bias")))
        x = x + drop(F.linear(h, b("mlp.c_proj.weight"), b("mlp.c_proj.bias")))
    x = F.layer_norm(x, [d], P["transformer.ln_f.weight"], P.get("transformer.ln_f.bias"), 1e-5)
    return F.linear(x, P["transformer.wte.weight"])


def main():
    seed, samples, T, L, H, d, bias = (int(a) for a in sys.argv[1:8])
    p, B = float(sys.argv[8]), int(sys.argv[9])
    V = 65
    train = torch.randint(V, (samples,), generator=generator(stream_seed(seed, -2, 0)))
    K = (samples - 1) // T
    perm = torch.randperm(K, generator=generator(stream_seed(seed, -1, 0)))
    windows = perm[:B]
    idx = torch.stack([train[k * T:k * T + T] for k in windows.tolist()])
    targets = torch.stack([train[k * T + 1:k * T + T + 1] for k in windows.tolist()])
    P = build(seed, V, T, L, d, bias)
    g = generator(stream_seed(seed, 0, 0)) if p > 0 else None
    logits = forward(P, idx, T, L, H, d, p, g)
    loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))
    loss.backward()
    print("inputs", repr(idx.double().sum().item()))
    print("loss", repr(loss.item()))
    for name in ("transformer.wte.weight", "transformer.h.0.attn.c_attn.weight"):
        print("grad:" + name, repr(P[name].grad.double().sum().item()))
    print("parameters", repr(sum(t.detach().double().sum().item() for t in P.values())))


main()
