"""gcrun's `language-model` task with architecture `gpt` and optimizer `adamw`, written again in PyTorch.

The twin of `gcrun experiment brown-gpt-*` for the conformance test and the benchmark: the same
nanoGPT model, initial weights, batches, learning-rate schedule, clipping and AdamW, trained under
DDP over Gloo with one process per worker. It shares no code with gcrun, only the contract that
tasks/language_model.h, tasks/models/gpt.h and experiments/optimizers/ (adamw.cpp, lr_schedule.h,
gradient_clipping.h) state:

- token ids: char level, the bytes of the files with the sorted set of all bytes of the three
  splits as vocabulary; word level, whitespace tokens lower-cased plus "<eos>" per line, "<unk>",
  "<pad>", then training tokens by descending count, ties in byte order;
- weights drawn in parameter order from one CPU generator seeded with the seed: normal(0, 0.02),
  normal(0, 0.02 / sqrt(2 layers)) for every c_proj.weight, LayerNorm weights 1, biases 0;
- epoch e shuffles the K = (N - 1) // context windows with randperm seeded by
  stream_seed(seed, -1, e); rank r takes windows r, r + W, ...; batch b is its b-th run of B.

Writes, on rank 0, one JSON object: the mean training loss over the workers at every step (the
value gcrun logs as `cross_entropy` with output.log_every_steps 1), the median step time after
warm-up, and every rank's peak RSS.
"""

import argparse
import json
import math
import os
import resource
import statistics
import time
from collections import Counter

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MASK64 = (1 << 64) - 1


def mix(x):
    """splitmix64's finalizer, as tasks/sampler.cpp's streamSeed applies it."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def stream_seed(seed, rank, epoch):
    return mix(mix(mix(seed) ^ (rank & MASK64)) ^ (epoch & MASK64))


def generator(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def read_char_splits(folder):
    texts = [open(os.path.join(folder, f"wiki.{s}.tokens"), "rb").read() for s in ("train", "valid", "test")]
    alphabet = sorted(set(b"".join(texts)))
    index = {byte: i for i, byte in enumerate(alphabet)}
    return [torch.tensor([index[b] for b in text], dtype=torch.int64) for text in texts], len(alphabet)


def line_tokens(path):
    """tasks/wikitext.cpp's readTokenFile: per line its whitespace tokens, ASCII lower-cased, then <eos>."""
    data = open(path, "rb").read()
    lines = data.split(b"\n") if data else []
    if data.endswith(b"\n"):
        lines.pop()
    return [t for line in lines for t in line.lower().split() + [b"<eos>"]]


def read_word_splits(folder):
    splits = [line_tokens(os.path.join(folder, f"wiki.{s}.tokens")) for s in ("train", "valid", "test")]
    counts = Counter(t for t in splits[0] if t not in (b"<unk>", b"<pad>"))
    words = [b"<unk>", b"<pad>"] + [w for w, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
    index = {w: i for i, w in enumerate(words)}
    return [torch.tensor([index.get(t, 0) for t in tokens], dtype=torch.int64) for tokens in splits], len(words)


class Block(nn.Module):
    def __init__(self, width, heads, context, bias):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, elementwise_affine=True)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(width, 3 * width, bias=bias)
        self.attn.c_proj = nn.Linear(width, width, bias=bias)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(width, 4 * width, bias=bias)
        self.mlp.c_proj = nn.Linear(4 * width, width, bias=bias)
        if not bias:
            self.ln_1.bias = None
            self.ln_2.bias = None
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(context, context)))

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
        att = att.masked_fill(self.mask[:T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attn.c_proj(y)

    def forward(self, x):
        x = x + self.attention(F.layer_norm(x, x.shape[-1:], self.ln_1.weight, self.ln_1.bias, 1e-5))
        h = F.layer_norm(x, x.shape[-1:], self.ln_2.weight, self.ln_2.bias, 1e-5)
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(h)))


