"""Replay trials from a bundle: same spec, same inputs (checked by hash), the original's launcher.

:func:`replay_bundle` verifies the bundle, extracts it (safely) into a new folder, checks the
corpus and model fingerprints (bundled, ``--inputs`` or the original paths), picks the launcher
the originals ran with (a fresh process, or a container of the exact recorded image), reruns
each chosen trial and compares it with :func:`runner.bundle.compare.replay_differences`. It
writes ``replay.json`` and ``replay.md`` even when the user interrupts it.

Launchers are used through their public API only: :class:`runner.launch.launcher.Launcher`
(``trial_view``, ``image_fields``, ``run``, ``name``), ``TrialPaths`` and ``HostInterrupt``,
and the launcher kinds found by name (``replay_launcher`` of :mod:`runner.campaign.launcher_choice`: each kind
replays its own way; ``--launcher`` offers ``original`` and every kind whose ``replay_choice`` is set).
"""

from __future__ import annotations

import dataclasses
import shutil
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.io.fingerprint import sha256_bytes, sha256_file
from protocol.io.jsonio import write_text_atomic
from protocol.io.paths import check_allowed_root, check_safe_name
from protocol.io.safe_extract import DEFAULT_LIMITS, ExtractLimits, safe_extract
from protocol.io.safe_write import make_dirs
from protocol.records.codec import read_record, write_record
from protocol.records.raw_record import RawRecord
from protocol.records.stages import CampaignRecord, TrialSpec, TrialStatus
from protocol.study.load import Study, parse_study
from protocol.tasks import study_task
from runner.bundle.compare import environment_differences, render_replay, rerun_figures
from runner.bundle.records import (
    MANIFEST_NAME,
    BundleManifest,
    InputRecord,
    InputUse,
    Progress,
    ReplayReport,
    TrialReplay,
    campaign_input,
    creation_time,
    quiet,
)
from runner.bundle.verify import DecisionCheck, verify_bundle
from runner.campaign.launcher_choice import replay_launcher
from runner.campaign_dir.layout import load_record, read_csv_rows, read_rows
from runner.campaign_dir.seal import outputs_cell
from runner.launch.launcher import HostInterrupt, Launcher, TrialPaths, kind_names


def default_replay_dir(bundle: Path) -> Path:
    """``<bundle folder>/<bundle name>.replay-<UTC time>``: next to the bundle, never over anything."""
    stem = bundle.name
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return bundle.resolve().parent / f"{stem}.replay-{stamp}"


def replay_bundle(
    bundle: Path,
    *,
    trial_ids: Iterable[str] = (),
    out: Path | None = None,
    inputs_dir: Path | None = None,
    launcher_kind: str = "original",
    allowed_roots: tuple[Path, ...] = (),
    limits: ExtractLimits = DEFAULT_LIMITS,
    progress: Progress = quiet,
    decision_check: DecisionCheck | None = None,
) -> ReplayReport:
    """Rerun trials of a verified bundle (``decision_check``: see :func:`runner.bundle.verify.verify_bundle`) and
    compare them as the study's ``quality.replay`` declares."""
    if launcher_kind not in (choices := kind_names(replay=True)):
        raise UserError(f"unknown launcher {launcher_kind!r}", "--launcher", f"Use one of: {', '.join(choices)}.")
    requested = [check_safe_name(t, what="trial id", where="--trial") for t in trial_ids]
    progress(f"verifying {bundle}")
    report = verify_bundle(bundle, limits, decision_check=decision_check)
    if not report.ok:
        raise UserError(f"the bundle does not verify: {report.first}", str(bundle),
                        "Replay only a bundle that verifies (isocost verify FILE names every discrepancy).")
    out = out if out is not None else default_replay_dir(bundle)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError("the replay folder exists and is not empty", str(out),
                        "Choose a new --out; a replay never writes over earlier results.")
    created = not out.exists()
    try:
        p = _prepare_replay(bundle, out, requested, inputs_dir, launcher_kind, allowed_roots, limits, progress)
    except BaseException:
        if created:  # refused before any trial ran: leave nothing behind
            shutil.rmtree(out, ignore_errors=True)
        raise
    results, interrupted = _replay_chosen(p, out, progress)
    replay = ReplayReport(
        bundle=str(bundle),
        bundle_sha256=p.bundle_sha256,
        campaign_id=p.manifest.campaign_id,
        study_sha256=p.manifest.study_sha256,
        mode=p.study.quality.replay,
        max_score_delta=p.study.quality.max_score_delta,
        launcher=p.launcher_facts,
        inputs=p.inputs,
        trials=tuple(results),
        out_dir=str(out),
        created_at=creation_time(),
    )
    write_record(out / "replay.json", replay, out)
    write_text_atomic(out / "replay.md", render_replay(replay), out)
    if interrupted:  # what ran is written; stop like Ctrl-C does
        raise KeyboardInterrupt
    return replay


