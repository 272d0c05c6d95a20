"""Independent float64 forward passes, one module per llama.cpp architecture (reference_forward.py serves them)."""
