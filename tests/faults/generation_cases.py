"""Fault cases of the text-generation task (issue 23), with the real SmolLM2 checkpoint.

A trial killed mid-generation (SIGKILL, between batches) keeps the ids it completed: every line of its
``generations.jsonl`` is whole and names a corpus id in order, its row says ``interrupted`` with the completed
count, and no row is lost. The checkpoint is converted once per machine (``tests/generation_workspace.py``).

Example: ``GENERATION_CASES["killed-mid-generation"](process_context(root, model))``.
"""

from __future__ import annotations

import json

from cases import Context, Outcome, _first_row, rows_lost, run_killing_first_trial  # noqa: I001 (tests/faults on the path)
from generation_workspace import smollm2_checkpoint, write_generation_workspace


def case_killed_mid_generation(ctx: Context) -> Outcome:
    study = write_generation_workspace(ctx.root / "gen", smollm2_checkpoint(), n=5, batches="[1]", max_new_tokens=3)
    for path in [study.parent, *study.parent.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    out = ctx.root / "out"
    outputs = out / "trials" / "001-r1-batch_size-1" / "generations.jsonl"
    run_killing_first_trial(ctx, study, out, outputs.name, lines=2, sleep_s=1.0, wait_s=600)
    row = _first_row(out)
    text = outputs.read_text() if outputs.exists() else ""
    kept = [json.loads(line)["id"] for line in text[: text.rfind("\n") + 1].splitlines()]  # whole lines
    ok = (row["status"] == "interrupted" and row["corpus_accepted"] == "false" and int(row["completed"]) >= 2
          and kept == [f"c{i}" for i in range(len(kept))] and len(kept) == int(row["completed"]))
    return Outcome("trial killed mid-generation (SIGKILL)", ctx.launcher_name,
                   "interrupted, completed ids kept whole in generations.jsonl",
                   f"{row['status']}, completed {row['completed']}, {len(kept)} whole lines", rows_lost(out), ok,
                   row["notes"][:120])


GENERATION_CASES = {"killed-mid-generation": case_killed_mid_generation}
