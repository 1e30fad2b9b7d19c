#!/usr/bin/env python3
"""Writes the crafted seed files of fuzz/corpus/ (standard library only, deterministic).

    python3 fuzz/make_seeds.py

The broken GGUF seeds (corpus/gguf_reader/*.gguf other than the two `crafted_` ones) are
copies of rinfer's shared fixtures models/broken/*.gguf and are not made here.
"""

import json
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent
GGUF_DIR = HERE / "corpus" / "gguf_reader"
ST_DIR = HERE / "corpus" / "safetensors_header"
SERVE_DIR = HERE / "corpus" / "serve_request"


def gguf_string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key: str, ty: int, payload: bytes) -> bytes:
    return gguf_string(key) + struct.pack("<I", ty) + payload


def gguf_file(kvs, tensors, alignment=32) -> bytes:
    """tensors: (name, dims, ggml_type, data bytes); offsets are laid out aligned."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    offset, infos, blobs = 0, [], []
    for name, dims, ty, data in tensors:
        offset = (offset + alignment - 1) // alignment * alignment
        infos.append(
            gguf_string(name)
            + struct.pack("<I", len(dims))
            + b"".join(struct.pack("<Q", d) for d in dims)
            + struct.pack("<IQ", ty, offset)
        )
        blobs.append((offset, data))
        offset += len(data)
    out += b"".join(infos)
    out += b"\0" * (-len(out) % alignment)
    data_start = len(out)
    for off, data in blobs:
        out += b"\0" * (data_start + off - len(out)) + data
    return out


def crafted_gguf():
    u32 = lambda v: struct.pack("<I", v)
    kvs = [
        gguf_kv("general.architecture", 8, gguf_string("llama")),
        gguf_kv("general.alignment", 4, u32(32)),
        gguf_kv("llama.block_count", 4, u32(1)),
        gguf_kv("llama.rope.freq_base", 6, struct.pack("<f", 10000.0)),
        gguf_kv("t.u8", 0, b"\x07"),
        gguf_kv("t.i8", 1, b"\xf9"),
        gguf_kv("t.u16", 2, struct.pack("<H", 513)),
        gguf_kv("t.i16", 3, struct.pack("<h", -2)),
        gguf_kv("t.i32", 5, struct.pack("<i", -3)),
        gguf_kv("t.bool", 7, b"\x01"),
        gguf_kv("t.u64", 10, struct.pack("<Q", 1 << 40)),
        gguf_kv("t.i64", 11, struct.pack("<q", -(1 << 40))),
        gguf_kv("t.f64", 12, struct.pack("<d", 0.5)),
        gguf_kv("tokenizer.ggml.tokens", 9, u32(8) + struct.pack("<Q", 3)
                + gguf_string("<s>") + gguf_string("a") + gguf_string("b")),
        gguf_kv("t.nested", 9, u32(9) + struct.pack("<Q", 1)
                + u32(4) + struct.pack("<Q", 2) + u32(1) + u32(2)),
    ]
    f32 = struct.pack("<8f", *range(8))
    f16 = struct.pack("<4e", 1.0, -2.0, 0.5, 0.0)
    q8_0 = struct.pack("<e", 0.25) + bytes(range(32))  # one 32-element block
    tensors = [
        ("token_embd.weight", [8], 0, f32),
        ("blk.0.attn_norm.weight", [4], 1, f16),
        ("blk.0.ffn_up.weight", [32, 1], 8, q8_0),
    ]
    (GGUF_DIR / "crafted_valid_types.gguf").write_bytes(gguf_file(kvs, tensors))
    (GGUF_DIR / "crafted_no_tensors.gguf").write_bytes(
        gguf_file([gguf_kv("general.architecture", 8, gguf_string("gpt2"))], []))


def safetensors_file(header: dict, data: bytes) -> bytes:
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def crafted_safetensors():
    f32 = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    files = {
        "f32_2x2.safetensors": safetensors_file(
            {"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, f32),
        "mixed_with_metadata.safetensors": safetensors_file(
            {
                "__metadata__": {"format": "pt"},
                "a.weight": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]},
                "b.bias": {"dtype": "F16", "shape": [1, 1], "data_offsets": [6, 8]},
                "c": {"dtype": "I64", "shape": [], "data_offsets": [8, 16]},
                "d": {"dtype": "U8", "shape": [0, 5], "data_offsets": [16, 16]},
                "e": {"dtype": "F4", "shape": [4], "data_offsets": [16, 18]},
            },
            bytes(range(18)),
        ),
        "empty.safetensors": safetensors_file({}, b""),
        "metadata_only.safetensors": safetensors_file({"__metadata__": {"k": "v"}}, b""),
        # Invalid on purpose: offsets that do not match the shape, and a data section
        # shorter than the header describes.
        "bad_offsets.safetensors": safetensors_file(
            {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}, f32),
        "truncated_data.safetensors": safetensors_file(
            {"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, f32[:9]),
    }
    for name, data in files.items():
        (ST_DIR / name).write_bytes(data)


def serve_requests():
    """Bodies of each endpoint, prefixed with the byte that picks it (0 completions, 1 chat,
    2 tokenize, 3 detokenize; 0xF3 also runs the Host/Origin policy on the body's lines)."""
    completions = [
        {"prompt": "Hello", "max_tokens": 8},
        {"prompt": ["Hello"], "max_tokens": 4, "temperature": 0.7, "top_p": 0.9, "top_k": 40,
         "min_p": 0.05, "seed": 1, "stop": ["\n", "."], "logprobs": 3, "stream": True,
         "stream_options": {"include_usage": True}},
        {"prompt": [2, 9259, 1902], "logit_bias": {"1": -100, "106": 100}, "n": 1,
         "presence_penalty": 0.5, "frequency_penalty": -0.5, "user": "u", "model": "m"},
        {"prompt": [[2, 9259]], "max_tokens": 4095},
    ]
    chat = [
        {"messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 8},
        {"messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                      {"role": "assistant", "content": "Hello"}],
         "logprobs": True, "top_logprobs": 2, "stream": True},
        {"messages": [{"role": "developer", "content": "<start_of_turn>x"}], "max_tokens": 1,
         "max_completion_tokens": 1},
    ]
    tokenize = [{"content": "Hello world", "add_special": False, "parse_special": True}]
    detokenize = [{"tokens": [2, 9259, 1902]}]
    seeds = []
    for selector, bodies in ((0, completions), (1, chat), (2, tokenize), (3, detokenize)):
        seeds += [bytes([selector]) + json.dumps(b).encode() for b in bodies]
    seeds.append(b"\xf3localhost:8080\nhttps://app.example.com")
    seeds.append(b"\xf3[::1]:8080\nnull")
    for i, seed in enumerate(seeds):
        (SERVE_DIR / f"seed_{i:02}").write_bytes(seed)


if __name__ == "__main__":
    SERVE_DIR.mkdir(parents=True, exist_ok=True)
    GGUF_DIR.mkdir(parents=True, exist_ok=True)
    ST_DIR.mkdir(parents=True, exist_ok=True)
    crafted_gguf()
    crafted_safetensors()
    serve_requests()
