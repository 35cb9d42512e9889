"""One parser per table of a study file: each reads its table, checks it and returns its record.

``parse_data_ref`` ([corpus], [tuning], [model]), ``parse_length_buckets``,
``parse_quality``, ``parse_deadline``, ``parse_costing``, ``parse_images``,
``parse_warmup``, ``parse_campaign``, ``parse_base`` and ``parse_series``;
:func:`check_field` and :func:`check_config` are the rules of a variant's
fields and of their combinations (a CPU stack runs on the CPU, fp16 is
GPU-only…). :func:`protocol.study.load.parse_study` runs them in order.

Example: ``parse_campaign(TableReader("study.toml", {"campaign": {}}, "")).repetitions == 5`` (the default).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from protocol.engines import engine_named, image_stacks
from protocol.errors import UserError
from protocol.io.names import check_image_reference
from protocol.records.stages import CONFIG_FIELDS, DEFAULT_ENGINE, VARIANT_FIELDS_1_0, WarmupRule
from protocol.study.model import (
    ATTENTIONS,
    GROUPINGS,
    METRICS,
    PADDINGS,
    PRECISIONS,
    QUANTIZATIONS,
    REPLAY_KINDS,
    RESUMES,
    STACKS,
    CampaignRule,
    Costing,
    DataRef,
    Deadline,
    LengthBucket,
    QualityRule,
    Series,
)
from protocol.study.reader import (
    ErrorCollector,
    StudyErrors,
    TableReader,
    check_bound,
    check_declared,
    resolved_path,
    sub_table,
)

#: A name that labels rows of tables (CSV, Markdown, HTML, terminal): plain, and never starting like a formula.
LABEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_label_name(name: str, what: str, where: str) -> str:
    """A length bucket's or a series' name: 1 to 64 letters, digits, '_', '.', '-', starting with a letter or digit."""
    if not LABEL_NAME.fullmatch(name):
        raise UserError(f"{what} must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit, "
                        f"got {name[:80]!a}", where, 'Use a plain name such as "short" or "batch".')
    return name


def parse_data_ref(top: TableReader, key: str, base_dir: Path) -> DataRef:
    table = sub_table(top, key)
    table.require(("path", "fingerprint"))
    rel = str(table.path("path"))
    fingerprint = table.declared(
        "fingerprint", fix="Add the expected `fingerprint = \"sha256:…\"` (see `isocost fingerprint PATH`)."
    )
    if not fingerprint.startswith("sha256:") or len(fingerprint) != 71:
        raise UserError(
            "fingerprint must be 'sha256:' followed by 64 hex digits",
            table.where("fingerprint"),
            "Compute it with `isocost fingerprint PATH`.",
        )
    table.finish()
    resolved = resolved_path(base_dir / rel, table.where("path")) if not Path(rel).is_absolute() else Path(rel)
    return DataRef(path=resolved, fingerprint=fingerprint)


def parse_length_buckets(top: TableReader) -> tuple[LengthBucket, ...]:
    items = top.get("length_buckets", list, [])
    check_bound("length_buckets", len(items), top.where("length_buckets"), shown="the number of length buckets")
    buckets: list[LengthBucket] = []
    previous = 0
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise UserError("each length bucket must be a table", top.where(f"length_buckets[{i}]"))
        reader = TableReader(top.source, item, f"length_buckets[{i}].")
        name = check_label_name(reader.declared("name"), "a length bucket name", reader.where("name"))
        max_tokens = reader.declared("max_tokens")
        reader.finish()
        if max_tokens is None and i != len(items) - 1:
            raise UserError("only the last length bucket may be open-ended", reader.where("max_tokens"))
        if max_tokens is not None and max_tokens <= previous:
            raise UserError("length buckets must have increasing max_tokens", reader.where("max_tokens"))
        previous = max_tokens or previous
        buckets.append(LengthBucket(name=name, max_tokens=max_tokens))
    if len({b.name for b in buckets}) != len(buckets):
        raise UserError("length bucket names must be unique", top.where("length_buckets"))
    return tuple(buckets)


def parse_quality(top: TableReader, buckets: tuple[LengthBucket, ...] | None, task: Any = None) -> QualityRule:
    """[quality]: the rule every task shares, the metrics and subgroups of the study's task, and the task's own
    keys (``task.parse_quality_extras``)."""
    q = sub_table(top, "quality")
    q.require(("metric", "minimum", "tuned_on", "reference_variant"))
    metric = q.choice("metric", task.metrics if task is not None else METRICS)
    minimum = q.declared("minimum")
    tuned_on = q.declared("tuned_on", fix='Say which data set the threshold was tuned on, e.g. "tuning".')
    if tuned_on == "corpus":
        raise UserError(
            "the threshold was tuned on the final comparison corpus",
            q.where("tuned_on"),
            "Tune thresholds on the tuning corpus, or declare a new independent evaluation corpus.",
        )
    reference = q.declared("reference_variant")
    drop, agreement = q.declared("max_metric_drop"), q.declared("min_agreement")
    _refuse_vacuous_rule(minimum, drop, agreement, q)
    subgroups = tuple(q.declared("subgroups"))
    # buckets None: [[length_buckets]] failed its own check (reported there): do not add a derived error.
    known = set(task.subgroups) if task is not None else {"label", "length_bucket"}
    allowed = (known - {"length_bucket"}) | ({"length_bucket"} & known if buckets is None or buckets else set())
    for group in subgroups:
        if not isinstance(group, str) or group not in allowed:
            raise UserError(
                f"unknown subgroup {group!r}",
                q.where("subgroups"),
                f"Use {', '.join(sorted(allowed))} (length_bucket needs [[length_buckets]]).",
            )
    replay = q.choice("replay", REPLAY_KINDS)
    delta = q.declared("max_score_delta")
    if replay == "bounded" and delta is None:
        raise UserError('replay = "bounded" needs a bound', q.where("max_score_delta"), "Add `max_score_delta = …`.")
    extra = task.parse_quality_extras(q) if task is not None else {}
    q.finish()
    return QualityRule(
        metric=metric,
        minimum=minimum,
        tuned_on=tuned_on,
        reference_variant=reference,
        max_metric_drop=drop,
        min_agreement=agreement,
        subgroups=subgroups,
        replay=replay,
        max_score_delta=delta,
        extra=extra,
    )


def _refuse_vacuous_rule(minimum: float, drop: float, agreement: float, q: TableReader) -> None:
    """Refuse a rule under which every variant is equivalent to the reference (what a one-input tuning split
    would propose): a drop of 1 with an agreement of 0 lets any labels through, and with a minimum of 0 any pass."""
    if drop >= 1.0 and agreement <= 0.0:
        accepts = "every pass" if minimum <= 0.0 else "every variant as equivalent to the reference"
        raise UserError(
            f"the quality rule accepts {accepts} (minimum {minimum}, max_metric_drop {drop}, min_agreement "
            f"{agreement})",
            q.where("max_metric_drop"),
            "Set the tolerances with `isocost tune` on a tuning split large enough for the rule, or write a "
            "max_metric_drop below 1 or a min_agreement above 0.",
        )


def parse_deadline(top: TableReader) -> Deadline | None:
    if "deadline" not in top.table:
        top.used.add("deadline")
        return None
    d = sub_table(top, "deadline")
    start = d.declared("start", fix='Write a local time such as "2026-12-07T09:00".')
    end = d.declared("end", fix='Write a local time such as "2026-12-11T09:00".')
    tz = d.declared("tz", fix='Name an IANA time zone such as "Europe/Paris".')
    waiting = d.declared("waiting_h")
    d.finish()
    from protocol.costing.calendar import access_window

    try:
        access_window(start, end, tz)
    except UserError as exc:
        raise UserError(exc.what, d.where("start/end/tz"), exc.fix) from None
    return Deadline(start=start, end=end, tz=tz, waiting_h=waiting)


def parse_costing(top: TableReader, base_dir: Path) -> Costing:
    if "costing" not in top.table:
        top.used.add("costing")
        return Costing(catalog=None)
    c = sub_table(top, "costing")
    catalog = c.path("catalog")
    c.finish()
    if catalog is None:
        return Costing(catalog=None)
    return Costing(catalog=resolved_path(base_dir / catalog, c.where("catalog")))


def parse_images(top: TableReader) -> tuple[tuple[str, str], ...]:
    if "images" not in top.table:
        top.used.add("images")
        return ()
    table = sub_table(top, "images")
    found = []
    allowed = image_stacks(STACKS)
    for stack in sorted(table.table):
        if stack not in allowed:
            raise UserError(f"unknown stack {stack!r}", table.where(stack), f"Use one of: {', '.join(allowed)}.")
        ref = check_image_reference(table.get(stack, str), table.where(stack))
        if "@sha256:" not in ref and not ref.startswith("sha256:"):
            raise UserError(
                f"image {ref!r} is not pinned by digest",
                table.where(stack),
                "Name it as REPO@sha256:<64 hex> (or a local image ID sha256:…) so every trial runs exactly it.",
            )
        found.append((stack, ref))
    table.finish()
    return tuple(found)


def parse_warmup(top: TableReader) -> WarmupRule:
    w = sub_table(top, "warmup", optional=True)
    source = w.choice("source", ("tuning",))
    inputs, runs = w.declared("inputs"), w.declared("runs")
    recompilation = w.choice("recompilation", ("warmup",))
    w.finish()
    return WarmupRule(source=source, inputs=inputs, runs=runs, recompilation=recompilation)


def parse_campaign(top: TableReader) -> CampaignRule:
    c = sub_table(top, "campaign", optional=True)
    repetitions = c.declared("repetitions")
    order = c.choice("order", ("rotate",))
    timeout = c.declared("trial_timeout_s")
    seeds = c.declared("seeds")
    check_bound("seeds", len(seeds), c.where("seeds"), shown="the number of seeds")
    for seed in seeds:
        check_declared("base.seed", seed, c.where("seeds"), shown="a seed")
    if len(set(seeds)) != len(seeds):
        raise UserError("a seed is listed twice", c.where("seeds"))
    memory, cpus = c.declared("memory_limit_bytes"), c.declared("cpu_limit")
    output_limit = c.declared("output_file_limit_bytes")
    c.finish()
    return CampaignRule(repetitions=repetitions, order=order, trial_timeout_s=timeout, seeds=tuple(seeds),
                        memory_limit_bytes=memory, cpu_limit=cpus, output_file_limit_bytes=output_limit)


#: The variant fields that take one of a few words; every other field is checked as declared ([base] in
#: :data:`protocol.study.schema.KEYS`).
FIELD_CHOICES: dict[str, tuple[str, ...]] = {
    "stack": STACKS, "device": ("cpu", "cuda"), "precision": PRECISIONS, "quantization": QUANTIZATIONS,
    "attention": ATTENTIONS, "padding": PADDINGS, "length_grouping": GROUPINGS, "resume": RESUMES,
}


def check_field(key: str, value: Any, where: str) -> Any:
    """A variant field's value (in [base] or a series): one of its choices, or of its declared type and bounds."""
    if key == "engine":
        return engine_named(check_declared("base.engine", value, where), where).name
    choices = FIELD_CHOICES.get(key)
    if choices is None:
        return check_declared(f"base.{key}", value, where)
    if value not in choices:
        raise UserError(f"{value!r} is not one of {', '.join(choices)}", where, f"Use one of: {', '.join(choices)}.")
    return value


