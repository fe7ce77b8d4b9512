# ===- golden_io.py - safetensors for the golden fixtures, stdlib only ----===#
"""The safetensors writer and reader of make_golden.py (standard library
only, so that --selftest-writer runs without torch), with the self-checks'
error type.
"""

import json
import os
import struct
import tempfile

# safetensors dtype name -> (struct code, element size in bytes).
ST_DTYPES = {"F32": ("f", 4), "I32": ("i", 4)}


class GoldenError(Exception):
    """A self-check failed; the fixtures must not be trusted."""


def check(cond, msg):
    # Not `assert`: python -O would silently drop the self-checks.
    if not cond:
        raise GoldenError(msg)


def numel(shape):
    n = 1
    for d in shape:
        check(isinstance(d, int) and d >= 0, "bad shape %r" % (shape,))
        n *= d
    return n


def encode_values(dtype, shape, values):
    """Pack a flat list of Python numbers as little-endian `dtype` bytes."""
    check(dtype in ST_DTYPES, "unsupported dtype %s" % dtype)
    n = numel(shape)
    check(len(values) == n, "%d values for shape %r" % (len(values), shape))
    code, _ = ST_DTYPES[dtype]
    return struct.pack("<%d%s" % (n, code), *values)


def write_safetensors(path, tensors, metadata):
    """Write `tensors` (list of (name, dtype, shape, raw bytes)) to `path`.

    Layout: u64 LE header length N, N bytes of JSON padded with spaces so that
    the data starts at a multiple of 8, then each tensor's bytes back to back
    in the header's order (no holes, as the format requires).
    """
    header = {}
    offset = 0
    for name, dtype, shape, data in tensors:
        check(name != "__metadata__" and name not in header,
              "duplicate or reserved tensor name %r" % name)
        check(dtype in ST_DTYPES, "unsupported dtype %s" % dtype)
        size = numel(shape) * ST_DTYPES[dtype][1]
        check(len(data) == size,
              "%s: %d bytes, expected %d" % (name, len(data), size))
        header[name] = {"dtype": dtype, "shape": [int(d) for d in shape],
                        "data_offsets": [offset, offset + size]}
        offset += size
    if metadata:
        for k, v in metadata.items():
            check(isinstance(k, str) and isinstance(v, str),
                  "metadata must map str to str: %r=%r" % (k, v))
        header["__metadata__"] = dict(metadata)
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * ((-len(blob)) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for _, _, _, data in tensors:
            f.write(data)
    os.replace(tmp, path)
    return 8 + len(blob) + offset


def read_safetensors(path):
    """Return (ordered names, {name: (dtype, shape, values)}, metadata).

    Validates what a strict reader would: header length, 8-byte alignment of
    the data section, contiguous hole-free offsets, sizes matching shapes.
    """
    with open(path, "rb") as f:
        blob = f.read()
    check(len(blob) >= 8, "file too short")
    (n,) = struct.unpack_from("<Q", blob, 0)
    check(8 + n <= len(blob), "header length past end of file")
    check(n % 8 == 0, "header not padded to a multiple of 8")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    base = 8 + n
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k)
                   for k, v in header.items())
    pos = 0
    for b, e, k in spans:
        check(b == pos and e >= b, "%s: offsets [%d,%d) not contiguous" %
              (k, b, e))
        pos = e
    check(base + pos == len(blob), "data section size mismatch")
    tensors = {}
    for k, v in header.items():
        dtype, shape = v["dtype"], v["shape"]
        check(dtype in ST_DTYPES, "%s: unsupported dtype %s" % (k, dtype))
        code, size = ST_DTYPES[dtype]
        b, e = v["data_offsets"]
        cnt = numel(shape)
        check(e - b == cnt * size, "%s: byte size does not match shape" % k)
        vals = list(struct.unpack_from("<%d%s" % (cnt, code), blob, base + b))
        tensors[k] = (dtype, shape, vals)
    return list(header.keys()), tensors, metadata


def f32_round(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def selftest_roundtrip():
    """Round-trip the writer with plain lists; returns the tensor count."""
    tensors = [
        ("loss", "F32", [], [f32_round(4.8523)]),
        ("tokens", "I32", [2, 3], [0, 127, -5, 2**31 - 1, -2**31, 7]),
        ("param:w", "F32", [3, 2],
         [f32_round(v) for v in [0.1, -2.5, 1e-30, 3.4e38, -0.0,
                                 float("inf")]]),
        ("empty", "F32", [0, 4], []),
        ("odd", "F32", [1], [1.0]),  # leaves data ends at 4-byte offsets
    ]
    meta = {"hidden_size": "64", "note": "s\u00e9lf \"test\""}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.safetensors")
        size = write_safetensors(
            path, [(n, t, s, encode_values(t, s, v)) for n, t, s, v in tensors],
            meta)
        check(os.path.getsize(path) == size, "reported size wrong")
        names, got, gmeta = read_safetensors(path)
        check(names == [t[0] for t in tensors], "order not preserved: %r" %
              names)
        check(gmeta == meta, "metadata mismatch: %r" % gmeta)
        for n, t, s, v in tensors:
            gt, gs, gv = got[n]
            check(gt == t and gs == s, "%s: dtype/shape mismatch" % n)
            check(struct.pack("<%d%s" % (len(v), ST_DTYPES[t][0]), *v) ==
                  struct.pack("<%d%s" % (len(gv), ST_DTYPES[t][0]), *gv),
                  "%s: values differ after round trip" % n)
        with open(path, "rb") as f:
            raw = f.read()
        (hlen,) = struct.unpack_from("<Q", raw, 0)
        check((8 + hlen) % 8 == 0, "data start not 8-aligned")
        check(raw[8 + hlen - 1:8 + hlen] in (b" ", b"}"), "bad padding")
        # Known bytes: the scalar loss is the first tensor; 1.0f is 0x3f800000.
        data = raw[8 + hlen:]
        check(data[:4] == struct.pack("<f", tensors[0][3][0]),
              "scalar not at offset 0")
        check(data[-4:] == b"\x00\x00\x80\x3f", "1.0f not little-endian")
        tok = data[4:28]
        check(tok[4:8] == b"\x7f\x00\x00\x00" and
              tok[8:12] == b"\xfb\xff\xff\xff",
              "I32 not little-endian two's complement")
        # Negative tests: the reader must reject a holey or truncated file.
        for bad in (raw[:-1], raw + b"\x00"):
            with open(path, "wb") as f:
                f.write(bad)
            try:
                read_safetensors(path)
            except GoldenError:
                pass
            else:
                raise GoldenError("reader accepted a corrupt file")
    return len(tensors)
