"""The demo studies derived from a built one: the engine studies (the same demo corpus, model and rule, run by more
than one engine) and the serving study (the classification demo under requests).

``engines.toml`` compares plain transformers with ONNX Runtime on the classification demo (the quick study's 300
texts, its classifier and quality minimum); ``engines-generate.toml`` compares transformers with vLLM on the
text-generation demo (the generate study's stories, SmolLM2 and its tuned rule), in fp32, with vLLM in bf16 beside
them. ``serve.toml`` serves the quick study's classifier under MLPerf LoadGen's Server scenario at three rates, batch 1
against batch 8 behind the dynamic batcher, with a p99 latency bound (docs/serving.md); ``serve-gpu.toml`` serves
the same classifier on a CUDA card (batches 1, 8 and 32 in fp32, batch 8 in fp16, at 200 to 3,200 queries per
second, p99 within 50 ms: written for a real card, never run here). Each is written from its
template in ``runner/demo/studies/derived/`` once the demo study it derives from has
been built (or reused) by its part (:mod:`runner.demo.parts`), its fingerprints and rule read from that study, so
the engine study always matches the inputs on disk. A vLLM study is written even where ``.venv-vllm`` is missing:
``isocost run`` refuses it before anything runs, naming ``make vllm``.

Example::

    write_engine_study(Path(".isocost-demo"), "engines")   # .isocost-demo/engines.toml, from quick.toml
"""

from __future__ import annotations

from pathlib import Path

from protocol.errors import UserError
from protocol.io.jsonio import write_text_atomic
from runner.demo.study_files import fill_placeholders

TEMPLATES = Path(__file__).resolve().parent / "studies" / "derived"
#: Each engine study and the built demo study whose corpus, tuning split, model and rule it takes.
ENGINE_STUDIES: dict[str, str] = {"engines": "quick", "engines-generate": "generate"}
#: Every derived study (the engine studies and the serving one) and the built study it derives from.
DERIVED_STUDIES: dict[str, str] = {**ENGINE_STUDIES, "serve": "quick", "serve-gpu": "quick"}
#: The least time limit per trial of an engine study (seconds): a loaded machine's vLLM start-up fits in it.
MIN_TRIAL_TIMEOUT_S = 900


def write_engine_study(out_dir: Path, name: str) -> Path:
    """Write ``out_dir/<name>.toml`` from its template and the built study it derives from; returns its path."""
    from protocol.study.load import load_study

    base_path = Path(out_dir) / f"{DERIVED_STUDIES[name]}.toml"
    if not base_path.is_file():
        raise UserError(f"the demo study {base_path.name} that {name}.toml derives from is not built",
                        str(base_path), f"Run `isocost demo prepare --study {DERIVED_STUDIES[name]}` first.")
    base = load_study(base_path)
    corpus_lines = base.corpus.path.read_text(encoding="utf-8").splitlines()
    values = {
        "@TEXT_COUNT@": str(sum(1 for line in corpus_lines if line.strip())),
        "@CORPUS_FINGERPRINT@": base.corpus.fingerprint,
        "@TUNING_FINGERPRINT@": base.tuning.fingerprint,
        "@MODEL_FINGERPRINT@": base.model.fingerprint,
        "@MINIMUM@": repr(base.quality.minimum),
        "@MAX_METRIC_DROP@": repr(base.quality.max_metric_drop),
        "@MIN_AGREEMENT@": repr(base.quality.min_agreement),
        # vLLM's engine start-up (35-55 s on 2 cores) is load time inside the trial's limit: never below the floor.
        "@TRIAL_TIMEOUT_S@": str(int(max(base.campaign.trial_timeout_s or 0, MIN_TRIAL_TIMEOUT_S))),
    }
    text = fill_placeholders((TEMPLATES / f"{name}.toml").read_text(encoding="utf-8"), values, f"{name}.toml")
    path = Path(out_dir) / f"{name}.toml"
    write_text_atomic(path, text)
    load_study(path)  # a template that no longer parses fails here, at build time, not at run time
    return path


def engine_studies_of(built: tuple[str, ...]) -> tuple[str, ...]:
    """The derived studies (engine and serving) whose base study is among ``built`` (names without ``.toml``)."""
    return tuple(name for name, base in DERIVED_STUDIES.items() if base in built)
