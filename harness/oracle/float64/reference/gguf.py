"""Metadata and tensors of a GGUF v3 file, as numpy float64 arrays (F32 and F16 tensors only)."""
import struct

import numpy as np

GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGUF_STRING, GGUF_ARRAY = 8, 9
GGML_FLOAT_TYPES = {0: np.dtype("<f4"), 1: np.dtype("<f2")}
REQUIRED = object()


class GgufError(Exception):
    """A file this reader cannot take; the message names the file and what to do."""


class GgufFile:
    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.data = f.read()
        if self.data[:4] != b"GGUF":
            raise GgufError(f"{path}: not a GGUF file")
        self.pos = 4
        version, n_tensors, n_kv = self.read("<I"), self.read("<Q"), self.read("<Q")
        if version != 3:
            raise GgufError(f"{path}: GGUF version {version}; this reader reads version 3")
        self.metadata = {}
        for _ in range(n_kv):
            key = self.string()
            self.metadata[key] = self.value(self.read("<I"))
        self.infos = {}
        for _ in range(n_tensors):
            name, n_dims = self.string(), self.read("<I")
            dims = [self.read("<Q") for _ in range(n_dims)]
            self.infos[name] = (dims, self.read("<I"), self.read("<Q"))
        alignment = self.metadata.get("general.alignment", 32)
        self.start = (self.pos + alignment - 1) // alignment * alignment
        self.architecture = self.metadata.get("general.architecture")

    def read(self, fmt):
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self):
        length = self.read("<Q")
        text = self.data[self.pos:self.pos + length].decode("utf-8")
        self.pos += length
        return text

    def value(self, kind):
        if kind == GGUF_STRING:
            return self.string()
        if kind == GGUF_ARRAY:
            item_kind, count = self.read("<I"), self.read("<Q")
            return [self.value(item_kind) for _ in range(count)]
        return self.read(GGUF_SCALARS[kind])

    # --- metadata of the model's architecture ----------------------------------------------------
    def key(self, name, default=REQUIRED):
        """`{arch}.name`, or `default` (a missing key without a default is an error)."""
        full = f"{self.architecture}.{name}"
        if full in self.metadata:
            return self.metadata[full]
        if default is REQUIRED:
            raise GgufError(f"{self.path}: metadata key {full} is missing")
        return default

    def per_layer(self, name, n_layer, default=REQUIRED):
        """A key that is either one value for every layer or an array with one value per layer."""
        value = self.key(name, default)
        if isinstance(value, list):
            if len(value) < n_layer:
                raise GgufError(f"{self.path}: {self.architecture}.{name} has {len(value)} values for {n_layer} layers")
            return list(value[:n_layer])
        return [value] * n_layer

    # --- tensors ------------------------------------------------------------------------------------
    def has(self, name):
        return name in self.infos

    def tensor(self, name):
        """The tensor as float64, numpy axes in reverse ggml order: a ggml [inputs, outputs] matrix is (outputs, inputs)."""
        if name not in self.infos:
            raise GgufError(f"{self.path}: tensor {name} is missing")
        dims, kind, offset = self.infos[name]
        if kind not in GGML_FLOAT_TYPES:
            raise GgufError(f"{self.path}: tensor {name} is ggml type {kind}; the reference reads F32/F16 models (use the :F32 fixture)")
        dtype = GGML_FLOAT_TYPES[kind]
        count = int(np.prod(dims))
        begin = self.start + offset
        values = np.frombuffer(self.data, dtype=dtype, count=count, offset=begin)
        return values.astype(np.float64).reshape(tuple(reversed(dims)))

    def optional(self, name):
        return self.tensor(name) if self.has(name) else None

    def block_tensors(self, il):
        """Lookups (required, optional) of block il's tensors by their name inside the block."""
        prefix = f"blk.{il}."
        return (lambda name: self.tensor(prefix + name)), (lambda name: self.optional(prefix + name))

    def output_projection(self, embedding):
        """output.weight, or the token embedding when the model ties the two (no output.weight)."""
        output = self.optional("output.weight")
        return embedding if output is None else output
