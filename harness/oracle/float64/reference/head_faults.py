"""FAULTs of the output head, which every family can carry: they keep the argmax on most positions and
move the distribution — what the distribution gates exist for (a reference arm held to its goldens'
distribution must fail with one)."""

HEAD_SCALE = {"output-head-x0.5": 0.5, "output-head-x1.01": 1.01}


def scaled_head(output, faults):
    """The output projection as a head FAULT leaves it: its weights scaled, so the logits are (before any softcap)."""
    scale = next((HEAD_SCALE[f] for f in faults if f in HEAD_SCALE), 1.0)
    return output if scale == 1.0 else output * scale
