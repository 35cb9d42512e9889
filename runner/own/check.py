"""``isocost check``: everything that can fail before renting time is spent, without timing anything.

Each check gives one line: ``ok``, ``warn`` or ``FAIL`` with what to do. The
study's keys come first, all at once; when the study itself is invalid the
other checks cannot run and say so. ``ok`` overall means ``isocost run`` would
start: the same inputs, labels, ledger and launcher checks pass.

``--probe`` runs ONE batch of the reference variant over tuning inputs in a
fresh process (never the final corpus) to estimate the campaign's wall time.

Example::

    report = check_study(Path("study.toml"), probe=True)
    report.ok, report.lines()
"""

from __future__ import annotations

import json
import math
import os
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from protocol.corpus import Record, check_disjoint, content_fingerprint, token_lengths
from protocol.costing.catalog_file import load_catalog
from protocol.decision.job_rank import check_deadline_ahead
from protocol.decision.rank import deadline_terms
from protocol.errors import UserError
from protocol.hardware.memory import ModelShape, estimate
from protocol.io.fingerprint import fingerprint_path
from protocol.io.names import check_image_reference
from protocol.io.paths import allowed_roots, check_allowed_root
from protocol.io.safe_write import make_dirs, write_text_atomic
from protocol.records.codec import write_record
from protocol.records.stages import TrialSpec, read_status
from protocol.study.load import load_study
from protocol.study.model import Study, bucket_for, series_id
from protocol.study.reader import StudyErrors
from protocol.study.schedule import rotated_schedule
from protocol.tasks import read_task_corpus, study_task
from runner.campaign.freeze import check_fingerprint, check_warmup, checked_catalog
from runner.campaign.run import check_out, rental_from_options
from runner.campaign.seen import ledger_path, quality_rule, raise_if_conflict, seen_entries
from runner.campaign_dir.layout import CampaignPaths


@dataclass
class CheckReport:
    items: list[tuple[str, str, str]] = field(default_factory=list)  # (status, topic, text)

    def add(self, status: str, topic: str, text: str) -> None:
        self.items.append((status, topic, text))

    @property
    def ok(self) -> bool:
        return all(status != "FAIL" for status, _, _ in self.items)

    def lines(self) -> list[str]:
        lines = [f"{status:<4}  {topic}: {text}" for status, topic, text in self.items]
        failed = sum(1 for s, _, _ in self.items if s == "FAIL")
        lines.append("isocost run would start." if self.ok else
                     f"{failed} check(s) failed: isocost run would not start; fix them and check again.")
        return lines


def _fail(report: CheckReport, topic: str, exc: UserError) -> None:
    report.add("FAIL", topic, exc.message)


@dataclass(frozen=True)
class RunOptions:
    """The options of ``isocost run`` that ``check`` checks the same way: where results go, the image, the rental
    and the allowed roots (each None or empty when not given)."""

    out: Path | None = None
    image: str | None = None
    gpu: str | None = None
    lots: int | None = None
    allowed_root_list: tuple[str, ...] = ()


def check_study(study_path: Path, *, hosts: tuple[str, ...] = (), probe: bool = False,
                target_memory_gib: float | None = None, ledger_dir: Path | None = None,
                launcher_kind: str = "auto", launcher_options: dict[str, dict[str, Any]] | None = None,
                run: RunOptions = RunOptions()) -> CheckReport:
    check_target_memory(target_memory_gib)
    report = CheckReport()
    try:
        study = load_study(study_path)
    except StudyErrors as exc:
        for error in exc.errors:
            _fail(report, "study keys", error)
        report.add("FAIL", "other checks", "not run: the study file must be valid first")
        return report
    except UserError as exc:
        _fail(report, "study keys", exc)
        report.add("FAIL", "other checks", "not run: the study file must be valid first")
        return report
    report.add("ok", "study keys", f"{study.path} is valid (paths resolve relative to it)")
    inputs_ok = _inputs(report, study, run.allowed_root_list)
    _run_options(report, study, run)
    if inputs_ok:
        _content(report, study, ledger_dir)
    _quality(report, study)
    _deadline(report, study)
    _memory(report, study, target_memory_gib)
    _launcher(report, study, launcher_kind, launcher_options, run)
    if hosts:
        _hosts(report, study, hosts)
    _schedule(report, study, probe and inputs_ok and report.ok)
    return report