def _replay_chosen(p: _Prepared, out: Path, progress: Progress) -> tuple[list[TrialReplay], bool]:
    """Rerun the chosen trials in order; stop after one the user interrupted. Returns results, interrupted."""
    campaign_root = out / "bundle" / "campaign"
    corpus, model = (Path(use.path) for use in p.inputs)
    reference = _reference(campaign_root, p.study)
    results: list[TrialReplay] = []
    interrupted = False
    for number, trial_id in enumerate(p.chosen, start=1):
        progress(f"[{number}/{len(p.chosen)}] replaying {trial_id} ({p.specs[trial_id].variant.variant_id}) "
                 f"with launcher {p.launcher.name}")
        result, interrupted = _replay_one(p.specs[trial_id], p.rows[trial_id], campaign_root, out, p.launcher,
                                          corpus, model, p.study, reference)
        results.append(result)
        progress(f"[{number}/{len(p.chosen)}] {trial_id}: {'matches' if result.matches else 'DIFFERS'}")
        if interrupted:
            break
    return results, interrupted


@dataclass(frozen=True)
class _Prepared:
    """Everything a replay needs before its first trial runs."""

    bundle_sha256: str
    manifest: BundleManifest
    study: Study
    chosen: list[str]
    specs: dict[str, TrialSpec]
    rows: dict[str, RawRecord]
    inputs: tuple[InputUse, ...]  # corpus, model
    launcher: Launcher
    launcher_facts: dict[str, Any]


def _prepare_replay(
    bundle: Path, out: Path, requested: list[str], inputs_dir: Path | None, launcher_kind: str,
    allowed_roots: tuple[Path, ...], limits: ExtractLimits, progress: Progress,
) -> _Prepared:
    """Extract, re-check every hash, resolve the inputs and the launcher. Nothing runs yet."""
    bundle_sha256 = sha256_file(bundle)
    extracted = out / "bundle"
    progress(f"extracting into {extracted}")
    digests = safe_extract(bundle, extracted, limits)
    manifest = read_record(extracted / MANIFEST_NAME, BundleManifest)
    for entry in manifest.files:  # the bytes written are the bytes verified
        digest = digests.get(entry.path)
        if digest is None or digest.sha256 != entry.sha256:
            raise UserError("an extracted file differs from BUNDLE.json", entry.path,
                            "The bundle changed while it was read; copy it again and retry.")
    campaign_root = extracted / "campaign"
    campaign = load_record(campaign_root)
    study_bytes = (campaign_root / "study.toml").read_bytes()
    if sha256_bytes(study_bytes) != manifest.study_sha256:
        raise UserError("the study's hash differs from the bundle's", "campaign/study.toml",
                        "The bundle is inconsistent; do not use it.")
    study = parse_study(tomllib.loads(study_bytes.decode("utf-8")), path=campaign_root / "study.toml",
                        sha256=manifest.study_sha256)
    rows = {row.trial_id: row for row in read_rows(campaign_root / "raw.csv")}
    chosen = _choose_trials(requested, rows, campaign)
    uses = tuple(_resolve_input(kind, manifest, campaign, extracted, inputs_dir, allowed_roots)
                 for kind in ("corpus", "model"))
    specs = {t: read_record(campaign_root / "trials" / t / "spec.json", TrialSpec) for t in chosen}
    launcher, launcher_facts = replay_launcher(launcher_kind, specs)
    return _Prepared(bundle_sha256, manifest, study, chosen, specs, rows, uses, launcher, launcher_facts)


