"""pod-console: the terminal operations console for vLLM on rented GPU pods."""

__version__ = "0.1.0"
