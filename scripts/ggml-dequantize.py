#!/usr/bin/env python3
"""Decode ggml blocks with llama.cpp's own dequantize_row_* (from libggml-base.so via ctypes).

Usage: ggml-dequantize.py LIBGGML_BASE TYPE < blocks > float32s
The harness's tests use it to prove our decoders bit-exact against ggml itself.
"""
import ctypes
import sys

BLOCK = {"Q8_0": (32, 34), "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210)}

def main() -> None:
    library, type_name = sys.argv[1], sys.argv[2]
    elements, block_bytes = BLOCK[type_name]
    data = sys.stdin.buffer.read()
    if len(data) % block_bytes:
        sys.exit(f"{type_name}: {len(data)} bytes is not a whole number of {block_bytes}-byte blocks")
    count = len(data) // block_bytes * elements
    ggml = ctypes.CDLL(library)
    decode = getattr(ggml, "dequantize_row_" + type_name[0].lower() + type_name[1:])
    decode.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    source = ctypes.create_string_buffer(data, len(data))
    target = (ctypes.c_float * count)()
    decode(source, target, count)
    sys.stdout.buffer.write(bytes(target))

main()
