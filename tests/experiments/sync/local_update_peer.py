"""The PyTorch peer of local_update_peer_test.cpp: two Gloo processes train the test's model (a 6x4
weight and a bias, loss mean((x W + b)^2)) with torch.optim.SGD on the same data, under
  local-sgd: DDP with post_localSGD_hook (post_local_gradient_allreduce off) and
             PostLocalSGDOptimizer(SGD, PeriodicModelAverager(every, warmup_steps)), PyTorch's own;
  diloco:    the published algorithm written out: `every` inner SGD steps, then the pseudo-gradient
             θ_g − θ all-reduced and averaged, an outer SGD(nesterov) on θ_g, every worker back at θ_g.
Writes each rank's parameters after every step, float32, to OUT.rank<r>.

usage: local_update_peer.py MODE STEPS EVERY WARMUP LR MOMENTUM OUTER_LR OUTER_MOMENTUM OUT"""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import PostLocalSGDState, post_localSGD_hook
from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
from torch.distributed.optim import PostLocalSGDOptimizer
from torch.nn.parallel import DistributedDataParallel

WORLD = 2


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(-1, 1, 24).reshape(6, 4).clone())
        self.bias = torch.nn.Parameter(torch.zeros(4))

    def forward(self, x):
        return torch.mm(x, self.weight).add(self.bias).pow(2).mean()


def data(rank, step):
    """Small dyadic numbers from integers: the same on both sides without a shared generator."""
    n = (torch.arange(48, dtype=torch.int64) * 7 + rank * 13 + step * 5) % 17 - 8
    return (n.to(torch.float32) / 8).reshape(8, 6)


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def local_sgd(rank, a, model):
    ddp = DistributedDataParallel(model)
    state = PostLocalSGDState(process_group=None, subgroup=None, start_localSGD_iter=a["warmup"],
                              post_local_gradient_allreduce=False)
    ddp.register_comm_hook(state, post_localSGD_hook)
    inner = torch.optim.SGD(ddp.parameters(), lr=a["lr"], momentum=a["momentum"], foreach=False)
    optimizer = PostLocalSGDOptimizer(inner, PeriodicModelAverager(period=a["every"], warmup_steps=a["warmup"]))
    rows = []
    for step in range(1, a["steps"] + 1):
        optimizer.zero_grad()
        ddp(data(rank, step)).backward()
        optimizer.step()
        rows.append(flat(model))
    return rows


def diloco(rank, a, model):
    inner = torch.optim.SGD(model.parameters(), lr=a["lr"], momentum=a["momentum"], foreach=False)
    global_params = [p.detach().clone() for p in model.parameters()]
    outer = torch.optim.SGD(global_params, lr=a["outer_lr"], momentum=a["outer_momentum"], nesterov=True,
                            foreach=False)
    rows = []
    for step in range(1, a["steps"] + 1):
        inner.zero_grad()
        model(data(rank, step)).backward()
        inner.step()
        if step % a["every"] == 0:
            for g, p in zip(global_params, model.parameters()):
                delta = g - p.detach()
                dist.all_reduce(delta)
                g.grad = delta / WORLD
            outer.step()
            with torch.no_grad():
                for p, g in zip(model.parameters(), global_params):
                    p.copy_(g)
        rows.append(flat(model))
    return rows


def worker(rank, a, store):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=WORLD)
    rows = (local_sgd if a["mode"] == "local-sgd" else diloco)(rank, a, Model())
    torch.stack(rows).numpy().tofile(a["out"] + ".rank" + str(rank))
    dist.destroy_process_group()


def main():
    mode, steps, every, warmup, lr, momentum, outer_lr, outer_momentum, out = sys.argv[1:]
    a = dict(mode=mode, steps=int(steps), every=int(every), warmup=int(warmup), lr=float(lr),
             momentum=float(momentum), outer_lr=float(outer_lr), outer_momentum=float(outer_momentum), out=out)
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(a, os.path.join(tmp, "store")), nprocs=WORLD)


if __name__ == "__main__":
    main()
