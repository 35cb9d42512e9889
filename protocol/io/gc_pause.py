"""Reading many rows at once: no cyclic garbage collection while they are made (reference counting still frees)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (it resumes after, if it ran before). A reader of 100,000 rows
    makes hundreds of thousands of objects, none of them in a cycle: left on, the collector walks all of them
    again and again, which takes as long as the reading itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


