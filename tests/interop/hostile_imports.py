#!/usr/bin/env python3
"""Hostile model files for `attograd import`, each within the limits the readers state, each
made to cost memory out of proportion to the model it describes (docs/reliability.md).

usage: hostile_imports.py OUT_DIR [MB]     (MB: how large to make each, default 95)
       hostile_imports.py --huge FOLDER VOCAB WIDTH   a sparse BF16 GPT-2 of one layer whose
                                          float32 weights need VOCAB x WIDTH x 4 bytes and more
       hostile_imports.py --layers FOLDER N   a valid tiny GPT-2 of N layers: 12 N + 4 tensors of
                                          a few floats each, what the checkpoint holds per tensor
                                          far above its values

Writes, into OUT_DIR, a tiny GPT-2 (vocabulary 8, context 4, width 4, one layer and head)
dressed in each way:
  st_tensors/       a safetensors header of MB of empty tensors the model does not have
  st_metadata/      a safetensors header of MB of __metadata__ entries
  st_index/         model.safetensors.index.json naming 1 MB of tensors the model lacks
  config_tree/      config.json of 1 MB of nested empty arrays (keys the model never reads)
  gguf_bytes.gguf   a GGUF key of MB of UINT8s (the model keeps none of them)
  gguf_keys.gguf    MB of GGUF keys of one UINT8 each
  gguf_strings.gguf a GGUF key of MB of empty strings
  gguf_tensors.gguf MB of GGUF tensor infos the model does not have
  gguf_long_tokens.gguf  (whatever MB says) a tokenizer.ggml.tokens of 1024 strings of 1 MiB,
                    a sparse file of 1 GiB: a key the model keeps, its strings far past any
                    tokenizer's
Standard library only; nothing it writes enters the repository.
"""
import json
import os
import struct
import sys

V, T, D = 8, 4, 4


def hf_tensors(layers=1):
    """GPT-2's tensors for the tiny config, with their shapes."""
    yield "wte.weight", (V, D)
    yield "wpe.weight", (T, D)
    for layer in range(layers):
        yield from layer_tensors("h.%d." % layer)
    yield "ln_f.weight", (D,)
    yield "ln_f.bias", (D,)


def layer_tensors(h):
    for name, shape in [("ln_1.weight", (D,)), ("ln_1.bias", (D,)),
                        ("attn.c_attn.weight", (D, 3 * D)), ("attn.c_attn.bias", (3 * D,)),
                        ("attn.c_proj.weight", (D, D)), ("attn.c_proj.bias", (D,)),
                        ("ln_2.weight", (D,)), ("ln_2.bias", (D,)),
                        ("mlp.c_fc.weight", (D, 4 * D)), ("mlp.c_fc.bias", (4 * D,)),
                        ("mlp.c_proj.weight", (4 * D, D)), ("mlp.c_proj.bias", (D,))]:
        yield h + name, shape


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def config(extra=None):
    c = {"model_type": "gpt2", "vocab_size": V, "n_positions": T, "n_embd": D, "n_layer": 1,
         "n_head": 1}
    c.update(extra or {})
    return json.dumps(c)


