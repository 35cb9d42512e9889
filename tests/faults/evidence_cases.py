"""Fault cases for evidence edited after the campaign, and for links planted where isocost writes (issue 20).

Each case runs one real small campaign (real model, trials as processes), edits one file the way a hostile
user would, and runs every reading command through the CLI: each must refuse with one ``Error:`` line that
names the edited file (exit 2); the link cases check that nothing outside the campaign was written. The
campaign is never harmed: rows lost is attempts made minus rows kept, as for every fault case.

Example: ``EVIDENCE_CASES["edited-predictions"](process_context(root, model))``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from cases import Context, Outcome, rows_lost  # noqa: I001 (tests/faults on the path)
from click.testing import CliRunner

from protocol.records.stages import Rental
from runner.campaign.run import run_campaign
from runner.cli import main

READERS = ("validate", "summarize", "decide", "period", "bundle")
OUTSIDE_TEXT = "root:x:0:0:root:/root:/bin/bash\n"


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=True)
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    return (99 if crashed else result.exit_code), result.output


def _campaign(ctx: Context) -> Path:
    study = ctx.study(n=4, repetitions=1, batches="[1]")  # one trial: each case edits its files
    out = ctx.root / "out"
    run_campaign(study, out, ctx.launcher_factory(), rental=Rental("rtx-4090", 1))
    code, output = _cli("rental", str(out), "--gpu", "rtx-4090", "--lots", "2")
    if code != 0:
        raise AssertionError(output)
    return out


def _readers_refuse(out: Path, name: str) -> tuple[bool, str]:
    """Every reading command exits 2 with one Error: line naming ``name``; the commands that did not, said."""
    failed = []
    first = ""
    for command in READERS:
        argv = [command, str(out)] + (["-o", str(out.parent / "b.tar.gz")] if command == "bundle" else [])
        code, output = _cli(*argv)
        errors = [line for line in output.splitlines() if line.startswith("Error: ")]
        if code != 2 or len(errors) != 1 or name not in errors[0]:
            failed.append(f"{command} exit {code}")
        first = first or (errors[0] if errors else "")
    return not failed, ("; ".join(failed) or first)[:160]


def _edited(label: str, name: str, edit: Callable[[Path], None]) -> Callable[[Context], Outcome]:
    def run(ctx: Context) -> Outcome:
        out = _campaign(ctx)
        edit(out)
        ok, detail = _readers_refuse(out, name)
        return Outcome(label, ctx.launcher_name, f"{', '.join(READERS)} refuse, naming {name}",
                       "refused by all five" if ok else f"accepted: {detail[:60]}", rows_lost(out), ok, detail)

    return run


def _first_trial(out: Path) -> Path:
    return sorted((out / "trials").iterdir())[0]


def _catalog_price(out: Path) -> None:
    path = out / "catalog.csv"
    path.write_text(path.read_text(encoding="utf-8").replace("110.00", "1.10"), encoding="utf-8")


def _setup_time(out: Path) -> None:
    path = _first_trial(out) / "status.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["phases"]["load_s"] = (data["phases"].get("load_s") or 0.0) + 300_000.0
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _three_labels(out: Path) -> None:
    path = _first_trial(out) / "predictions.jsonl"
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    labels = sorted({line["label"] for line in lines})
    for line in lines[:3]:
        line["label"] = next(label for label in labels if label != line["label"])
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def _manifest(out: Path) -> None:
    path = _first_trial(out) / "manifest.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["host"] = {**data.get("host", {}), "memory_total_bytes": 1}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _last_event(out: Path) -> None:
    path = out / "events.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    last["trial_id"] = "edited"  # a field no time check reads
    lines[-1] = json.dumps(last, sort_keys=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _rental_lots(out: Path) -> None:
    path = out / "rentals.jsonl"
    path.write_text(path.read_text(encoding="utf-8").replace('"lots": 2', '"lots": 1'), encoding="utf-8")


def _cut_rental(out: Path) -> None:
    with open(out / "rentals.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"gpu": "b200", "lo')


def case_link_rentals(ctx: Context) -> Outcome:
    """Defect 1: `isocost rental` appended through a symlinked rentals.jsonl to a system file."""
    out = _campaign(ctx)
    outside = ctx.root / "etc-passwd"
    outside.write_text(OUTSIDE_TEXT, encoding="utf-8")
    (out / "rentals.jsonl").unlink()
    (out / "rentals.jsonl").symlink_to(outside)
    code, output = _cli("rental", str(out), "--gpu", "rtx-4090", "--lots", "1")
    untouched = outside.read_text(encoding="utf-8") == OUTSIDE_TEXT
    ok = code == 2 and "symbolic link" in output and untouched
    return Outcome("rentals.jsonl is a link to a system file", ctx.launcher_name,
                   "`isocost rental` refused, the linked file untouched",
                   "refused, untouched" if ok else f"exit {code}, untouched={untouched}", rows_lost(out), ok,
                   output.strip().splitlines()[-1][:160] if output.strip() else "")


def case_link_events_resume(ctx: Context) -> Outcome:
    """`run --resume` would append a resume event through a symlinked events.jsonl."""
    out = _campaign(ctx)
    outside = ctx.root / "etc-passwd"
    outside.write_text(OUTSIDE_TEXT, encoding="utf-8")
    (out / "events.jsonl").unlink()
    (out / "events.jsonl").symlink_to(outside)
    study = ctx.root / "ws" / "study.toml"
    code, output = _cli("run", str(study), "--out", str(out), "--resume", *ctx.cli_launcher_args())
    untouched = outside.read_text(encoding="utf-8") == OUTSIDE_TEXT
    ok = code == 2 and "symbolic link" in output and untouched
    return Outcome("events.jsonl is a link, then --resume", ctx.launcher_name,
                   "--resume refused, the linked file untouched",
                   "refused, untouched" if ok else f"exit {code}, untouched={untouched}", rows_lost(out), ok,
                   output.strip().splitlines()[-1][:160] if output.strip() else "")


EVIDENCE_CASES: dict[str, Callable[[Context], Outcome]] = {
    "edited-catalog-price": _edited("catalog.csv price 110.00 → 1.10", "catalog.csv", _catalog_price),
    "deleted-catalog": _edited("catalog.csv deleted", "catalog.csv", lambda out: (out / "catalog.csv").unlink()),
    "edited-status-setup": _edited("status.json: +300,000 s of set-up", "status.json", _setup_time),
    "edited-predictions": _edited("predictions.jsonl: 3 labels changed", "predictions.jsonl", _three_labels),
    "edited-manifest": _edited("manifest.json: host memory changed", "manifest.json", _manifest),
    "edited-event": _edited("events.jsonl: last event edited", "events.jsonl", _last_event),
    "edited-rental": _edited("rentals.jsonl: lots 2 → 1", "rentals.jsonl", _rental_lots),
    "cut-rental-line": _edited("rentals.jsonl: last line cut", "rentals.jsonl", _cut_rental),
    "link-rentals": case_link_rentals,
    "link-events-resume": case_link_events_resume,
}
