"""``isocost tune``: measure the quality metric on the tuning split, propose and write the quality rule.

The study's reference variant runs over the tuning split in a fresh process,
exactly like a trial (same spec, same ``python -m runner.trial``, same
process launcher), in ``.isocost/tune/<time>/`` next to the study. Its
predictions are validated against the tuning labels (metric and subgroups),
and :func:`protocol.study.tuning.propose` turns the metric into a minimum and
tolerances, written into the study's ``[quality]`` table (comments kept).

Refused once the final corpus has been evaluated (the seen-corpus ledger): a
threshold tuned after seeing final results needs a new final corpus. Refused too
when the tuning split is too small for the rule (:func:`protocol.study.tuning.check_tuning_size`:
fewer than 10 inputs before anything runs; after the run, fewer than the measured
metric needs), with the size it needs: a rule from one input would accept anything. A tuning run made with the
test-only fault hook set (its manifest says so) is NOT A MEASUREMENT: its proposal is shown flagged with
``--dry-run`` and never written into the study.

Example::

    result = tune_study(Path("study.toml"))
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.corpus import Record, content_fingerprint, token_lengths
from protocol.errors import UserError
from protocol.io.fingerprint import fingerprint_path
from protocol.io.safe_write import make_dirs, write_text_atomic
from protocol.io.tomledit import set_table_keys
from protocol.records.codec import write_record
from protocol.records.manifest import read_manifest
from protocol.records.stages import TrialSpec, Variant, read_status
from protocol.study.load import load_study
from protocol.study.model import Study, bucket_for, series_id
from protocol.study.schema import KEYS
from protocol.study.time_limits import TimeLimit
from protocol.study.tuning import RULE, Proposal, bootstrap_method, bootstrap_standard_error, check_tuning_size, propose
from protocol.tasks import index_fields, read_task_corpus, study_task, task_words
from runner.campaign.seen import describe_entry, ledger_path, seen_entries
from runner.campaign_dir.fault_hooks import FAULT_ENV, FAULT_HOOK_BANNER
from runner.launch.kinds.process.launcher import ProcessLauncher
from runner.launch.launcher import TrialPaths


@dataclass(frozen=True)
class TuneResult:
    study: Path
    variant_id: str
    metric: str
    proposal: Proposal
    subgroups: dict[str, dict[str, float]]
    trial_dir: Path
    written: bool
    flagged: tuple[str, ...] = field(default_factory=tuple)
    units: str = "inputs"  # what the metric averages over: inputs, or a retrieval metric's queries

    def lines(self) -> list[str]:
        p = self.proposal
        lines = [f"measured on the tuning split ({p.n} {self.units}), reference variant {self.variant_id}, in a fresh "
                 f"process ({self.trial_dir}): {self.metric} {p.metric_value:.4f}"]
        for group, values in sorted(self.subgroups.items()):
            shown = ", ".join(f"{name} {value:.4f}" for name, value in sorted(values.items()))
            lines.append(f"  by {group}: {shown}")
        lines += [f"rule: {RULE}",
                  f"proposed: minimum = {p.minimum}, max_metric_drop = {p.max_metric_drop}, "
                  f"min_agreement = {p.min_agreement} (se {p.se:.4f}, {p.se_method})"]
        lines += [f"warning: {text}" for text in self.flagged]
        lines.append(f"wrote them into [quality] of {self.study} (tuned_on = \"tuning\")" if self.written
                     else "--dry-run: the study file is unchanged")
        return lines


def _reference_variant(study: Study) -> Variant:
    """The reference variant (with common seeds: under the first seed)."""
    reference = study.quality.reference_variant
    return next(v for v in study.variants() if series_id(v.variant_id) == reference)


def _refuse_if_seen(study: Study, ledger_dir: Path | None) -> None:
    corpus = read_task_corpus(study.corpus.path, study_task(study))
    entries = seen_entries(study, content_fingerprint(corpus), ledger_dir)
    if entries:
        raise UserError(
            f"the final corpus {study.corpus.fingerprint} ({study.corpus.path.name}) has already been evaluated, "
            f"by {describe_entry(entries[0])}: a threshold tuned now would be tuned after seeing final results",
            f"{study.path}; ledger {ledger_path(study, ledger_dir)}",
            "Keep the current [quality] rule, or point [corpus] at a new final corpus that nobody has evaluated "
            "yet and tune again.",
        )


def tune_study(study_path: Path, *, ledger_dir: Path | None = None, write: bool = True,
               progress: Callable[[str], None] = lambda message: None,
               time_limit: TimeLimit | None = None) -> TuneResult:
    """Measure the reference variant on the tuning split and propose the quality rule.

    With ``write`` (the default) the rule goes into the study's ``[quality]`` table. The tuning pass runs under
    the study's ``trial_timeout_s``, or ``time_limit`` (the demo builder's, scaled to the machine).
    """
    study = load_study(study_path)
    _refuse_if_seen(study, ledger_dir)
    _check_inputs(study)
    task = study_task(study)
    tuning = read_task_corpus(study.tuning.path, task)
    task.check_model(study.model.path, tuning, study, f"{study.tuning.path}, tuning labels")
    task.check_inputs(study, read_task_corpus(study.corpus.path, task), tuning)
    study = task.tuning_study(study)  # the study as a pass over the tuning split sees it (its own queries)
    reference = _tuning_reference(study, tuning)
    n = task.scored_units(reference)
    check_tuning_size(n, f"{study.tuning.path}, [tuning] of {study.path}")  # before anything runs
    variant = _reference_variant(study)
    trial_dir = _run_reference(study, variant, tuning, progress, time_limit)
    outputs = task.read_pass(trial_dir)
    checked = task.check_pass(outputs, reference, _unbounded(study))
    if checked.metric_value is None:
        raise UserError(f"the tuning outputs could not be scored ({'; '.join(checked.reasons)})",
                        str(trial_dir / task.output_files[0]), "Read trial.log next to it.")
    se, method = None, ""
    if not task.is_proportion(study.quality.metric):  # macro-F1, retrieval: no share of inputs, a seeded bootstrap
        se = bootstrap_standard_error(task.resampled_metric(outputs, reference, study), n)
        method = bootstrap_method()
    check_tuning_size(n, f"{study.tuning.path}, [tuning] of {study.path}", study.quality.metric,
                      checked.metric_value, se)  # the size this metric value needs; the study is left as it is
    proposal = propose(checked.metric_value, n, se, method)
    hooked = _hooked(trial_dir)
    if hooked and write:
        _refuse_hooked_rule(trial_dir)
    flagged = hooked + _near_perfect(study, checked.metric_value) + tuple(
        f"subgroup {group}={name}: {study.quality.metric} {value:.4f} on the tuning split is below the "
        f"proposed minimum {proposal.minimum}"
        for group, values in checked.subgroups.items() for name, value in values.items()
        if value < proposal.minimum)
    if write:
        _write_rule(study, proposal, checked.metric_value, n, [g for g in task.subgroups if g in reference.groups])
    return TuneResult(study=study.path, variant_id=variant.variant_id, metric=study.quality.metric,
                      proposal=proposal, subgroups=checked.subgroups, trial_dir=trial_dir, written=write,
                      flagged=flagged, units=_units(study))


#: A reference scoring this close to perfect on the tuning split is likely to have been fitted to it.
NEAR_PERFECT = 0.995


def _hooked(trial_dir: Path) -> tuple[str, ...]:
    """The tuning run's test-only fault hook (its manifest), said first: the metric measured is the hook's."""
    manifest = read_manifest(trial_dir)
    if manifest is None or not manifest.fault_injection:
        return ()
    return (f"{FAULT_HOOK_BANNER} {FAULT_ENV}={manifest.fault_injection} was set for this tuning run "
            f"({trial_dir / 'manifest.json'}): the metric and the rule proposed from it are the hook's; tune again "
            "without the variable",)


def _refuse_hooked_rule(trial_dir: Path) -> None:
    """A rule measured under the test-only fault hook never goes into the study: every later campaign and decision
    would judge quality by the hook's metric, with no flag in the study to say so (the ranking outputs flag their
    hooked evidence; a study's rule has no place for a flag, so it is refused)."""
    manifest = read_manifest(trial_dir)
    value = manifest.fault_injection if manifest is not None else ""
    raise UserError(f"{FAULT_HOOK_BANNER} {FAULT_ENV}={value} was set for this tuning run: its metric is the "
                    "hook's, and the rule proposed from it is not written into the study",
                    str(trial_dir / "manifest.json"),
                    f"Tune again without the variable (unset {FAULT_ENV}); `isocost tune --dry-run` shows the hook's "
                    "proposal, flagged, and writes nothing.")