def _inputs(report: CheckReport, study: Study, allowed_root_list: tuple[str, ...] = ()) -> bool:
    """Fingerprints, allowed roots and the catalog: `run`'s own checks (runner.campaign.freeze), its messages."""
    ok = True
    for kind, ref in (("corpus", study.corpus), ("tuning", study.tuning), ("model", study.model)):
        try:
            check_fingerprint(kind, ref.path, ref.fingerprint, str(study.path))
        except UserError as exc:
            _fail(report, f"{kind} {'path' if not ref.path.exists() else 'fingerprint'}", exc)
            ok = False
        else:
            report.add("ok", f"{kind} fingerprint", f"{ref.fingerprint} ({ref.path})")
    roots = allowed_roots(allowed_root_list)  # --allowed-root, else ISOCOST_ALLOWED_ROOTS, as `run` reads them
    for path in (study.path, study.corpus.path, study.tuning.path, study.model.path, study.costing.catalog):
        if path is not None and roots:
            try:
                check_allowed_root(path, roots)
            except UserError as exc:
                _fail(report, "allowed roots", exc)
                ok = False
    try:
        catalog = checked_catalog(study)
    except UserError as exc:
        _fail(report, "catalog", exc)
        ok = False
    else:
        report.add("ok", "catalog", f"{catalog} reads")
    return ok


def _run_options(report: CheckReport, study: Study, run: RunOptions) -> None:
    """``--out``, ``--gpu`` and ``--lots`` as ``run`` checks them (runner.campaign.run), and a GPU the catalog in force
    cannot price (``decide`` would then price no plan: not a refusal, a warning)."""
    if run.out is not None:
        try:
            check_out(CampaignPaths(run.out), resume=False)
        except UserError as exc:
            _fail(report, "out", exc)
    try:
        rental = rental_from_options(run.gpu, run.lots)
    except UserError as exc:
        _fail(report, "rental", exc)
        return
    if rental is None:
        return
    try:
        catalog = load_catalog(checked_catalog(study))
    except UserError:
        return  # already a FAIL under "catalog"
    if not catalog.plans_for(rental.gpu):
        report.add("warn", "rental", f"the catalog dated {catalog.dates_text} has no price for {rental.gpu}: decide "
                                     "will price no plan for this campaign (pass --catalog FILE to decide, or "
                                     "record another GPU with isocost rental)")
    else:
        report.add("ok", "rental", f"{rental.gpu} ×{rental.lots} lot(s), priced by the catalog dated "
                                   f"{catalog.dates_text}")


def _deadline(report: CheckReport, study: Study) -> None:
    """`decide` refuses a ``[job]`` whose deadline window has already ended: say so before the rental is spent."""
    if study.deadline is None:
        return
    window, _waiting_h, _reason = deadline_terms(study)
    try:
        check_deadline_ahead(study.job.source if study.job is not None else str(study.path), window)
    except UserError as exc:
        if study.job is not None:
            _fail(report, "deadline", exc)
        else:
            report.add("warn", "deadline", f"{exc.what}: no configuration can fit it ({study.path}, key deadline.end)")
        return
    assert window is not None
    report.add("ok", "deadline", f"the window ends {window.end.isoformat()}, ahead of now")


def _model_fits(report: CheckReport, study: Study, corpus: tuple[Record, ...], tuning: tuple[Record, ...]) -> None:
    """The checkpoint runs the study's task on these inputs (a classifier: the corpus labels are its own)."""
    task = study_task(study)
    what = "labels" if task.labels_required else "model"
    try:
        extra = task.check_model(study.model.path, (*corpus, *tuning), study, "corpus and tuning labels")
    except UserError as exc:
        _fail(report, what, exc)
        return
    if not task.labels_required:
        report.add("ok", "model", f"the checkpoint can run task {task.name}")
        for warning in extra:
            report.add("warn", "model", warning)
        return
    report.add("ok", "labels", f"{len({r.label for r in corpus})} corpus labels, all in the model's id2label")
    if extra:
        report.add("warn", "labels", f"the model also predicts {', '.join(extra)}, absent from the corpus: any "
                                     "such prediction rejects a pass")