class GPT(nn.Module):
    def __init__(self, vocabulary, context, layers, heads, width, bias):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte = nn.Embedding(vocabulary, width)
        self.transformer.wpe = nn.Embedding(context, width)
        self.transformer.h = nn.ModuleList([Block(width, heads, context, bias) for _ in range(layers)])
        self.transformer.ln_f = nn.LayerNorm(width)
        if not bias:
            self.transformer.ln_f.bias = None

    def initialize(self, seed, layers):
        g = generator(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif ".ln_" in name:
                    p.fill_(1.0)
                elif name.endswith("c_proj.weight"):
                    p.normal_(0.0, 0.02 / math.sqrt(2 * layers), generator=g)
                else:
                    p.normal_(0.0, 0.02, generator=g)

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        f = self.transformer.ln_f
        x = F.layer_norm(x, x.shape[-1:], f.weight, f.bias, 1e-5)
        logits = F.linear(x, self.transformer.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def epoch_windows(n_tokens, context, seed, epoch, rank, world):
    windows = (n_tokens - 1) // context
    perm = torch.randperm(windows, generator=generator(stream_seed(seed, -1, epoch)), dtype=torch.int64)
    return perm[rank::world][: windows // world]


def batch_of(ids, windows, context):
    starts = windows * context
    offsets = torch.arange(context + 1, dtype=torch.int64)
    rows = ids[starts.unsqueeze(1) + offsets]
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


def learning_rate(args, it, total):
    decay = args.decay_steps or total
    if it < args.warmup_steps:
        return args.learning_rate * (it + 1) / (args.warmup_steps + 1)
    if it > decay:
        return args.min_learning_rate
    ratio = (it - args.warmup_steps) / (decay - args.warmup_steps)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))
    return args.min_learning_rate + coeff * (args.learning_rate - args.min_learning_rate)


def parameter_groups(model, args):
    decay, keep = [], []
    embeddings = {"transformer.wte.weight", "transformer.wpe.weight"}
    for name, p in model.named_parameters():
        decays = p.dim() >= 2 and (args.decay_embeddings or name not in embeddings)
        (decay if decays else keep).append(p)
    return [{"params": decay, "weight_decay": args.weight_decay}, {"params": keep, "weight_decay": 0.0}]


def register_hook(ddp, args):
    if args.hook != "powersgd":
        return
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

    state = powersgd.PowerSGDState(
        process_group=None,
        matrix_approximation_rank=args.rank,
        start_powerSGD_iter=args.start_iter,
        min_compression_rate=args.min_compression_rate,
        use_error_feedback=args.error_feedback,
        warm_start=args.warm_start,
        random_seed=args.random_seed,
    )
    ddp.register_comm_hook(state, powersgd.powerSGD_hook)


def train(args):
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(args.threads)
    splits, vocabulary = (read_char_splits if args.level == "char" else read_word_splits)(args.data)
    train_ids = splits[0]
    model = GPT(vocabulary, args.context, args.layers, args.heads, args.width, args.bias)
    model.initialize(args.seed, args.layers)
    if args.bucket_mb > 0:
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(args.bucket_mb * 1024 * 1024)
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb or 25)
    register_hook(ddp, args)
    optimizer = torch.optim.AdamW(
        parameter_groups(model, args), lr=args.learning_rate, betas=(args.beta1, args.beta2),
        eps=args.epsilon, foreach=False)
    windows_per_rank = ((train_ids.numel() - 1) // args.context) // world
    batches = windows_per_rank // args.batch_size
    losses, times = [], []
    for it in range(args.steps):
        epoch, b = divmod(it, batches)
        if b == 0:
            windows = epoch_windows(train_ids.numel(), args.context, args.seed, epoch, rank, world)
        inputs, targets = batch_of(train_ids, windows[b * args.batch_size:(b + 1) * args.batch_size], args.context)
        start = time.perf_counter()
        loss = ddp(inputs, targets)
        loss.backward()
        if args.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_norm)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(args, it, args.steps)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
        total = torch.tensor([loss.item()], dtype=torch.float64)
        dist.all_reduce(total)
        losses.append(total.item() / world)
    rss = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0], dtype=torch.float64)
    all_rss = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(all_rss, rss)
    if rank == 0:
        result = {
            "losses": losses,
            "median_step_ms": 1000 * statistics.median(times[args.warmup:] or times),
            "peak_rss_mib": [r.item() for r in all_rss],
            "parameters": sum(p.numel() for p in model.parameters()),
        }
        with open(args.output, "w") as f:
            json.dump(result, f)
    # Tearing DDP and Gloo down after powerSGD_hook's chained all-reduces aborts now and then in
    # torch 1.13 (std::terminate), after everything is written: leave without the teardown.
    dist.barrier()
    os._exit(0)


def flag(text):
    """A boolean as gcrun's YAML spells it (true/false) or as 1/0."""
    if text.lower() not in ("true", "false", "1", "0"):
        raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")
    return text.lower() in ("true", "1")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a folder of wiki.{train,valid,test}.tokens")
    parser.add_argument("--output", required=True, help="the JSON file rank 0 writes")
    parser.add_argument("--level", choices=["char", "word"], default="char")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--bias", type=flag, default=True)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--min-learning-rate", type=float, default=1e-4)
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument("--decay-steps", type=int, default=0, help="0: --steps")
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--beta2", type=float, default=0.99)
    parser.add_argument("--epsilon", type=float, default=1e-8)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--decay-embeddings", type=flag, default=False)
    parser.add_argument("--clip-norm", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=3, help="steps left out of the median time")
    parser.add_argument("--bucket-mb", type=float, default=0, help="DDP buckets (and the first one); 0: DDP's defaults")
    parser.add_argument("--hook", choices=["none", "powersgd"], default="none")
    parser.add_argument("--rank", type=int, default=4, help="powerSGD_hook's matrix_approximation_rank")
    parser.add_argument("--start-iter", type=int, default=2)
    parser.add_argument("--min-compression-rate", type=float, default=2.0)
    parser.add_argument("--error-feedback", type=flag, default=True)
    parser.add_argument("--warm-start", type=flag, default=True)
    parser.add_argument("--random-seed", type=int, default=0)
    args = parser.parse_args()
    train(args)


if __name__ == "__main__":
    main()
