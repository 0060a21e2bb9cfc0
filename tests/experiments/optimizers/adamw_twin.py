"""The PyTorch twin of gcrun's AdamW step: torch.optim.AdamW(foreach=False), clip_grad_norm_ and
nanoGPT's get_lr over the float32 tensors adamw_pytorch_test wrote to DIR.

usage: adamw_twin.py DIR  (reads DIR/spec.txt, DIR/init_K.bin, DIR/grad_T_K.bin; writes
DIR/final_K.bin, DIR/exp_avg_K.bin, DIR/exp_avg_sq_K.bin and DIR/rates.txt)
Exits 77 when torch is missing."""
import math
import sys

try:
    import torch
except ImportError:
    sys.exit(77)


def main(folder):
    spec = {}
    shapes = []
    for line in open(folder + "/spec.txt"):
        key, *values = line.split()
        if key == "shape":
            shapes.append(tuple(int(v) for v in values))
        else:
            spec[key] = values[0]
    lr, min_lr = float(spec["lr"]), float(spec["min_lr"])
    warmup, decay, steps = int(spec["warmup"]), int(spec["decay"]), int(spec["steps"])
    decayed = {int(k) for k in spec["decayed"].split(",")}

    def load(name, shape):
        data = bytearray(open(folder + "/" + name, "rb").read())
        return torch.frombuffer(data, dtype=torch.float32).reshape(shape).clone()

    # nanoGPT's get_lr (train.py).
    def get_lr(it):
        if it < warmup:
            return lr * (it + 1) / (warmup + 1)
        if it > decay:
            return min_lr
        decay_ratio = (it - warmup) / (decay - warmup)
        assert 0 <= decay_ratio <= 1
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (lr - min_lr)

    params = [torch.nn.Parameter(load("init_%d.bin" % k, s)) for k, s in enumerate(shapes)]
    groups = [
        {"params": [p for k, p in enumerate(params) if k in decayed], "weight_decay": float(spec["wd"])},
        {"params": [p for k, p in enumerate(params) if k not in decayed], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=lr, betas=(float(spec["beta1"]), float(spec["beta2"])),
                                  eps=float(spec["eps"]), foreach=False)
    rates = []
    for it in range(steps):
        for k, p in enumerate(params):
            p.grad = load("grad_%d_%d.bin" % (it, k), shapes[k])
        torch.nn.utils.clip_grad_norm_(params, float(spec["clip"]))
        rate = get_lr(it)
        for group in optimizer.param_groups:
            group["lr"] = rate
        optimizer.step()
        rates.append(rate)
    for k, p in enumerate(params):
        state = optimizer.state[p]
        for name, tensor in (("final", p.detach()), ("exp_avg", state["exp_avg"]), ("exp_avg_sq", state["exp_avg_sq"])):
            open("%s/%s_%d.bin" % (folder, name, k), "wb").write(tensor.contiguous().numpy().tobytes())
    with open(folder + "/rates.txt", "w") as out:
        for it in range(decay + 3):
            out.write(get_lr(it).hex() + "\n")


main(sys.argv[1])
