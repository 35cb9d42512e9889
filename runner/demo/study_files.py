"""The demo's study files, filled in from the templates in ``runner/demo/studies/``.

A template is a complete study with placeholders (``@TEXT_COUNT@``,
``@CORPUS_FINGERPRINT@``, ``@TUNING_FINGERPRINT@``, ``@MODEL_FINGERPRINT@``,
``@MINIMUM@``, and ``@STACK@`` in the GPU template) replaced by plain string
replacement. Besides one study per corpus, the builder writes the quick study
once more per GPU stack (only stack and device change) and, when the
1,000-text corpus is built, the GPU study for each GPU stack.

Example::

    from runner.demo.study_files import render_study

    text = render_study("quick", text_count=300, corpus_fingerprint="sha256:…", tuning_fingerprint="sha256:…",
                        model_fingerprint="sha256:…", minimum="0.87")
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path, sha256_file
from protocol.io.jsonio import write_text_atomic

STUDY_TEMPLATES = Path(__file__).resolve().parent / "studies"
#: The quick demo study is also written for these stacks (ROCm's torch uses the "cuda" device name).
GPU_STACKS = ("cuda", "rocm")
#: The GPU demo study (``gpu-cuda.toml``, ``gpu-rocm.toml``): the 1,000-text corpus, batches up to 256,
#: fp32/fp16/bf16, a length-sorted pass. Written when the classify-1000 corpus is built.
GPU_STUDY, GPU_CORPUS = "gpu", "classify-1000"
_PLACEHOLDER = re.compile(r"@[A-Z_]+@")
_CPU_LINES = 'stack = "cpu"\ndevice = "cpu"'


def _known_templates() -> str:
    return ", ".join(sorted(p.stem for p in STUDY_TEMPLATES.glob("*.toml")))


def require_templates(names: Iterable[str]) -> None:
    """Refuse study names that have no template, naming the ones that exist."""
    missing = sorted(name for name in names if not (STUDY_TEMPLATES / f"{name}.toml").is_file())
    if missing:
        raise UserError(
            f"no demo study template for {', '.join(missing)}",
            str(STUDY_TEMPLATES),
            f"Use one of: {_known_templates()}.",
        )


def template_hashes(names: Iterable[str]) -> dict[str, str]:
    """sha256 of every template the build of ``names`` uses (the GPU one with the 1,000-text corpus)."""
    chosen = set(names)
    used = sorted({*chosen, *([GPU_STUDY] if GPU_CORPUS in chosen else [])})
    return {name: sha256_file(STUDY_TEMPLATES / f"{name}.toml") for name in used}


def render_study(
    name: str,
    *,
    text_count: int,
    corpus_fingerprint: str,
    tuning_fingerprint: str,
    model_fingerprint: str,
    minimum: str,
    stack: str = "",
) -> str:
    """Fill ``runner/demo/studies/<name>.toml`` by plain string replacement (``@STACK@``: GPU template only)."""
    template = STUDY_TEMPLATES / f"{name}.toml"
    if not template.is_file():
        raise UserError(f"no demo study template for {name!r}", str(template), f"Use one of: {_known_templates()}.")
    return fill_placeholders(template.read_text(encoding="utf-8"), {
        "@TEXT_COUNT@": str(text_count),
        "@CORPUS_FINGERPRINT@": corpus_fingerprint,
        "@TUNING_FINGERPRINT@": tuning_fingerprint,
        "@MODEL_FINGERPRINT@": model_fingerprint,
        "@MINIMUM@": minimum,
        **({"@STACK@": stack} if stack else {}),
    }, str(template))


def fill_placeholders(text: str, values: Mapping[str, str], where: str) -> str:
    """``text`` with each ``@NAME@`` of ``values`` replaced; one left unfilled is a bug in the template (named)."""
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    left = sorted(set(_PLACEHOLDER.findall(text)))
    if left:
        raise RuntimeError(f"unfilled placeholders in {where}: {', '.join(left)}")
    return text


def write_studies(
    out_dir: Path, text_counts: Mapping[str, int], inputs: Mapping[str, str], minimum: str
) -> dict[str, str]:
    """Write every study file of the build into ``out_dir``; file name -> fingerprint.

    ``text_counts`` maps each corpus (study) name to its number of texts; ``inputs`` holds the fingerprints of
    ``corpus-<name>.jsonl``, ``tuning.jsonl`` and ``model``.
    """
    written: dict[str, str] = {}

    def write(file_name: str, text: str) -> None:
        write_text_atomic(out_dir / file_name, text)
        written[file_name] = fingerprint_path(out_dir / file_name)

    def render(name: str, corpus: str, stack: str = "") -> str:
        return render_study(
            name,
            text_count=text_counts[corpus],
            corpus_fingerprint=inputs[f"corpus-{corpus}.jsonl"],
            tuning_fingerprint=inputs["tuning.jsonl"],
            model_fingerprint=inputs["model"],
            minimum=minimum,
            stack=stack,
        )

    for name in sorted(text_counts):
        study = render(name, name)
        write(f"{name}.toml", study)
        # The same study on a GPU stack (make run-cuda / run-rocm): only stack and device change.
        for stack in GPU_STACKS if name == "quick" else ():
            write(f"{name}-{stack}.toml", study.replace(_CPU_LINES, f'stack = "{stack}"\ndevice = "cuda"'))
    for stack in GPU_STACKS if GPU_CORPUS in text_counts else ():
        write(f"{GPU_STUDY}-{stack}.toml", render(GPU_STUDY, GPU_CORPUS, stack))
    return written
