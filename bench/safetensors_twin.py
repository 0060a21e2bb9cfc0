"""A safetensors file from `gcrun export`, loaded into PyTorch's twin GPT (gpt_twin.py), and its logits.

The file is read with a reader of its own, written from the format's specification (an 8-byte
little-endian header length, a JSON header of dtype, shape and data_offsets per tensor, then the
data), with json, struct and torch.frombuffer: not the safetensors package, not gcrun's code. The
tensors are loaded into the twin by their nanoGPT names; the logits of TOKENS are printed as one
JSON list, for tests/outputs/export/safetensors_export_test.cpp to compare with gcrun's.

usage: safetensors_twin.py FILE HEADS TOKENS   (TOKENS: rows separated by ';', ids by ',')
"""

import json
import os
import re
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_twin import GPT  # noqa: E402

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}


def read_safetensors(path):
    data = open(path, "rb").read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    body = data[8 + length:]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        flat = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype) if end > begin else torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(info["shape"])
    return tensors, metadata


def twin_of(tensors, heads):
    vocabulary, width = tensors["transformer.wte.weight"].shape
    context = tensors["transformer.wpe.weight"].shape[0]
    layers = len([n for n in tensors if re.fullmatch(r"transformer\.h\.\d+\.ln_1\.weight", n)])
    model = GPT(vocabulary, context, layers, heads, width, "transformer.ln_f.bias" in tensors)
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    # The twin ties the output to wte without a module of its own, and keeps its causal mask as a
    # buffer, which no file holds.
    assert unexpected == ["lm_head.weight"], unexpected
    assert torch.equal(tensors["lm_head.weight"], tensors["transformer.wte.weight"])
    assert all(name.endswith(".mask") for name in missing), missing
    return model


def logits_of(model, idx):
    """The twin's forward up to its logits (its forward() goes on to the loss)."""
    pos = torch.arange(0, idx.size(1), dtype=torch.long)
    x = model.transformer.wte(idx) + model.transformer.wpe(pos)
    for block in model.transformer.h:
        x = block(x)
    f = model.transformer.ln_f
    x = F.layer_norm(x, x.shape[-1:], f.weight, f.bias, 1e-5)
    return F.linear(x, model.transformer.wte.weight)


def main():
    path, heads, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    tensors, _ = read_safetensors(path)
    model = twin_of(tensors, heads)
    idx = torch.tensor([[int(t) for t in row.split(",")] for row in rows.split(";")], dtype=torch.int64)
    with torch.no_grad():
        print(json.dumps(logits_of(model, idx).flatten().tolist()))


if __name__ == "__main__":
    main()