def _choose_trials(requested: list[str], rows: dict[str, RawRecord], campaign: CampaignRecord) -> list[str]:
    """The requested trials, each an accepted pass; by default the first accepted pass of every variant."""
    for trial_id in requested:
        check_safe_name(trial_id, what="trial id", where="--trial")
        if trial_id not in rows:
            raise UserError(f"no trial {trial_id!r} in this bundle", "--trial",
                            f"Use one of: {', '.join(sorted(rows))}.")
        row = rows[trial_id]
        if not _accepted(row):
            raise UserError(
                f"trial {trial_id} was not an accepted pass (status {row.status}, "
                f"corpus_accepted {row.cell('corpus_accepted')})",
                "--trial",
                "Replay compares accepted passes; choose a trial whose row says ok and accepted.",
            )
    if requested:
        return list(dict.fromkeys(requested))
    chosen: list[str] = []
    # a verified bundle's rows all carry their order_index and attempt (the campaign checks compare them)
    ordered = sorted(rows.values(), key=lambda r: (r.order_index or 0, r.attempt or 0))
    for variant in campaign.variants:
        first = next((r for r in ordered if r.variant_id == variant.variant_id and _accepted(r)), None)
        if first is not None:
            chosen.append(check_safe_name(first.trial_id, what="trial id", where="campaign/raw.csv"))
    if not chosen:
        raise UserError("the bundle holds no accepted pass to replay", "campaign/raw.csv",
                        "Replay needs at least one trial with status ok and an accepted corpus.")
    return chosen


def _accepted(row: RawRecord) -> bool:
    """An accepted pass: the trial ended ok and its corpus passed the quality rule."""
    return row.status == "ok" and row.corpus_accepted is True


def _resolve_input(
    kind: str,
    manifest: BundleManifest,
    campaign: CampaignRecord,
    extracted: Path,
    inputs_dir: Path | None,
    allowed_roots: tuple[Path, ...],
) -> InputUse:
    """Where the replay reads one input (bundled, under --inputs, or at its original path), its hash checked."""
    record = manifest.input(kind)
    facts = campaign_input(campaign, kind)
    expected = facts.fingerprint if facts is not None else ""
    original = Path(facts.path if facts is not None else "")
    if original.name in ("", ".", ".."):
        raise UserError(f"the bundle names no usable {kind} path ({original})", f"campaign.json {kind}.path",
                        "The bundle is malformed; do not use it.")
    if record is not None and record.included:
        path, source = extracted / record.archive_path, "bundle"
        check_allowed_root(path, [extracted], what=f"bundled {kind}", where=f"BUNDLE.json inputs.{kind}")
    elif inputs_dir is not None:
        path, source = inputs_dir / original.name, "--inputs"
        check_allowed_root(path, allowed_roots, what=f"{kind} path", where="--inputs")
    else:
        if not original.is_absolute():
            raise UserError(f"the bundle names a relative {kind} path {original}", f"campaign.json {kind}.path",
                            "Pass --inputs DIR holding the inputs.")
        path, source = original, "original path"
        check_allowed_root(path, allowed_roots, what=f"{kind} path", where=f"campaign.json {kind}.path")
    present = path.is_dir() if kind == "model" else path.is_file()
    if not present:
        where = "--inputs" if source == "--inputs" else f"campaign.json {kind}.path"
        raise UserError(f"the {kind} is not at {path}", where,
                        "The bundle holds no inputs: pass --inputs DIR holding the corpus file and the model "
                        f"directory under their original names ({original.name}), or replay a bundle made with "
                        "--include-inputs.")
    from protocol.io.fingerprint import fingerprint_path

    try:
        actual = fingerprint_path(path)
    except ValueError as exc:
        raise UserError(f"the {kind} cannot be fingerprinted: {exc}", str(path), "Remove links from it.") from None
    if actual != expected:
        detail = _first_file_difference(path, record) if kind == "model" else ""
        raise UserError(
            f"the {kind} at {path} has fingerprint {actual}, the bundle's campaign ran with {expected}{detail}",
            f"{kind} ({source})",
            "Replay refuses inputs that differ: use the exact inputs of the campaign (or a bundle made with "
            "--include-inputs). A changed model or corpus is a new study, not a replay.",
        )
    return InputUse(kind=kind, path=str(path), fingerprint=actual, source=source)


