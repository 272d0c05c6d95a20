"""FAKE torch for the hf_oracle.py tests (this machine has no torch): the few names hf_oracle.py
uses, over numpy. Not a torch: it exists so the protocol layer can be tested end to end."""
import contextlib

import numpy as np

__version__ = "0.0-FAKE"
long, float32, float64 = np.int64, np.float32, np.float64


class Tensor(np.ndarray):
    def to(self, dtype):
        return self.astype(dtype).view(Tensor)

    def cpu(self):
        return self

    def numpy(self):
        return np.asarray(self)


def tensor(values, dtype=None):
    return np.asarray(values, dtype=dtype).view(Tensor)


def no_grad():
    return contextlib.nullcontext()
