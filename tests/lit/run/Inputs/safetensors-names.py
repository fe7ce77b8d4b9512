# Prints a safetensors file's metadata and "name dtype [shape]" per tensor,
# sorted, reading the format itself (8-byte length, JSON header), so the
# check does not share sharc's reader.
import json
import struct
import sys

with open(sys.argv[1], "rb") as f:
    (length,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(length))
print("metadata", json.dumps(header.pop("__metadata__", {}), sort_keys=True))
for name in sorted(header):
    entry = header[name]
    print(name, entry["dtype"], entry["shape"])