def _first_file_difference(path: Path, record: InputRecord | None) -> str:
    if record is None or not record.files:
        return ""
    from protocol.io.fingerprint import tree_files

    listed = {f.path: f.sha256 for f in record.files}
    here = {p.relative_to(path).as_posix(): p for p in tree_files(path)}
    for name in sorted(set(listed) | set(here)):
        if name not in here:
            return f"; first difference: {name} is missing"
        if name not in listed:
            return f"; first difference: {name} is not in the original"
        if sha256_file(here[name]) != listed[name]:
            return f"; first difference: {name} has other content"
    return ""


def _reference(campaign_root: Path, study: Study) -> Any:
    """The bundled corpus index as the reference a rerun is checked against (the study's task builds it)."""
    return study_task(study).reference(read_csv_rows(campaign_root / "corpus_index.csv"), study)


def _replay_one(
    original: TrialSpec,
    row: RawRecord,
    campaign_root: Path,
    out: Path,
    launcher: Launcher,
    corpus: Path,
    model: Path,
    study: Study,
    reference: Any,
) -> tuple[TrialReplay, bool]:
    """Rerun one trial with its original spec (inputs and image as this host sees them); compare. Returns
    the comparison and whether the user interrupted it."""
    trial_dir, final, status, interrupted = _rerun(original, out, launcher, corpus, model)
    task = study_task(study)
    figures = rerun_figures(task, study, reference, trial_dir, campaign_root / "trials" / original.trial_id, final)
    return TrialReplay(
        trial_id=original.trial_id,
        variant_id=original.variant.variant_id,
        mode=study.quality.replay,
        status=final,
        **figures,
        original_metric=row.metric_value,
        original_pass_s=row.pass_s,
        replay_pass_s=status.phases.pass_s if status is not None and final == "ok" else None,
        environment_differences=environment_differences(campaign_root / "trials" / original.trial_id,
                                                         trial_dir),
        trial_dir=str(trial_dir),
        outputs_sha256=outputs_cell(trial_dir, task.output_files) or "",
        manifest_sha256=sha256_file(trial_dir / "manifest.json") if (trial_dir / "manifest.json").is_file() else "",
    ), interrupted


def _rerun(
    original: TrialSpec, out: Path, launcher: Launcher, corpus: Path, model: Path,
) -> tuple[Path, str, TrialStatus | None, bool]:
    """Run the original spec again in ``out/trials/<id>`` (paths and image as this launcher sees them).

    Returns the trial folder, the host's final status, the trial's own status record, and whether
    the user interrupted it.
    """
    from runner.campaign.gather import decide_status, read_status

    trial_dir = out / "trials" / check_safe_name(original.trial_id, what="trial id")
    make_dirs(trial_dir.parent, out)
    trial_dir.mkdir(exist_ok=False)
    paths = TrialPaths(trial_dir=trial_dir.resolve(), corpus=corpus.resolve(), model=model.resolve())
    corpus_view, model_view, _ = launcher.trial_view(paths)
    image_ref, image_id, image_digest = launcher.image_fields()
    spec = dataclasses.replace(original, corpus_path=corpus_view, model_path=model_view, launcher=launcher.name,
                               image_ref=image_ref, image_id=image_id, image_digest=image_digest)
    write_record(trial_dir / "spec.json", spec, out)
    interrupted = False
    try:
        result = launcher.run(paths, original.timeout_s)
    except HostInterrupt as exc:
        result, interrupted = exc.result, True
    status, _ = read_status(trial_dir)
    return trial_dir, decide_status(status, result), status, interrupted