def parse_base(top: TableReader) -> dict[str, Any]:
    b = sub_table(top, "base")
    check = ErrorCollector()
    check.attempt(b.require, VARIANT_FIELDS_1_0, "Every variant field must be declared in [base] (engine: optional).")
    config: dict[str, Any] = {"engine": DEFAULT_ENGINE}
    b.used.update(key for key in CONFIG_FIELDS if key in b.table)
    for key in CONFIG_FIELDS:
        if key in b.table:
            config[key] = check.attempt(check_field, key, b.table[key], b.where(key))
    check.attempt(b.finish, {k: "" for k in CONFIG_FIELDS})
    if not check.errors:
        check.attempt(check_config, b, config)
    if check.errors:
        raise check.errors[0] if len(check.errors) == 1 else StudyErrors(check.errors, top.source)
    return config


def check_config(reader: TableReader, config: dict[str, Any]) -> None:
    if config["stack"] == "cpu" and config["device"] != "cpu":
        raise UserError('stack "cpu" runs on device "cpu"', reader.where("device"))
    if config["stack"] == "rocm" and config["device"] != "cuda":  # ROCm's torch device is "cuda" too
        raise UserError('stack "rocm" runs on device "cuda"', reader.where("device"),
                        'The CUDA image runs device "cpu" too (stack "cuda"); the ROCm image is GPU-only.')
    if config["quantization"] == "int8-dynamic" and config["device"] != "cpu":
        raise UserError(
            "int8-dynamic quantization (torch dynamic quantization) runs on CPU only",
            reader.where("quantization"),
            "Use it in a CPU variant, or compare fp16/bf16 on the GPU.",
        )
    if config["device"] == "cpu" and config["precision"] == "fp16":
        raise UserError(
            "fp16 is GPU-only and is refused on CPU",
            reader.where("precision"),
            "Use fp32 or bf16 on CPU, or run this variant on a GPU stack.",
        )


