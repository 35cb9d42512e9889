"""A slice of the demo study in a temporary workspace, so `make bench` fits in 15 minutes.

The slice keeps the demo's model, tuning split, warm-up rule, variants and quality rule; only
the corpus is cut (every k-th input, so the short/medium/long mix is kept) and the number of
repetitions is set. Files are copied world-readable, so a trial container's non-root user can
read them through its read-only mounts.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from protocol.io.fingerprint import fingerprint_path
from protocol.records.stages import TrialSpec, Variant
from protocol.study.load import load_study
from protocol.study.model import Study

DEMO_DIR_ENV = "ISOCOST_DEMO_DIR"


@dataclass(frozen=True)
class Workspace:
    root: Path
    study_path: Path
    inputs: int
    source_inputs: int
    repetitions: int
    threads: int | None = None

    def study(self) -> Study:
        return load_study(self.study_path)

    def describe(self) -> str:
        every = self.source_inputs // self.inputs
        shown = "all" if every == 1 else f"every {every}th of"
        threads = f", threads={self.threads} (the demo's: 2)" if self.threads is not None else ""
        return (f"demo 'quick' slice: {self.inputs} inputs ({shown} {self.source_inputs}), "
                f"{self.repetitions} repetition(s) per variant{threads}")


def demo_dir() -> Path:
    return Path(os.environ.get(DEMO_DIR_ENV) or Path(__file__).resolve().parents[1] / ".isocost-demo")


def _set_table_key(text: str, table: str, key: str, value: str) -> str:
    """Replace ``key = …`` inside ``[table]`` of a TOML text (the demo study's simple layout)."""
    pattern = re.compile(rf"(^\[{re.escape(table)}\]\n(?:(?!^\[).*\n)*?){re.escape(key)} = [^\n]*", re.M)
    new, count = pattern.subn(lambda m: f"{m.group(1)}{key} = {value}", text, count=1)
    if count != 1:
        raise ValueError(f"[{table}] {key} not found in the demo study")
    return new


def make_workspace(root: Path, inputs: int, repetitions: int, source: Path | None = None,
                   threads: int | None = None, trial_timeout_s: int | None = None) -> Workspace:
    """Copy a slice of the demo study under ``root`` and return it (its study file is loadable).

    ``threads`` overrides the study's ``[base] threads``, ``trial_timeout_s`` its ``[campaign]
    trial_timeout_s`` (None keeps the demo's).
    """
    source = source or demo_dir()
    study_file = source / "quick.toml"
    if not study_file.exists():
        raise FileNotFoundError(f"{study_file} not found: run `make demo` (isocost demo prepare) first")
    demo = load_study(study_file)
    lines = [line for line in demo.corpus.path.read_text(encoding="utf-8").splitlines() if line.strip()]
    step = max(len(lines) // inputs, 1)
    kept = lines[::step][:inputs]
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    corpus = root / "corpus-slice.jsonl"
    corpus.write_text("\n".join(kept) + "\n", encoding="utf-8")
    shutil.copyfile(demo.tuning.path, root / "tuning.jsonl")
    shutil.copytree(demo.model.path, root / "model", dirs_exist_ok=True)
    for path in [corpus, root / "tuning.jsonl", root / "model", *(root / "model").rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    text = study_file.read_text(encoding="utf-8")
    text = _set_table_key(text, "corpus", "path", '"corpus-slice.jsonl"')
    text = _set_table_key(text, "corpus", "fingerprint", f'"{fingerprint_path(corpus)}"')
    text = _set_table_key(text, "tuning", "path", '"tuning.jsonl"')
    text = _set_table_key(text, "model", "path", '"model"')
    text = _set_table_key(text, "campaign", "repetitions", str(repetitions))
    if threads is not None:
        text = _set_table_key(text, "base", "threads", str(threads))
    if trial_timeout_s is not None:
        text = _set_table_key(text, "campaign", "trial_timeout_s", str(trial_timeout_s))
    text = re.sub(r"^name = .*$", 'name = "bench-slice"', text, count=1, flags=re.M)
    study_path = root / "study.toml"
    study_path.write_text(text, encoding="utf-8")
    load_study(study_path)  # fails loudly if the slice is not a valid study
    return Workspace(root=root, study_path=study_path, inputs=len(kept), source_inputs=len(lines),
                     repetitions=repetitions, threads=threads)


def trial_spec(study: Study, variant: Variant, trial_id: str) -> TrialSpec:
    """The spec a process-launched campaign would hand this variant (see runner.campaign.run._spec)."""
    from protocol.corpus import read_corpus

    tuning = read_corpus(study.tuning.path)
    return TrialSpec(
        trial_id=trial_id,
        campaign_id="bench",
        study_sha256=study.sha256,
        variant=variant,
        repetition=1,
        order_index=1,
        attempt=1,
        corpus_path=str(study.corpus.path),
        corpus_fingerprint=study.corpus.fingerprint,
        model_path=str(study.model.path),
        model_fingerprint=study.model.fingerprint,
        warmup=study.warmup,
        warmup_texts=tuple(r.text for r in tuning[: study.warmup.inputs]),
        launcher="process",
        timeout_s=study.campaign.trial_timeout_s,
    )