def safetensors(path, extra_entries_bytes=0, metadata_bytes=0, layers=1):
    """The tiny model's F32 tensors, then the padding entries asked for."""
    parts, offset = [], 0
    for name, shape in hf_tensors(layers):
        n = numel(shape) * 4
        parts.append(json.dumps(name) + ':{"dtype":"F32","shape":%s,"data_offsets":[%d,%d]}'
                     % (json.dumps(list(shape)), offset, offset + n))
        offset += n
    i = 0
    size = 0
    while size < extra_entries_bytes:  # empty tensors: any number fit in the data region
        p = '"x%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}' % i
        parts.append(p)
        size += len(p) + 1
        i += 1
    if metadata_bytes:
        meta, size, i = [], 0, 0
        while size < metadata_bytes:
            p = '"m%d":""' % i
            meta.append(p)
            size += len(p) + 1
            i += 1
        parts.append('"__metadata__":{' + ",".join(meta) + "}")
    header = ("{" + ",".join(parts) + "}").encode()
    header += b" " * ((8 - len(header) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.write(struct.pack("<%df" % (offset // 4), *([0.01] * (offset // 4))))


def hf_folder(folder, cfg=None, **st):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write(cfg or config())
    safetensors(os.path.join(folder, "model.safetensors"), **st)


def index_folder(folder, mb_bytes):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write(config())
    safetensors(os.path.join(folder, "model-1.safetensors"))
    entries, size, i = {}, 0, 0
    for name, _ in hf_tensors():
        entries[name] = "model-1.safetensors"
    while size < mb_bytes:
        entries["y%d" % i] = "a"
        size += len("y%d" % i) + 8
        i += 1
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": entries}, f, separators=(",", ":"))


def config_tree_folder(folder, mb_bytes):
    n = (mb_bytes - 200) // 3
    hf_folder(folder, cfg=config()[:-1] + ',"junk":[' + ",".join(["[]"] * n) + "]}")


# ---------------------------------------------------------------- GGUF


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gkey_u32(name, v):
    return gstr(name) + struct.pack("<II", 4, v)


def gguf(path, extra_keys=b"", extra_key_count=0, extra_tensors=0):
    keys = [gstr("general.architecture") + struct.pack("<I", 8) + gstr("gpt2"),
            gkey_u32("general.alignment", 1),
            gkey_u32("gpt2.context_length", T), gkey_u32("gpt2.embedding_length", D),
            gkey_u32("gpt2.feed_forward_length", 4 * D), gkey_u32("gpt2.block_count", 1),
            gkey_u32("gpt2.attention.head_count", 1),
            gstr("gpt2.attention.layer_norm_epsilon") + struct.pack("<If", 6, 1e-5)]
    shapes = [("token_embd.weight", (V, D)), ("position_embd.weight", (T, D))]
    for name, sh in [("attn_norm", (D,)), ("attn_qkv", (3 * D, D)), ("attn_output", (D, D)),
                     ("ffn_norm", (D,)), ("ffn_up", (4 * D, D)), ("ffn_down", (D, 4 * D))]:
        shapes.append(("blk.0.%s.weight" % name, sh))
        shapes.append(("blk.0.%s.bias" % name, (sh[0],)))
    shapes += [("output_norm.weight", (D,)), ("output_norm.bias", (D,))]
    infos, offset = [], 0
    for name, sh in shapes:
        ne = list(reversed(sh))
        infos.append(gstr(name) + struct.pack("<I", len(ne)) +
                     b"".join(struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", 0, offset))
        offset += numel(sh) * 4
    data_len = offset
    for i in range(extra_tensors):  # one float each, after the model's
        infos.append(gstr("z%d" % i) + struct.pack("<IQIQ", 1, 1, 0, offset))
        offset += 4
    head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(keys) + extra_key_count)
    with open(path, "wb") as f:
        f.write(head + b"".join(keys) + extra_keys + b"".join(infos))
        f.write(struct.pack("<%df" % (data_len // 4), *([0.01] * (data_len // 4))))
        f.write(b"\0" * (offset - data_len))


def gguf_long_tokens(path, strings=1024, length=1 << 20):
    """A GGUF whose kept key tokenizer.ggml.tokens holds long strings of zeros, written as
    holes: the file says 1 GiB, the disk holds a few MB."""
    gguf(path)
    with open(path, "rb") as f:
        model = f.read()
    head = struct.calcsize("<4sIQQ")
    magic, version, tensors, keys = struct.unpack("<4sIQQ", model[:head])
    with open(path, "wb") as f:
        f.write(struct.pack("<4sIQQ", magic, version, tensors, keys + 1))
        f.write(gstr("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, strings))
        for _ in range(strings):
            f.write(struct.pack("<Q", length))
            f.seek(length, 1)
        f.write(model[head:])


def huge(folder, vocab, width):
    """config.json and a sparse model.safetensors of zeros (BF16): no disk, any size."""
    os.makedirs(folder, exist_ok=True)
    shapes = [("wte.weight", (vocab, width)), ("wpe.weight", (1, width))]
    for name, shape in [("ln_1.weight", (width,)), ("ln_1.bias", (width,)),
                        ("attn.c_attn.weight", (width, 3 * width)), ("attn.c_attn.bias", (3 * width,)),
                        ("attn.c_proj.weight", (width, width)), ("attn.c_proj.bias", (width,)),
                        ("ln_2.weight", (width,)), ("ln_2.bias", (width,)),
                        ("mlp.c_fc.weight", (width, 4 * width)), ("mlp.c_fc.bias", (4 * width,)),
                        ("mlp.c_proj.weight", (4 * width, width)), ("mlp.c_proj.bias", (width,))]:
        shapes.append(("h.0." + name, shape))
    shapes += [("ln_f.weight", (width,)), ("ln_f.bias", (width,))]
    header, offset = {}, 0
    for name, shape in shapes:
        n = numel(shape) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(8 + len(text) + offset)
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write(json.dumps({"model_type": "gpt2", "vocab_size": vocab, "n_positions": 1,
                            "n_embd": width, "n_layer": 1, "n_head": 1}))


def main():
    if sys.argv[1] == "--huge":
        huge(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    if sys.argv[1] == "--layers":
        layers = int(sys.argv[3])
        hf_folder(sys.argv[2], cfg=config({"n_layer": layers}), layers=layers)
        return
    out = sys.argv[1]
    mb = int(float(sys.argv[2]) * 1e6) if len(sys.argv) > 2 else 95_000_000
    os.makedirs(out, exist_ok=True)
    hf_folder(os.path.join(out, "st_tensors"), extra_entries_bytes=mb)
    hf_folder(os.path.join(out, "st_metadata"), metadata_bytes=mb)
    index_folder(os.path.join(out, "st_index"), min(mb, 1_000_000))
    config_tree_folder(os.path.join(out, "config_tree"), min(mb, 1_000_000))
    gguf(os.path.join(out, "gguf_bytes.gguf"),
         gstr("junk") + struct.pack("<IIQ", 9, 0, mb) + b"\1" * mb, 1)
    n = mb // 21  # a key of an 8-character name holding a UINT8: 21 bytes
    keys = bytearray()
    for i in range(n):
        keys += struct.pack("<Q", 8) + b"%08x" % i + struct.pack("<IB", 0, 1)
    gguf(os.path.join(out, "gguf_keys.gguf"), bytes(keys), n)
    gguf(os.path.join(out, "gguf_strings.gguf"),
         gstr("junk") + struct.pack("<IIQ", 9, 8, mb // 8) + b"\0" * (mb // 8 * 8), 1)
    gguf(os.path.join(out, "gguf_tensors.gguf"), extra_tensors=mb // 40)
    gguf_long_tokens(os.path.join(out, "gguf_long_tokens.gguf"))


if __name__ == "__main__":
    main()