def parse_engines(top: TableReader) -> dict[str, dict[str, Any]]:
    """``[engines.NAME]`` tables: each named engine's settings as declared (its declared defaults filled in)."""
    engines = sub_table(top, "engines", optional=True)
    found: dict[str, dict[str, Any]] = {}
    for name in list(engines.table):
        engine = engine_named(name, engines.where(name))
        reader = TableReader(top.source, engines.get(name, dict), f"engines.{name}.")
        found[name] = {key: reader.declared(key) for key in engine.setting_names()}
        reader.finish(dict.fromkeys(engine.setting_names(), ""))
    engines.used.update(engines.table)
    return found


def parse_series(top: TableReader, base: dict[str, Any] | None) -> tuple[Series, ...]:
    items = top.get("series", list, fix="Add at least one array table `[[series]]` that varies one field "
                                        "(name, field, values).")
    if not items:
        raise UserError("no series declared", top.where("series"), "Declare at least one [[series]].")
    result: list[Series] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise UserError("each series must be a table", top.where(f"series[{i}]"))
        s = TableReader(top.source, item, f"series[{i}].")
        name = check_label_name(s.declared("name"), "a series name", s.where("name"))
        field_name = s.declared("field")
        if field_name == "rate_qps":
            raise UserError("a series of target rates is declared in [traffic], not in [[series]]", s.where("field"),
                            "Declare the rates as [traffic] rates_qps = [2.0, 4.0] in a scenario = \"server\" study: "
                            "each configuration then runs once per rate (docs/serving.md).")
        if field_name not in CONFIG_FIELDS:
            raise UserError(
                f"unknown variant field {field_name!r}",
                s.where("field"),
                f"A series varies exactly one of: {', '.join(CONFIG_FIELDS)}.",
            )
        values = s.declared("values")
        s.finish()
        if not values:
            raise UserError("a series needs at least one value", s.where("values"))
        if len(set(map(repr, values))) != len(values):
            raise UserError("a series lists the same value twice", s.where("values"))
        for value in values:
            check_field(field_name, value, s.where("values"))
            if base is not None:  # a broken [base] is reported on its own
                check_config(s, {**base, field_name: value})
        result.append(Series(name=name, field=field_name, values=tuple(values)))
    if len({s.name for s in result}) != len(result):
        raise UserError("series names must be unique", top.where("series"))
    return tuple(result)


