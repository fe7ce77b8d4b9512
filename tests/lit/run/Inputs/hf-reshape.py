# Rewrites an exported Hugging Face directory the ways released models come
# (reading and writing safetensors itself, so nothing is shared with sharc):
#   shard SRC DST N   model.safetensors split over N files, tensors dealt
#                     round-robin by name, with model.safetensors.index.json
#   half SRC DST      every F32 tensor stored as F16 (IEEE binary16)
#   check-half DIR CKPT
#                     sharc's imported checkpoint holds each F16 tensor of
#                     DIR/model.safetensors as F32 of exactly its value
#   same-weights A B  two checkpoints hold the same parameters, bit for bit
#                     (optimizer state left out)
import json
import os
import shutil
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    header.pop("__metadata__", None)
    return {name: (e["dtype"], e["shape"],
                   data[e["data_offsets"][0]:e["data_offsets"][1]])
            for name, e in header.items()}


def write(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        dtype, shape, blob = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def values(dtype, blob):
    code = {"F32": "f", "F16": "e"}[dtype]
    return struct.unpack("<%d%s" % (len(blob) // struct.calcsize(code), code),
                         blob)


def copy_config(src, dst):
    os.makedirs(dst, exist_ok=True)
    shutil.copy(os.path.join(src, "config.json"), dst)


def main():
    command = sys.argv[1]
    if command == "shard":
        src, dst, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
        copy_config(src, dst)
        tensors = read(os.path.join(src, "model.safetensors"))
        shards, weight_map = [{} for _ in range(count)], {}
        for i, name in enumerate(sorted(tensors)):
            file = "model-%05d-of-%05d.safetensors" % (i % count + 1, count)
            shards[i % count][name] = tensors[name]
            weight_map[name] = file
        for i, shard in enumerate(shards):
            write(os.path.join(dst, "model-%05d-of-%05d.safetensors"
                               % (i + 1, count)), shard)
        total = sum(len(t[2]) for t in tensors.values())
        with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total},
                       "weight_map": weight_map}, f, indent=2)
    elif command == "half":
        src, dst = sys.argv[2], sys.argv[3]
        copy_config(src, dst)
        tensors = read(os.path.join(src, "model.safetensors"))
        half = {}
        for name, (dtype, shape, blob) in tensors.items():
            assert dtype == "F32"
            half[name] = ("F16", shape,
                          struct.pack("<%de" % (len(blob) // 4),
                                      *values(dtype, blob)))
        write(os.path.join(dst, "model.safetensors"), half)
    elif command == "check-half":
        half = read(os.path.join(sys.argv[2], "model.safetensors"))
        ckpt = read(sys.argv[3])
        for name, (dtype, shape, blob) in half.items():
            sharc_name = name[len("model."):] if name.startswith("model.") \
                else name
            got_dtype, got_shape, got = ckpt[sharc_name]
            assert got_dtype == "F32" and got_shape == shape, name
            assert values("F32", got) == values("F16", blob), name
        print("F16 exact:", len(half), "tensors")
    elif command == "same-weights":
        a, b = read(sys.argv[2]), read(sys.argv[3])
        names = [n for n in a if not n.endswith((".exp_avg", ".exp_avg_sq"))]
        for name in names:
            assert a[name] == b[name], name
        print("same weights:", len(names), "tensors")
    else:
        sys.exit("unknown command " + command)


main()