def _content(report: CheckReport, study: Study, ledger_dir: Path | None) -> None:
    task = study_task(study)
    try:
        corpus = read_task_corpus(study.corpus.path, task)
        tuning = read_task_corpus(study.tuning.path, task)
        check_disjoint(corpus, tuning, str(study.path))
    except UserError as exc:
        _fail(report, "corpora", exc)
        return
    report.add("ok", "corpora", f"{len(corpus)} final inputs, {len(tuning)} tuning inputs, disjoint")
    try:
        check_warmup(study, tuning)
    except UserError as exc:
        _fail(report, "warm-up", exc)
    _model_fits(report, study, corpus, tuning)
    _task_inputs(report, study, corpus, tuning)
    try:
        lengths = token_lengths(study.model.path, [r.text for r in corpus])
    except UserError as exc:
        _fail(report, "tokenizer", exc)
        return
    counts: dict[str, int] = {}
    try:
        for n in lengths:
            name = bucket_for(n, study.length_buckets) if study.length_buckets else "all"
            counts[name] = counts.get(name, 0) + 1
    except UserError as exc:
        _fail(report, "length buckets", exc)
    else:
        report.add("ok", "tokenizer", f"longest input {max(lengths)} tokens; by bucket: "
                   + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for variant in study.variants():
        truncated = sum(1 for n in lengths if n > variant.max_length)
        if truncated:
            report.add("warn", "truncation", f"{variant.variant_id}: {truncated} input(s) longer than max_length "
                                             f"{variant.max_length} (counted in the manifest)")
    content_fp = content_fingerprint(corpus)
    seen = seen_entries(study, content_fp, ledger_dir)
    conflict = [e for e in seen if e.get("quality_rule") != quality_rule(study)]
    if conflict:
        try:  # the same refusal `run` gives, without recording anything
            raise_if_conflict(study, conflict[0], ledger_dir)
        except UserError as exc:
            _fail(report, "seen corpus", exc)
    else:
        state = f"evaluated before under this same rule ({len(seen)} campaign(s))" if seen else "not evaluated yet"
        report.add("ok", "seen corpus", f"final corpus {study.corpus.fingerprint}: {state}; ledger "
                                        f"{ledger_path(study, ledger_dir)}")


def _task_inputs(report: CheckReport, study: Study, corpus: tuple[Record, ...], tuning: tuple[Record, ...]) -> None:
    """The task's own input checks (an embedding's query sets and pooling), every problem on its own line."""
    task = study_task(study)
    try:
        task.check_inputs(study, corpus, tuning)
    except StudyErrors as exc:
        for error in exc.errors:
            _fail(report, "task inputs", error)
    except UserError as exc:
        _fail(report, "task inputs", exc)
    else:
        if task.option_tables:
            tables = ", ".join(f"[{name}]" for name in task.option_tables)
            report.add("ok", "task inputs", f"{task.name}: {tables} agree with the corpora and the model")


def _quality(report: CheckReport, study: Study) -> None:
    q = study.quality
    if q.tuned_on != "tuning":
        report.add("warn", "quality", f"minimum {q.minimum} was not tuned on the tuning split (tuned_on = "
                                      f"{q.tuned_on!r}): run `isocost tune {study.path}` before the campaign")
    else:
        extra = "".join(f", {key} {value}" for key, value in sorted(q.extra.items()))
        report.add("ok", "quality", f"{q.metric} minimum {q.minimum}, max_metric_drop {q.max_metric_drop}, "
                                    f"min_agreement {q.min_agreement}{extra}, reference {q.reference_variant}")


def _host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


#: The largest device memory a target may name (64 TiB): far above any card, far below float trouble.
MAX_TARGET_MEMORY_GIB = 65536.0


def check_target_memory(gib: float | None) -> None:
    """Refuse a ``--target-memory-gib`` that is not a finite number of GiB from 0.1 to 65536 (nan, inf, -1)."""
    if gib is not None and not (math.isfinite(gib) and 0.1 <= gib <= MAX_TARGET_MEMORY_GIB):
        raise UserError(f"--target-memory-gib must be a number of GiB from 0.1 to {MAX_TARGET_MEMORY_GIB:g}, got "
                        f"{gib}", "--target-memory-gib", "Give the target device's memory, e.g. 80 for an 80 GiB card.")


def _memory(report: CheckReport, study: Study, target_memory_gib: float | None) -> None:
    try:
        shape = ModelShape.read(study.model.path)
    except UserError as exc:
        _fail(report, "memory", exc)
        return
    stack = str(study.base["stack"])
    target: int | None
    if target_memory_gib is not None:
        target, source = int(target_memory_gib * 2**30), "--target-memory-gib"
    elif stack == "cpu":
        target, source = _host_memory_bytes(), "this machine's RAM"
    else:
        target, source = None, ""
    worst = max(study.variants(), key=lambda v: estimate(shape, v.precision, v.quantization, v.batch_size,
                                                         v.max_length, v.attention).total_bytes)
    est = estimate(shape, worst.precision, worst.quantization, worst.batch_size, worst.max_length, worst.attention)
    text = f"largest estimate {est.total_bytes / 2**20:,.1f} MiB ({worst.variant_id}; an estimate, not a measurement)"
    if target is None:
        report.add("warn", "memory", f"{text}; target device memory unknown: pass --target-memory-gib")
    elif est.total_bytes > target:
        report.add("FAIL", "memory", f"{text} exceeds {target / 2**30:.1f} GiB ({source}). Lower batch_size or "
                                     "max_length, or rent a card with more memory.")
    else:
        report.add("ok", "memory", f"{text} within {target / 2**30:.1f} GiB ({source})")


def _launcher(report: CheckReport, study: Study, kind: str = "auto",
              options: dict[str, dict[str, Any]] | None = None, run: RunOptions = RunOptions()) -> None:
    from runner.campaign.launcher_choice import choose_launcher

    missing = [str(p) for p in (study.corpus.path, study.model.path) if not p.exists()]
    if missing:  # already a FAIL above; the launcher's input check would only repeat it
        report.add("warn", "image", f"not checked: the inputs are missing ({', '.join(missing)})")
        return
    try:
        image = check_image_reference(run.image, "--image") if run.image is not None else None
        choice = choose_launcher(study, kind, image, options=options)
        _slurm_shared(choice.launcher, run.out)
    except UserError as exc:
        _fail(report, "launcher", exc)
        return
    if choice.notice:
        report.add("warn", "image", choice.notice)
    else:
        report.add("ok", *choice.launcher.check_line())
    _engines(report, study, choice.launcher)


def _engines(report: CheckReport, study: Study, launcher: Any) -> None:
    """The engines the variants run can start where the trials run (the process launcher finds each engine's
    interpreter and modules; other launchers' trials refuse a missing one at load, naming it)."""
    engines = {variant.engine for variant in study.variants()}
    problems = getattr(launcher, "engine_problems", None)
    if problems is None:
        report.add("ok", "engines", f"{', '.join(sorted(engines))}: checked by each trial at load")
        return
    errors = problems(engines)
    for error in errors:
        _fail(report, "engines", error)
    if not errors:
        report.add("ok", "engines", f"{', '.join(sorted(engines))}: modules found where the trials run")
    builds = getattr(launcher, "build_problems", None)
    for error in builds(study) if builds is not None else []:
        _fail(report, "torch build", error)
    scenario = getattr(launcher, "scenario_problems", None)
    if study.traffic is not None and scenario is not None:
        missing = scenario(study)
        for error in missing:
            _fail(report, "loadgen", error)
        if not missing:
            report.add("ok", "loadgen", "MLPerf LoadGen (mlperf_loadgen) found where the trials run")


def _slurm_shared(launcher: Any, out: Path | None) -> None:
    """A Slurm campaign's ``--slurm-shared`` exists and holds ``--out``: the pre-flight's own check, run here."""
    from runner.launch.kinds.slurm.options import SlurmOptions
    from runner.launch.kinds.slurm.preflight import check_shared

    options = getattr(launcher, "options", None)
    if isinstance(options, SlurmOptions) and options.shared is not None:
        check_shared(options, out)


def _hosts(report: CheckReport, study: Study, host_options: tuple[str, ...]) -> None:
    from runner.hosts.check import check_hosts
    from runner.hosts.spec import merge_hosts

    try:
        hosts = merge_hosts(host_options, None)
    except UserError as exc:
        _fail(report, "hosts", exc)
        return
    for result in check_hosts(hosts, str(study.base["stack"])):
        if result.problem:
            report.add("FAIL", f"host {result.name}", f"{result.url}: {result.problem}")
        else:
            report.add("ok", f"host {result.name}", f"{result.url} answers (engine {result.identity['engine_id']})")


def _schedule(report: CheckReport, study: Study, probe: bool) -> None:
    slots = rotated_schedule(study.variants(), study.campaign.repetitions)
    first = ", ".join(s.variant_id for s in slots[: len(study.variants())])
    report.add("ok", "schedule", f"{len(slots)} trials ({len(study.variants())} variants × "
                                 f"{study.campaign.repetitions} repetitions), rotated; first round: {first}")
    if study.traffic is not None:
        traffic = study.traffic
        rates = ", ".join(f"{rate:g}" for rate in traffic.rates_qps)
        each = "its variant's rate, one of " if len(traffic.rates_qps) > 1 else ""
        report.add("ok", "serving", f"each trial serves MLPerf LoadGen's Server scenario at {each}{rates} "
                                    f"qps: at least {traffic.min_query_count} queries and every corpus id equally "
                                    f"often ({traffic.queries_needed} decide its percentile; docs/serving.md)")
    if not probe:
        report.add("warn", "wall time", "not estimated: pass --probe to time one batch of the reference variant")
        return
    try:
        per_trial_s, text = _probe(study)
    except UserError as exc:
        _fail(report, "probe", exc)
        return
    report.add("ok", "wall time", f"about {len(slots) * per_trial_s / 60:,.1f} min for {len(slots)} trials "
                                  f"({per_trial_s:,.1f} s each; {text})")


def _probe(study: Study) -> tuple[float, str]:
    """One batch of the reference variant over tuning inputs in a fresh process → estimated seconds per trial."""
    from runner.launch.kinds.process.launcher import ProcessLauncher
    from runner.launch.launcher import TrialPaths

    reference = next(v for v in study.variants() if series_id(v.variant_id) == study.quality.reference_variant)
    tuning = read_task_corpus(study.tuning.path, study_task(study))
    n_corpus = len(read_task_corpus(study.corpus.path, study_task(study)))
    batch = tuning[: max(1, reference.batch_size)]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    trial_dir = study.path.parent / ".isocost" / "probe" / stamp
    make_dirs(trial_dir.parent, study.path.parent)
    trial_dir.mkdir()
    corpus_path = trial_dir / "probe-corpus.jsonl"
    write_text_atomic(corpus_path, "".join(json.dumps({"id": r.id, "text": r.text, "label": r.label}) + "\n"
                                           for r in batch), trial_dir)
    spec = TrialSpec(
        trial_id=f"probe-{stamp}", campaign_id=f"probe-{uuid.uuid4().hex}", study_sha256=study.sha256,
        variant=reference, repetition=1, order_index=1, attempt=1, corpus_path=str(corpus_path),
        corpus_fingerprint=fingerprint_path(corpus_path), model_path=str(study.model.path),
        model_fingerprint=study.model.fingerprint, warmup=study.warmup,
        warmup_texts=tuple(r.text for r in tuning[: study.warmup.inputs]), launcher="process",
        timeout_s=study.campaign.trial_timeout_s,
        task=study.task,
        task_options=dict(study.task_options),
        engine_settings=study.settings_of(reference.engine),
    )
    write_record(trial_dir / "spec.json", spec, trial_dir)
    result = ProcessLauncher().run(TrialPaths(trial_dir=trial_dir, corpus=corpus_path, model=study.model.path),
                                   study.campaign.trial_timeout_s)
    status = read_status(trial_dir)
    pass_s = status.phases.pass_s if status is not None else None
    if status is None or status.status != "ok" or pass_s is None:
        raise UserError(f"the one-batch probe ended {status.status if status else 'without a status'}",
                        str(trial_dir / "trial.log"), "Read the log: `isocost run` would fail the same way.")
    fixed_s = max(0.0, (result.wall_s or pass_s) - pass_s)
    per_input_s = pass_s / len(batch)
    per_trial = fixed_s + per_input_s * n_corpus
    return per_trial, (f"probe: {len(batch)} input(s) of {reference.variant_id} in {pass_s:.3f} s plus "
                       f"{fixed_s:.1f} s start-up, scaled to {n_corpus} inputs; other batch sizes and precisions "
                       "differ, so this is an estimate, never a measurement")
