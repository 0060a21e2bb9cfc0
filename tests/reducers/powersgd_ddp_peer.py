"""PyTorch's side of tests/reducers/powersgd_ddp_reducer_test.cpp: a tiny model trained by two Gloo
processes under DDP with torch 1.13's powerSGD_hook and SGD. It writes the initial parameters, and
every step, each rank the gradients the hook got (before it added its error) and the gradients DDP
left in .grad after it, as raw float32 in parameter order, and the parameter order of the bucket the
hook saw.

usage: powersgd_ddp_peer.py OUT_DIR RANK START_ITER ERROR_FEEDBACK WARM_START EPSILON SEED
                            MIN_COMPRESSION_RATE STEPS
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd


class Tiny(torch.nn.Module):
    """An embedding-like table, then linear layers and a conv-like kernel [8, 2, 2, 2]; fc1, fc4 and
    the kernel (viewed as [8, 8]) share a matrix shape with others between them, so the hook's
    grouping by shape changes the order in which it draws the queries."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(16, 8) * 0.5)
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 12)
        self.fc3 = torch.nn.Linear(12, 8)
        self.fc4 = torch.nn.Linear(8, 8)
        self.kernel = torch.nn.Parameter(torch.randn(8, 2, 2, 2) * 0.3)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, idx):
        x = self.table[idx]
        for layer in (self.fc1, self.fc2, self.fc3, self.fc4):
            x = torch.tanh(layer(x))
        return self.head(torch.tanh(x @ self.kernel.view(8, 8).t()))


def write(path, tensors):
    with open(path, "wb") as f:
        for t in tensors:
            f.write(t.detach().contiguous().view(-1).numpy().tobytes())


def worker(rank, args):
    out, matrix_rank, start_iter, error_feedback, warm_start, epsilon, seed, rate, steps = args
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + os.path.join(out, "store"), rank=rank, world_size=2)
    torch.manual_seed(0)
    model = Tiny()
    names = [name for name, _ in model.named_parameters()]
    name_of = {id(p): name for name, p in model.named_parameters()}
    # One bucket: DDP's cap, and the first bucket's cap that the rebuild before step 1 uses. With
    # find_unused_parameters=True DDP would keep its first bucket, but its all-reduce of the used
    # parameters then races the hook's all-reduces and Gloo aborts.
    dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1024)
    state = powersgd.PowerSGDState(
        process_group=None, matrix_approximation_rank=matrix_rank, start_powerSGD_iter=start_iter,
        min_compression_rate=rate, use_error_feedback=error_feedback, warm_start=warm_start,
        orthogonalization_epsilon=epsilon, random_seed=seed)
    seen = {}

    def recording_hook(state, bucket):
        seen["order"] = [name_of[id(p)] for p in bucket.parameters()]
        seen["local"] = {seen["order"][k]: g.clone() for k, g in enumerate(bucket.gradients())}
        return powersgd.powerSGD_hook(state, bucket)

    ddp.register_comm_hook(state, recording_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    if rank == 0:
        with open(os.path.join(out, "shapes.txt"), "w") as f:
            for name, p in model.named_parameters():
                f.write(" ".join([name] + [str(d) for d in p.shape]) + "\n")
        write(os.path.join(out, "init.bin"), model.parameters())
    for step in range(steps):
        data = torch.Generator().manual_seed(1000 * rank + step)
        idx = torch.randint(0, 16, (6,), generator=data)
        target = torch.randint(0, 5, (6,), generator=data)
        optimizer.zero_grad()
        F.cross_entropy(ddp(idx), target).backward()
        prefix = os.path.join(out, "step%d_rank%d" % (step, rank))
        write(prefix + "_local.bin", [seen["local"][name] for name in names])
        write(prefix + "_reduced.bin", [p.grad for p in model.parameters()])
        with open(prefix + "_order.txt", "w") as f:
            f.write("\n".join(seen["order"]) + "\n")
        optimizer.step()
    # Everything is written. Tearing DDP and the Gloo group down after the hook sometimes aborts
    # the process in torch 1.13 (std::terminate, about one run in four), so skip the teardown.
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


def main():
    a = sys.argv[1:]
    args = (a[0], int(a[1]), int(a[2]), a[3] == "1", a[4] == "1", float(a[5]), int(a[6]), float(a[7]), int(a[8]))
    mp.spawn(worker, args=(args,), nprocs=2)


if __name__ == "__main__":
    main()
