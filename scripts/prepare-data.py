#!/usr/bin/env python3
# Text or JSONL -> sharc token files (train and validation), docs/data.md.
#
#   scripts/prepare-data.py TEXT... -o DIR --train-tokenizer 6400
#   scripts/prepare-data.py data.jsonl -o DIR --tokenizer tokenizer.json
#   scripts/prepare-data.py --dump DIR/val.tokens --tokenizer DIR/tokenizer.json
#
# As in llm.c and nanoGPT, Python prepares and the runtime only reads ids. A
# .jsonl (or .json) input holds one object per line whose "text" field is a
# document (MiniMind's pretraining format); any other file is plain UTF-8
# text, cut into documents of --chunk-lines lines. Every --val-every-th
# document goes to val.tokens, the rest to train.tokens, so validation text
# comes from the same distribution. Documents of different records or files
# are separated by the tokenizer's <|endoftext|> when it has one.
# Needs the `tokenizers` package (scripts/setup.sh installs it in .venv).
import argparse
import json
import os
import struct
import sys
import tempfile

MAGIC = b"SHARCTOK"
VERSION = 1
HEADER = struct.Struct("<8sIIQQ")  # magic, version, id bytes, vocab, count
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # MiniMind's


def fail(message):
    print(f"prepare-data: error: {message}", file=sys.stderr)
    sys.exit(2)


def documents(paths, chunk_lines):
    """Yields (text, starts_record): starts_record is True at the start of a
    JSONL record or a file, where an end-of-text token belongs."""
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                if path.endswith((".jsonl", ".json")):
                    for number, line in enumerate(f, 1):
                        if not line.strip():
                            continue
                        try:
                            record = json.loads(line)
                        except json.JSONDecodeError as e:
                            fail(f"{path}:{number}:{e.colno}: {e.msg}")
                        if not isinstance(record, dict) or not isinstance(
                                record.get("text"), str):
                            fail(f"{path}:{number}:1: expected an object "
                                 "with a string field 'text'")
                        yield record["text"], True
                    continue
                lines, first = [], True
                for line in f:
                    lines.append(line)
                    if len(lines) == chunk_lines:
                        yield "".join(lines), first
                        lines, first = [], False
                if lines:
                    yield "".join(lines), first
        except OSError as e:
            fail(f"{path}: {e.strerror}")
        except UnicodeDecodeError as e:
            fail(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})")


def train_tokenizer(texts, vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers import trainers
    tokenizer = Tokenizer(models.BPE())
    # Byte-level: every string has an encoding and decoding gives it back.
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def write_tokens(path, ids, vocab_size):
    width = 2 if vocab_size <= 65536 else 4
    code = "H" if width == 2 else "I"
    payload = struct.pack(f"<{len(ids)}{code}", *ids)
    header = HEADER.pack(MAGIC, VERSION, width, vocab_size, len(ids))
    # Atomic, like every file sharc writes: a reader sees old or new.
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(dir=directory, prefix=".tokens-")
    with os.fdopen(fd, "wb") as f:
        f.write(header + payload)
    os.chmod(temp, 0o644)
    os.replace(temp, path)


def read_tokens(path):
    """(version, id bytes, vocab, ids) of a sharc token file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        fail(f"{path}: not a sharc token file (no {MAGIC.decode()} magic)")
    _, version, width, vocab, count = HEADER.unpack_from(data)
    code = "H" if width == 2 else "I"
    ids = struct.unpack_from(f"<{count}{code}", data, HEADER.size)
    return version, width, vocab, list(ids)


def main():
    parser = argparse.ArgumentParser(
        description="text or JSONL -> sharc token files")
    parser.add_argument("inputs", nargs="*", help="text or .jsonl files")
    parser.add_argument("-o", "--out", help="output directory")
    parser.add_argument("--tokenizer", help="a Hugging Face tokenizer.json")
    parser.add_argument("--train-tokenizer", type=int, metavar="VOCAB",
                        help="train a byte-level BPE tokenizer of this "
                        "vocabulary size on the inputs (written to "
                        "OUT/tokenizer.json)")
    parser.add_argument("--val-every", type=int, default=20, metavar="K",
                        help="every K-th document is validation (default "
                        "20; 0: no validation file)")
    parser.add_argument("--chunk-lines", type=int, default=64,
                        help="lines per document of a text file")
    parser.add_argument("--dump", metavar="TOKENS",
                        help="print a token file's header and its text")
    args = parser.parse_args()
    try:
        from tokenizers import Tokenizer
    except ImportError:
        fail("the 'tokenizers' package is missing: run scripts/setup.sh and "
             "use .venv/bin/python")

    if args.dump:
        if not args.tokenizer:
            fail("--dump needs --tokenizer")
        version, width, vocab, ids = read_tokens(args.dump)
        print(json.dumps({"version": version, "dtype": f"uint{8 * width}",
                          "vocab_size": vocab, "count": len(ids)}))
        sys.stdout.write(Tokenizer.from_file(args.tokenizer).decode(
            ids, skip_special_tokens=False))
        return
    if not args.inputs or not args.out:
        fail("give input files and -o DIR (see --help)")
    if (args.tokenizer is None) == (args.train_tokenizer is None):
        fail("give exactly one of --tokenizer and --train-tokenizer")
    if args.train_tokenizer is not None and not 300 <= args.train_tokenizer \
            <= 1 << 20:
        fail(f"--train-tokenizer {args.train_tokenizer}: a byte-level BPE "
             "needs 256 byte symbols and the specials: 300 to 1048576")
    if args.val_every < 0 or args.chunk_lines < 1:
        fail("--val-every must be >= 0 and --chunk-lines >= 1")
    os.makedirs(args.out, exist_ok=True)

    docs = list(documents(args.inputs, args.chunk_lines))
    if not any(text for text, _ in docs):
        fail("the inputs hold no text")
    if args.tokenizer:
        try:
            tokenizer = Tokenizer.from_file(args.tokenizer)
        except Exception as e:  # the library raises its own types
            fail(f"{args.tokenizer}: cannot read the tokenizer: {e}")
    else:
        tokenizer = train_tokenizer((text for text, _ in docs),
                                    args.train_tokenizer)
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    eos = tokenizer.token_to_id(SPECIALS[0])

    splits = {"train": [], "val": []}
    encodings = tokenizer.encode_batch([text for text, _ in docs],
                                       add_special_tokens=False)
    for index, ((_, starts_record), encoding) in enumerate(
            zip(docs, encodings)):
        is_val = args.val_every > 0 and index % args.val_every == \
            args.val_every - 1
        ids = splits["val" if is_val else "train"]
        if starts_record and eos is not None and ids:
            ids.append(eos)
        ids.extend(encoding.ids)
    if args.val_every == 0:
        del splits["val"]
    # Both checked before either is written: no half-prepared directory.
    for name, ids in splits.items():
        if not ids:
            fail(f"no {name} tokens: too little text for --val-every "
                 f"{args.val_every} and --chunk-lines {args.chunk_lines}")
    if args.train_tokenizer is not None:
        tokenizer.save(os.path.join(args.out, "tokenizer.json"))
    for name, ids in splits.items():
        path = os.path.join(args.out, f"{name}.tokens")
        write_tokens(path, ids, vocab)
        print(f"{path}: {len(ids)} tokens, vocabulary {vocab}")


if __name__ == "__main__":
    main()
