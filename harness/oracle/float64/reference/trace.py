"""A decode step as an operation list over fixed buffers, the way a device runs a traced decode graph:
captured on the first decode step of a traced request batch (each operation runs once and gets a buffer
for its output), then replayed for every later step of the batch (each operation rewrites its buffer
in place). Eager runs the same operations at once, allocating as it goes, so the two paths share one
description of the forward and differ only in how it is executed.

An operation reads the step's token and request state through `StepInputs`, never as constants: a
replay sees the current token, position and KV cache, as a device trace reads them from tensors it
does not own. Its demand is the bytes its replay buffers hold (weights and the KV cache are not part
of a capture)."""
import numpy as np


class StepInputs:
    """What changes from one decode step to the next: the token fed and the request's state."""

    def __init__(self, token, state):
        self.token = token
        self.state = state


class Eager:
    """Runs each operation as it is named."""

    def op(self, name, fn, *args):
        return fn(*args)


class Capture:
    """Runs each operation once, keeping it and a buffer for its output; `replay` reruns the list.
    `frozen` names operations a planted FAULT bakes into the capture: replay skips them, so their
    buffers keep the values of the step that was captured."""

    def __init__(self, frozen=()):
        self.ops = []
        self.frozen = set(frozen)

    def op(self, name, fn, *args):
        value = fn(*args)
        out = None if value is None else np.array(value, copy=True)
        self.ops.append((name, fn, args, out))
        return out

    def replay(self):
        for name, fn, args, out in self.ops:
            if name in self.frozen:
                continue
            value = fn(*args)
            if out is not None:
                out[...] = value

    def demand_bytes(self):
        return sum(out.nbytes for _, _, _, out in self.ops if out is not None)