def _near_perfect(study: Study, metric_value: float) -> tuple[str, ...]:
    """The warning for a (near) perfect score on the tuning split, naming its likely cause."""
    if metric_value < NEAR_PERFECT:
        return ()
    return (f"the reference variant scores {study.quality.metric} {metric_value:.4f} on the tuning split: a "
            "model trained, or its head fitted, on these texts scores them (near) perfectly, and a minimum "
            "proposed from them can be out of reach on the final corpus. Tune on texts the model has never "
            "seen (a split disjoint from its training data).",)


def _check_inputs(study: Study) -> None:
    """The tuning split and the model exist and have the study's fingerprints."""
    for kind, ref in (("tuning", study.tuning), ("model", study.model)):
        if not ref.path.exists():
            raise UserError(f"{kind} not found at {ref.path}", str(study.path), f"Fix [{kind}] path in the study.")
        actual = fingerprint_path(ref.path)
        if actual != ref.fingerprint:
            raise UserError(f"{kind} fingerprint {actual} differs from the study's {ref.fingerprint}",
                            str(study.path), f"Restore the {kind}, or update [{kind}] fingerprint knowingly.")


def _run_reference(study: Study, variant: Variant, tuning: tuple[Record, ...],
                   progress: Callable[[str], None], time_limit: TimeLimit | None = None) -> Path:
    """Run ``variant`` over the tuning split in a fresh process, like a trial; its trial directory."""
    limit = time_limit or TimeLimit(
        study.campaign.trial_timeout_s, f"[campaign] trial_timeout_s of {study.path}",
        f"Raise trial_timeout_s in [campaign] of {study.path} (the tuning pass runs under a trial's limit), or tune "
        "on a less loaded machine; then tune again.")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    trial_dir = study.path.parent / ".isocost" / "tune" / stamp
    make_dirs(trial_dir.parent, study.path.parent)
    trial_dir.mkdir()
    spec = TrialSpec(
        trial_id=f"tune-{stamp}", campaign_id=f"tune-{uuid.uuid4().hex}", study_sha256=study.sha256, variant=variant,
        repetition=1, order_index=1, attempt=1, corpus_path=str(study.tuning.path),
        corpus_fingerprint=study.tuning.fingerprint, model_path=str(study.model.path),
        model_fingerprint=study.model.fingerprint, warmup=study.warmup,
        warmup_texts=tuple(r.text for r in tuning[: study.warmup.inputs]), launcher="process",
        timeout_s=limit.seconds,
        task=study.task,
        task_options=dict(study.task_options),
        engine_settings=study.settings_of(variant.engine),
    )
    write_record(trial_dir / "spec.json", spec, trial_dir)
    progress(f"running {variant.variant_id} over the {len(tuning)} tuning inputs in a fresh process")
    launched = ProcessLauncher().run(
        TrialPaths(trial_dir=trial_dir, corpus=study.tuning.path, model=study.model.path), limit.seconds)
    status = read_status(trial_dir)
    if launched.timed_out:  # the trial only saw a SIGTERM: the cause is the host's limit
        wall = f" after {launched.wall_s:.0f} s" if launched.wall_s is not None else ""
        raise UserError(f"the tuning pass over {len(tuning)} inputs was stopped at its time limit of "
                        f"{limit.seconds or 0:g} s ({limit.source}){wall}: this machine is slower, or busier, than "
                        "the limit allows", str(trial_dir / "trial.log"), limit.fix)
    if status is None or status.status != "ok":
        raise UserError(f"the tuning run ended {status.status if status else 'without a status'}"
                        f"{': ' + status.error if status and status.error else ''}",
                        str(trial_dir / "trial.log"), "Read the log; fix the study or the checkpoint, then tune again.")
    return trial_dir


