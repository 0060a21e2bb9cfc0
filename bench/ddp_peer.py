"""The peer gcrun is measured against: PyTorch DDP on the same model, batch and optimizer.

Launched by torchrun (one process per worker). Times each step (forward, backward with DDP's
bucketed all-reduce or its powerSGD_hook, optimizer step) on synthetic data and writes, on rank 0,
one JSON line with the median time per batch after warm-up, the bytes each worker sends per step,
and every rank's peak RSS.
"""

import argparse
import json
import resource
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd


class BasicBlock(nn.Module):
    def __init__(self, inputs, outputs, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = nn.Sequential()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    """gcrun's resnet18 (the reference's CIFAR ResNet-18): 11,173,962 parameters."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, inputs = [], 64
        for stage, width in enumerate([64, 128, 256, 512]):
            blocks = []
            for block in range(2):
                blocks.append(BasicBlock(inputs, width, 2 if stage > 0 and block == 0 else 1))
                inputs = width
            layers.append(nn.Sequential(*blocks))
        self.layers = nn.Sequential(*layers)
        self.linear = nn.Linear(512, classes)

    def forward(self, x):
        out = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.linear(F.avg_pool2d(out, 4).flatten(1))


class Lstm(nn.Module):
    """gcrun's lstm: 3 layers of 650, tied embedding and decoder; 28,949,319 parameters at V=28,869."""

    def __init__(self, vocabulary=28869, size=650, layers=3, dropout=0.4):
        super().__init__()
        self.encoder = nn.Embedding(vocabulary, size)
        self.rnn = nn.LSTM(size, size, layers, dropout=dropout)
        self.decoder = nn.Linear(size, vocabulary)
        self.decoder.weight = self.encoder.weight
        self.drop = nn.Dropout(dropout)

    def forward(self, tokens, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(tokens)), hidden)
        return self.decoder(self.drop(out)), hidden


def wire_bytes(model, args):
    """What one worker sends per step: all gradients, or what powerSGD_hook sends for them."""
    total = 0
    for p in model.parameters():
        if args.reducer == "allreduce" or p.dim() <= 1:
            total += p.numel()
            continue
        n, m = p.shape[0], p.numel() // p.shape[0]
        r = min(n, m, args.rank)
        compress, uncompressed, compressed = powersgd._should_compress(n, m, r, args.min_compression_rate)
        total += compressed if compress else uncompressed
    return 4 * total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["resnet18", "lstm"], required=True)
    parser.add_argument("--reducer", choices=["allreduce", "powersgd"], required=True)
    parser.add_argument("--rank", type=int, default=2)
    parser.add_argument("--min-compression-rate", type=float, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--output", required=True)
    args = parser.parse_args()

    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    # On a GPU, kernels run asynchronously: each time is read after the device has caught up,
    # as gcrun's timer does with device=cuda.
    device = torch.device("cuda", dist.get_rank() % torch.cuda.device_count()) if cuda else torch.device("cpu")
    synchronize = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(1)
    if args.model == "resnet18":
        model = ResNet18()
        inputs = torch.randn(args.batch_size, 3, 32, 32)
        targets = torch.randint(0, 10, (args.batch_size,))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    else:
        model = Lstm()
        inputs = torch.randint(0, 28869, (30, args.batch_size))
        targets = torch.randint(0, 28869, (30 * args.batch_size,))
        optimizer = torch.optim.SGD(model.parameters(), lr=1.25)
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    bucket_cap_mb = 25
    if args.reducer == "powersgd":
        # One gradient bucket (the first one included, which DDP caps at 1 MB): with several,
        # torch 1.13's hook on Gloo issues one bucket's P and Q all-reduces from future callbacks
        # while backward issues the next bucket's, in a different order on each rank, and Gloo
        # aborts ("op.preamble.length <= op.nbytes").
        bucket_cap_mb = 1024
        dist._DEFAULT_FIRST_BUCKET_BYTES = bucket_cap_mb * 2 ** 20
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[device] if cuda else None,
                                          bucket_cap_mb=bucket_cap_mb)
    if args.reducer == "powersgd":
        state = powersgd.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=args.rank,
            start_powerSGD_iter=2,
            min_compression_rate=args.min_compression_rate,
            use_error_feedback=True,
            warm_start=True,
        )
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)

    hidden = None
    times, forward, backward = [], [], []  # DDP's backward includes waiting for its all-reduces
    for _ in range(args.warmup + args.steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=False)
        if args.model == "resnet18":
            loss = F.cross_entropy(ddp(inputs), targets)
        else:
            logits, hidden = ddp(inputs, hidden)
            hidden = tuple(h.detach() for h in hidden)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets)
        synchronize()
        forward.append(time.perf_counter() - start)
        loss.backward()
        synchronize()
        backward.append(time.perf_counter() - start - forward[-1])
        if args.model == "lstm":
            nn.utils.clip_grad_norm_(model.parameters(), 0.4)
        optimizer.step()
        synchronize()
        times.append(time.perf_counter() - start)

    peak = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0], device=device)
    peaks = [torch.zeros(1, device=device) for _ in range(dist.get_world_size())]
    dist.all_gather(peaks, peak)
    if dist.get_rank() == 0:
        with open(args.output, "w") as out:
            json.dump({
                "median_batch_s": statistics.median(times[args.warmup:]),
                "median_forward_s": statistics.median(forward[args.warmup:]),
                "median_backward_s": statistics.median(backward[args.warmup:]),
                "bytes_per_step": wire_bytes(model, args),
                "peak_rss_mib": [round(p.item(), 1) for p in peaks],
                "workers": dist.get_world_size(),
                "torch": torch.__version__,
                "device": torch.cuda.get_device_name(device) if cuda else "cpu",
            }, out)
            out.write("\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
