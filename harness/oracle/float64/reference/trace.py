"""A decode step as an operation list over fixed buffers, the way a device runs a traced decode graph:
captured on the first decode step of a traced request batch (each operation runs once and gets a buffer
for its output), then replayed for every later step of the batch (each operation rewrites its buffer
in place). Eager runs the same operations at once, allocating as it goes, so the two paths share one
description of the forward and differ only in how it is executed.

An operation reads the step's token and request state through `StepInputs`, never as constants: a
replay sees the current token, position and KV cache, as a device trace reads them from tensors it
does not own. Its demand is the bytes its replay buffers hold (weights and the KV cache are not part
of a capture).

Three capture faults of a real bring-up are planted here (runner.py FAULTS): a weight decoded per call
inside the captured graph (`decode_weights`: every weight an operation reads gets a decoded copy, a
new capture buffer per weight chain), expert ids read back to the host inside the captured step
(`host_read`: the ids become constants of the capture) and, in the families, a state array bound at
capture instead of read through `inputs`."""
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
    buffers keep the values of the step that was captured. `decode_weights` is the FAULT of a weight
    decoded per call: each weight an operation reads (an array of two or more dimensions that no
    operation of the capture wrote) is copied into a buffer of the capture, and re-decoded on replay."""

    def __init__(self, frozen=(), decode_weights=False):
        self.ops = []
        self.frozen = set(frozen)
        self.decode_weights = decode_weights
        self.owned = set()

    def op(self, name, fn, *args):
        decoded = []
        if self.decode_weights:
            args = tuple(self.decoded(a, decoded) for a in args)
        value = fn(*args)
        out = None if value is None else np.array(value, copy=True)
        if out is not None:
            self.owned.add(id(out))
        self.ops.append((name, fn, args, out, decoded))
        return out

    def decoded(self, arg, decoded):
        """A weight's decoded copy (kept in `decoded` with its source); any other argument as it is."""
        if not (isinstance(arg, np.ndarray) and arg.ndim >= 2 and id(arg) not in self.owned):
            return arg
        copy = np.array(arg, copy=True)
        decoded.append((arg, copy))
        return copy

    def replay(self):
        for name, fn, args, out, decoded in self.ops:
            if name in self.frozen:
                continue
            for source, copy in decoded:
                copy[...] = source
            value = fn(*args)
            if out is not None:
                out[...] = value

    def demand_bytes(self):
        return sum((0 if out is None else out.nbytes) + sum(copy.nbytes for _, copy in decoded) for _, _, _, out, decoded in self.ops)


def host_read(ids, faults):
    """Expert ids as the expert operation reads them: the routing operation's buffer, or under FAULT
    trace-routing-on-host a host list read from it while the step is captured, so a replay dispatches
    the captured step's experts whatever the router chose since."""
    return [int(e) for e in ids] if "trace-routing-on-host" in faults else ids
