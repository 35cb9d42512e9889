"""The same result across hardware (issue 21): real campaigns whose outputs really differ, compared by id.

Two campaigns of one study on this machine give the same labels, so the second "host" is made to disagree
with the reference by a known share through the test-only fault ``disagree:SHARE`` (recorded in every
manifest): a well-formed pass whose labels differ on the ids :func:`runner.trial.faults.disagrees` picks.
Within its own campaign that host is equivalent (its own reference variant disagrees the same way); only
the comparison with the decision's one reference sees it. Real model, trials as real processes.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from protocol.records.stages import Rental
from runner.campaign.run import run_campaign
from runner.campaign_dir.layout import read_rows
from runner.cli import main
from runner.launch.kinds.process.launcher import ProcessLauncher
from runner.trial.faults import FAULT_ENV, disagrees

pytestmark = pytest.mark.e2e

RULE = {"max_metric_drop = 0.01": "max_metric_drop = 0.6", "min_agreement = 0.99": "min_agreement = 0.6"}


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=True)


def _campaign(study: Path, out: Path, gpu: str, share: float | None) -> Path:
    if share is not None:
        os.environ[FAULT_ENV] = f"disagree:{share}"
    try:
        run_campaign(study, out, ProcessLauncher(), rental=Rental(gpu, 1))
    finally:
        os.environ.pop(FAULT_ENV, None)
    return out


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> dict[str, Path]:
    from workspace import write_workspace

    root = tmp_path_factory.mktemp("across")
    study = write_workspace(root / "ws", tiny_model, n=12, repetitions=1, batches="[1, 4]", replace=RULE)
    return {
        "reference": _campaign(study, root / "rtx4090", "rtx-4090", None),
        "close": _campaign(study, root / "b200-close", "b200", 0.25),
        "far": _campaign(study, root / "b200-far", "b200", 0.7),
        "ids": [json.loads(line)["id"] for line in (root / "ws" / "corpus.jsonl").read_text().splitlines()],
    }


def _differing(ids: list[str], share: float) -> list[str]:
    return sorted(i for i in ids if disagrees(i, share))


def test_the_fault_is_recorded_in_the_manifest(campaigns: dict[str, Path]) -> None:
    trial = campaigns["far"] / "trials" / read_rows(campaigns["far"])[0].trial_id
    assert json.loads((trial / "manifest.json").read_text())["fault_injection"] == "disagree:0.7"


def test_within_the_rule_is_ranked_beyond_it_is_refused_with_the_ids(campaigns: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    ids = campaigns["ids"]
    close, far = _differing(ids, 0.25), _differing(ids, 0.7)
    assert 0 < len(close) <= 0.4 * len(ids) < len(far), (close, far)  # the share the rule separates
    result = cli("decide", str(campaigns["reference"]), str(campaigns["close"]), str(campaigns["far"]), "--out",
                 str(tmp_path / "d"))
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "d" / "decision.json").read_text())
    configs = {c["configuration_id"]: c for c in data["configurations"]}
    assert data["agreement"]["reference"] == "batch_size=1 on rtx-4090 ×1 lot"
    close_cfg = [c for k, c in configs.items() if k.startswith("batch_size=4 on b200") and
                 c["campaign_label"] == str(campaigns["close"])][0]
    far_cfg = [c for k, c in configs.items() if k.startswith("batch_size=4 on b200") and
               c["campaign_label"] == str(campaigns["far"])][0]
    assert close_cfg["equivalent"] is True and far_cfg["equivalent"] is True  # each host agrees with itself
    assert close_cfg["cross_equivalent"] is True and close_cfg["rank"] is not None
    assert far_cfg["cross_equivalent"] is False and far_cfg["rank"] is None
    reason = next(e for e in far_cfg["exclusions"] if e.startswith("quality across campaigns"))
    assert f"{len(far)} id(s) differ (e.g. {', '.join(far[:5])})" in reason
    cell = next(c for c in data["agreement"]["cells"] if c["row"] == far_cfg["configuration_id"]
                and c["column"] == data["agreement"]["reference"])
    assert cell["ids_differ"] == len(far) and cell["min_share_equal"] == pytest.approx(1 - len(far) / len(ids))
    memo = (tmp_path / "d" / "decision.md").read_text()
    assert "## The same result across campaigns" in memo and "**not equivalent**" in memo


def test_the_reference_can_be_another_campaign_and_a_stranger_is_refused(campaigns: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    result = cli("decide", str(campaigns["reference"]), str(campaigns["far"]), "--reference",
                 str(campaigns["far"]), "--out", str(tmp_path / "d"))
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "d" / "decision.json").read_text())
    assert data["agreement"]["reference_dir"] == str(campaigns["far"])
    result = cli("decide", str(campaigns["reference"]), "--reference", str(campaigns["close"]),
                 "--out", str(tmp_path / "e"))
    assert result.exit_code == 2
    assert "--reference names a directory that is not among those given to isocost decide" in result.output


def test_compare_prints_the_matrix_as_text_json_and_csv(campaigns: dict[str, Path]) -> None:
    dirs = [str(campaigns["reference"]), str(campaigns["far"])]
    text = cli("compare", *dirs)
    assert text.exit_code == 0, text.output
    flag, rest = text.output.split("\n", 1)  # the far host ran with the test-only fault hook: said first
    assert flag.startswith("NOT A MEASUREMENT") and "ISOCOST_FAULT_INJECT=disagree:0.7" in flag, flag
    assert rest.startswith("reference: batch_size=1 on rtx-4090 ×1 lot")
    assert "own repetitions: — (one accepted pass: nothing to repeat)" in text.output
    as_json = json.loads(cli("compare", *dirs, "--json").output)
    assert len(as_json["cells"]) == 16 and as_json["schema_version"] == 1
    rows = list(csv.DictReader(cli("compare", *dirs, "--format", "csv").output.splitlines()))
    assert len(rows) == 16 and {"row", "column", "share_equal", "ids_differ"} <= set(rows[0])
    far = _differing(campaigns["ids"], 0.7)
    crossing = [r for r in rows if "rtx-4090" in r["row"] and "b200" in r["column"] and r["row"].startswith(
        r["column"].split(" on ")[0])]
    assert {int(r["ids_differ"]) for r in crossing} == {len(far)}


def test_repetitions_that_disagree_are_visible(make_workspace: Callable[..., Path], tmp_path: Path) -> None:
    """A configuration whose own passes differ: the second pass is perturbed, the first is not."""
    study = make_workspace(n=8, repetitions=2, batches="[1]", replace=RULE)
    out = tmp_path / "mixed"
    os.environ[FAULT_ENV] = "disagree:0.5"  # only for the trials run while it is set
    progress_calls: list[str] = []

    def progress(message: str) -> None:
        progress_calls.append(message)
        if ": ok" in message:
            os.environ.pop(FAULT_ENV, None)  # the first pass perturbed, the second not

    try:
        run_campaign(study, out, ProcessLauncher(), rental=Rental("rtx-4090", 1), progress=progress)
    finally:
        os.environ.pop(FAULT_ENV, None)
    result = cli("compare", str(out), "--json")
    assert result.exit_code == 0, result.output
    [repeat] = json.loads(result.output)["repeatability"]
    ids = [json.loads(line)["id"] for line in (study.parent / "corpus.jsonl").read_text().splitlines()]
    assert repeat["identical"] is False and repeat["ids_moved"] == len(_differing(ids, 0.5))


def test_a_replay_on_another_host_is_compared_by_id(campaigns: dict[str, Path], tmp_path: Path) -> None:
    """Item 5: `isocost replay` on "another host" (here: under the disagree fault) writes what compare and
    decide read: the reruns are one more configuration, compared with the one reference by id."""
    bundle = tmp_path / "ref.tar.gz"
    assert cli("summarize", str(campaigns["reference"])).exit_code == 0
    made = cli("bundle", str(campaigns["reference"]), "-o", str(bundle))
    assert made.exit_code == 0, made.output
    out = tmp_path / "replayed"
    os.environ[FAULT_ENV] = "disagree:0.7"
    try:
        replayed = cli("replay", str(bundle), "--launcher", "process", "--out", str(out))
    finally:
        os.environ.pop(FAULT_ENV, None)
    assert replayed.exit_code == 1, replayed.output  # it does not match the original (identical rule)
    far = _differing(campaigns["ids"], 0.7)
    as_json = json.loads(cli("compare", str(campaigns["reference"]), str(out), "--json").output)
    assert "ISOCOST_FAULT_INJECT=disagree:0.7" in " ".join(as_json["flags"])  # the replay ran under the hook
    name = f"batch_size=1 replayed in {out.name}"
    cell = next(c for c in as_json["cells"] if c["row"] == name and c["column"] == as_json["reference"])
    assert cell["ids_differ"] == len(far) and cell["examples"] == far[:5]
    decided = cli("decide", str(out), "--out", str(tmp_path / "d"))  # the replay alone brings its campaign
    assert decided.exit_code == 0, decided.output
    data = json.loads((tmp_path / "d" / "decision.json").read_text())
    assert name in data["agreement"]["configurations"]
    assert f"| {name} |" in (tmp_path / "d" / "decision.md").read_text()
    assert (tmp_path / "d" / "decision.md").read_text().startswith("NOT A MEASUREMENT")
    # An edited rerun is refused by name.
    trial = next((out / "trials").iterdir())
    (trial / "predictions.jsonl").write_text((trial / "predictions.jsonl").read_text().replace('"x"', '"y"', 1))
    refused = cli("compare", str(campaigns["reference"]), str(out))
    assert refused.exit_code == 2 and "are not those replay.json recorded" in refused.output