def _tuning_reference(study: Study, tuning: tuple[Record, ...]) -> Any:
    """What the tuning pass is checked against, every subgroup shown: the labels, and the length buckets."""
    buckets = [""] * len(tuning)
    if study.length_buckets:
        lengths = token_lengths(study.model.path, [r.text for r in tuning])
        buckets = [bucket_for(n, study.length_buckets) for n in lengths]
    task = study_task(study)
    rows = [{"id": r.id, "label": r.label, "length_bucket": bucket,
             **dict(zip(task.corpus_fields, index_fields(r, task.corpus_fields), strict=True))}
            for r, bucket in zip(tuning, buckets, strict=True)]
    groups = [g for g in task.subgroups if g != "length_bucket" or study.length_buckets]
    return task.reference(rows, study, groups)


def _unbounded(study: Study) -> Study:
    """The study with no quality minimum: the tuning pass is scored, not judged."""
    return dataclasses.replace(study, quality=dataclasses.replace(study.quality, minimum=0.0))


def _units(study: Study) -> str:
    return task_words(study_task(study))["units"]


def _write_rule(study: Study, proposal: Proposal, metric_value: float, n_tuning: int, subgroups: list[str]) -> None:
    """Write the proposed rule into the study's ``[quality]`` table (comments kept); the study stays valid."""
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    note = (f"{KEYS['quality.minimum'].meaning}; tuned {when}: {study.quality.metric} "
            f"{metric_value:.4f} on {n_tuning} tuning {_units(study)}, rule m − 2·se, se {proposal.se:.4f} "
            f"({proposal.se_method})")
    text = study.path.read_text(encoding="utf-8")
    text = set_table_keys(text, "quality", {
        "minimum": proposal.minimum, "tuned_on": "tuning", "max_metric_drop": proposal.max_metric_drop,
        "min_agreement": proposal.min_agreement, "subgroups": subgroups,
    }, {"minimum": note})
    write_text_atomic(study.path, text, fix="tune writes the study file it was given: name the file itself, not "
                      "a link to it.")
    load_study(study.path)  # still a valid study
