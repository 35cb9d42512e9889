"""The demo's three parts, and which part writes which demo study: a first ``make run`` builds only the part its
study needs.

``classification`` (the BBC corpora, the tuning split, the MiniLM classifier: ``quick``, ``classify-1000``, their
``-cuda``/``-rocm`` copies and ``gpu-cuda``/``gpu-rocm``), ``embedding`` (``embed``: the MiniLM encoder over
article bodies) and ``generation`` (``generate`` and ``generate-gpu-cuda``/``-rocm``: SmolLM2 converted from its
wheel, then tuned, the slowest part to build). The engine studies are written by the part of the study they
derive from (:mod:`runner.demo.engines`): ``engines`` by classification, ``engines-generate`` by generation. Each
part records its own build (``demo.json``, ``embedding.json``, ``generation.json``) and is reused while that record
holds.

Example::

    part_of("quick")             # 'classification'
    part_of("generate-gpu-cuda") # 'generation'
"""

from __future__ import annotations

from protocol.errors import UserError

DEMO_PARTS = ("classification", "embedding", "generation")

#: Each demo study file (without ``.toml``) and the part that writes it.
STUDY_PARTS: dict[str, str] = {
    **{name: "classification" for name in (
        "quick", "classify-1000", "quick-cuda", "quick-rocm", "gpu-cuda", "gpu-rocm", "engines", "serve",
        "serve-gpu")},
    "embed": "embedding",
    **{name: "generation" for name in ("generate", "generate-gpu-cuda", "generate-gpu-rocm", "engines-generate")},
}


def part_of(study: str) -> str:
    """The part of the demo that writes ``study`` (a name, with or without ``.toml``)."""
    name = study.removesuffix(".toml")
    if name not in STUDY_PARTS:
        raise UserError(f"no demo study {name[:80]!r}", "isocost demo prepare --study",
                        f"Name one of: {', '.join(STUDY_PARTS)}.")
    return STUDY_PARTS[name]
