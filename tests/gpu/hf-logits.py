#!/usr/bin/env python3
# Loads each `sharc export --format hf` directory with transformers as
# Qwen3ForCausalLM and compares its logits with sharc's on the same tokens
# (tests/gpu/hf-export.sh makes the directories where sharc is built).
#
#   python3 tests/gpu/hf-logits.py DIR [DIR...] [--tolerance 2e-4]
#
# No network: the model comes from DIR alone. Runs on the GPU when torch
# sees one (TF32 off, so both sides are fp32), else on the CPU. Prints the
# largest absolute logit difference, its ratio to the largest logit and the
# share of positions whose argmax agrees, per directory; exit 1 when a
# difference exceeds the tolerance (relative to the largest |logit|).
import argparse
import json
import os
import struct
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from transformers import AutoConfig, Qwen3ForCausalLM  # noqa: E402


def read_safetensors(path):
    """name -> float32 tensor, read by hand (8-byte length, JSON header)."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    header.pop("__metadata__", None)
    kinds = {"F32": torch.float32, "BF16": torch.bfloat16,
             "I32": torch.int32, "F64": torch.float64}
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensor = torch.frombuffer(bytearray(data[begin:end]),
                                  dtype=kinds[entry["dtype"]])
        tensors[name] = tensor.reshape(entry["shape"]).float()
    return tensors


def check(directory, tolerance, device):
    config = AutoConfig.from_pretrained(directory, local_files_only=True)
    model = Qwen3ForCausalLM.from_pretrained(
        directory, local_files_only=True, dtype=torch.float32,
        attn_implementation="eager").to(device).eval()
    sharc_logits = read_safetensors(
        os.path.join(directory, "sharc-logits.safetensors"))["logits"]
    seq, batch, vocab = sharc_logits.shape  # sharc is sequence-first
    with open(os.path.join(directory, "sharc-tokens.bin"), "rb") as f:
        ids = struct.unpack("<%di" % (seq * batch), f.read())
    tokens = torch.tensor(ids, dtype=torch.long).reshape(batch, seq)
    with torch.no_grad():
        hf_logits = model(tokens.to(device)).logits.float().cpu()
    hf_logits = hf_logits.transpose(0, 1)  # [S, B, V] like sharc's
    assert hf_logits.shape == sharc_logits.shape, (hf_logits.shape,
                                                  sharc_logits.shape)
    difference = (hf_logits - sharc_logits).abs().max().item()
    scale = sharc_logits.abs().max().item()
    agree = (hf_logits.argmax(-1) == sharc_logits.argmax(-1)).float().mean()
    ok = difference <= tolerance * max(scale, 1.0)
    print(f"{directory}: {config.num_hidden_layers} layers, hidden "
          f"{config.hidden_size}, vocab {vocab}, tied "
          f"{config.tie_word_embeddings}: max |hf - sharc| {difference:.3e} "
          f"({difference / max(scale, 1e-30):.3e} of max |logit| "
          f"{scale:.3f}), argmax agrees at {agree.item():.1%} of "
          f"{seq * batch} positions: {'ok' if ok else 'FAIL'}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--tolerance", type=float, default=2e-4)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"transformers on {device}, torch {torch.__version__}")
    results = [check(d, args.tolerance, device) for d in args.dirs]
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
