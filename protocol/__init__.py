"""The rules and records of isocost, shared by the host and the trial container.

Nothing here imports torch, transformers, docker or click.
"""

__version__ = "1.1.0"
