"""nanoGPT's sampling (GPT.generate) in PyTorch on a `gcrun export` file: gcrun sample's twin.

The file is loaded into PyTorch's twin GPT by safetensors_twin.py's own reader; each token is drawn
as nanoGPT's generate() draws it (the context cropped, the last logits over the temperature, all but
the top k at -inf, softmax, torch.multinomial) from one CPU generator seeded with SEED. Prints the
prompt's and the drawn ids, space-separated, as `gcrun sample` prints them for data without text,
for tests/cli/sample_command_test.cpp to compare.

usage: sample_twin.py FILE HEADS 'PROMPT IDS' TOKENS TEMPERATURE TOP_K SEED
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_twin import logits_of, read_safetensors, twin_of  # noqa: E402


def main():
    path, heads, prompt, tokens, temperature, top_k, seed = sys.argv[1:8]
    tensors, _ = read_safetensors(path)
    model = twin_of(tensors, int(heads)).eval()
    context = tensors["transformer.wpe.weight"].shape[0]
    ids = [int(word) for word in prompt.split()]
    generator = torch.Generator().manual_seed(int(seed))
    with torch.no_grad():
        for _ in range(int(tokens)):
            logits = logits_of(model, torch.tensor([ids[-context:]]))[:, -1, :] / float(temperature)
            kth, _ = torch.topk(logits, min(int(top_k), logits.size(-1)))
            logits[logits < kth[:, [-1]]] = -float("inf")
            probabilities = torch.softmax(logits, dim=-1)
            ids.append(torch.multinomial(probabilities, num_samples=1, generator=generator).item())
    print(" ".join(str(i) for i in ids))


if __name__ == "__main__":
    main()
