"""Study file (TOML) → frozen, validated :class:`Study`.

A study is one decision question, fixed before anything is timed: the corpus,
the model, the quality rule, the warm-up rule, the variants. Unknown keys are
errors; every error names the file, the key and the fix.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.costing.job import Job, parse_job
from protocol.errors import UserError
from protocol.fingerprint import sha256_bytes
from protocol.records import VARIANT_FIELDS, Variant, WarmupRule
from protocol.safe_read import decode_text, read_bytes

STUDY_SCHEMA_VERSION = 1

METRICS = ("accuracy", "macro_f1")
REPLAY_KINDS = ("identical", "bounded", "quality")
STACKS = ("cpu", "cuda", "rocm")
PRECISIONS = ("fp32", "bf16", "fp16")
QUANTIZATIONS = ("none", "int8-dynamic")
PADDINGS = ("longest", "max_length")
GROUPINGS = ("none", "sort")
ATTENTIONS = ("sdpa", "eager")
#: ``halve-batch-on-oom``: after an out-of-memory error the failed batch is retried with half the
#: batch size (down to 1) inside the same measured pass; its time and OOM attempts count.
RESUMES = ("none", "halve-batch-on-oom")

_TOP_KEYS = {
    "schema_version": "the study format version (1)",
    "name": "a short name",
    "question": "the decision question, in words",
    "scenario": '"offline"',
    "expected_artifacts": "accepted corpora the job needs (declared before the campaign)",
    "corpus": "table: path, fingerprint",
    "tuning": "table: path, fingerprint",
    "model": "table: path, fingerprint",
    "length_buckets": "array of tables: name, max_tokens",
    "quality": "table: the quality rule",
    "warmup": "table: the warm-up rule",
    "campaign": "table: repetitions, order, trial_timeout_s, seeds, memory_limit_bytes, cpu_limit, "
                "output_file_limit_bytes",
    "base": "table: the base configuration",
    "series": "array of tables: name, field, values",
    "deadline": "table: start, end, tz, waiting_h (the access window the work must fit)",
    "costing": "table: catalog (optional path to a dated plan catalog CSV)",
    "images": "table: stack = \"REPO@sha256:…\" (run exactly this image for that stack)",
    "job": "table: the real job to project and price (see protocol/costing/job.py)",
}


@dataclass(frozen=True)
class DataRef:
    """A file or directory the study depends on, and its expected fingerprint."""

    path: Path
    fingerprint: str


@dataclass(frozen=True)
class LengthBucket:
    name: str
    max_tokens: int | None  # None: open-ended last bucket


@dataclass(frozen=True)
class QualityRule:
    metric: str
    minimum: float
    tuned_on: str
    reference_variant: str
    max_metric_drop: float
    min_agreement: float
    subgroups: tuple[str, ...]
    replay: str
    max_score_delta: float | None


#: Upper bounds of every study number that sizes work or memory: a typo (an extra zero or six) is an
#: error naming the bound, not a campaign that runs for a year or a trial that asks for a petabyte.
BOUNDS: dict[str, tuple[float, float]] = {
    "repetitions": (1, 1000),
    "threads": (1, 1024),
    "batch_size": (1, 65536),
    "max_length": (1, 1_048_576),
    "max_tokens": (1, 1_048_576),
    "seed": (0, 2**32 - 1),  # numpy's seed range; torch and random accept it too
    "seeds": (0, 100),  # how many common seeds
    "warmup_inputs": (0, 100_000),
    "warmup_runs": (0, 100),
    "trial_timeout_s": (0, 7 * 86400),
    "memory_limit_bytes": (6 * 2**20, 2**50),  # Docker's minimum .. 1 PiB
    "cpu_limit": (0.01, 4096),
    "output_file_limit_bytes": (2**16, 2**50),
    "expected_artifacts": (1, 1_000_000),
    "length_buckets": (0, 64),
    "passes": (1, 100_000),  # variants x repetitions
}


def _check_bound(name: str, value: float, where: str, *, shown: str = "") -> None:
    low, high = BOUNDS[name]
    if not low <= value <= high:
        raise UserError(f"{shown or name} must be between {_plain(low)} and {_plain(high)}, got {value!r}", where,
                        f"Use a value from {_plain(low)} to {_plain(high)}.")


def _plain(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else f"{number:g}"



@dataclass(frozen=True)
class CampaignRule:
    repetitions: int
    order: str
    trial_timeout_s: float | None
    seeds: tuple[int, ...] = ()  # common seeds: every variant runs under each, results kept apart
    memory_limit_bytes: int | None = None  # container memory limit (docker launcher)
    cpu_limit: float | None = None  # container CPU limit in CPUs (docker launcher); None: derived from the host
    output_file_limit_bytes: int | None = None  # largest file a trial container may write; None: the default


@dataclass(frozen=True)
class Deadline:
    """The access window the whole campaign must fit, as local times in ``tz``."""

    start: str
    end: str
    tz: str
    waiting_h: float  # declared waiting periods the rental must be held for


@dataclass(frozen=True)
class Costing:
    catalog: Path | None  # None: the shipped dated snapshot


@dataclass(frozen=True)
class Series:
    name: str
    field: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Study:
    """A validated study. ``sha256`` is the hash of the file's exact bytes."""

    path: Path
    sha256: str
    name: str
    question: str
    scenario: str
    expected_artifacts: int
    corpus: DataRef
    tuning: DataRef
    model: DataRef
    length_buckets: tuple[LengthBucket, ...]
    quality: QualityRule
    warmup: WarmupRule
    campaign: CampaignRule
    base: dict[str, Any]
    series: tuple[Series, ...]
    deadline: Deadline | None = None
    costing: Costing = Costing(catalog=None)
    images: tuple[tuple[str, str], ...] = ()  # (stack, image reference by digest)
    job: Job | None = None  # the real job to project (protocol/costing/job.py); None: price the campaign only

    def image_for(self, stack: str) -> str:
        return dict(self.images).get(stack, "")

    def variants(self) -> tuple[Variant, ...]:
        """Expand the series into variants, in declaration order, merging identical configs.

        With ``campaign.seeds``, every variant runs under each common seed as its own variant
        (``<id>@seed=<n>``): results per seed are kept apart, never pooled.
        """
        variants = self._series_variants()
        if not self.campaign.seeds:
            return variants
        return tuple(
            Variant(**{**_variant_kwargs(v), "variant_id": seeded_id(v.variant_id, seed), "seed": seed,
                       "series": v.series})
            for v in variants
            for seed in self.campaign.seeds
        )

    def reference_for(self, variant_id: str) -> str:
        """The reference variant a variant is compared with (the same seed, when seeds are declared)."""
        _, seed = split_seeded_id(variant_id)
        reference = self.quality.reference_variant
        return seeded_id(reference, seed) if seed is not None else reference

    def _series_variants(self) -> tuple[Variant, ...]:
        found: dict[tuple[Any, ...], Variant] = {}
        for series in self.series:
            for value in series.values:
                config = dict(self.base)
                config[series.field] = value
                key = tuple(config[name] for name in VARIANT_FIELDS)
                if key in found:
                    old = found[key]
                    found[key] = Variant(**{**_variant_kwargs(old), "series": (*old.series, series.name)})
                    continue
                variant_id = f"{series.field}={_value_text(value)}"
                found[key] = Variant(variant_id=variant_id, series=(series.name,), **config)
        return tuple(found.values())


def seeded_id(variant_id: str, seed: int | None) -> str:
    return variant_id if seed is None else f"{variant_id}@seed={seed}"


def split_seeded_id(variant_id: str) -> tuple[str, int | None]:
    base, sep, seed = variant_id.rpartition("@seed=")
    if sep and seed.isdigit():
        return base, int(seed)
    return variant_id, None


def _variant_kwargs(variant: Variant) -> dict[str, Any]:
    return {"variant_id": variant.variant_id, **variant.config()}


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class StudyErrors(UserError):
    """Several problems in one study file, reported together (one line each)."""

    def __init__(self, errors: list[UserError], source: str) -> None:
        self.errors = tuple(errors)
        lines = "\n".join(f"  - {error.message}" for error in errors)
        super().__init__(f"{len(errors)} problems in the study", source,
                         f"Fix each of these (then `isocost check STUDY` lists what is left):\n{lines}")


#: Tables and arrays of tables at the top level: a missing one is hinted as a table, never as a scalar.
_TABLE_HINTS = {
    "corpus": 'Add a table `[corpus]` with path = "…" and fingerprint = "sha256:…" (or start from `isocost init`).',
    "tuning": 'Add a table `[tuning]` with path = "…" and fingerprint = "sha256:…" (or start from `isocost init`).',
    "model": 'Add a table `[model]` with path = "…" and fingerprint = "sha256:…" (or start from `isocost init`).',
    "quality": "Add a table `[quality]` with metric, minimum, tuned_on and reference_variant "
               "(`isocost tune` proposes the minimum).",
    "base": "Add a table `[base]` declaring every variant field (the README lists them).",
    "series": "Add at least one array table `[[series]]` with name, field and values.",
}


class _Collector:
    """Runs each part of the study check, keeping every UserError instead of stopping at the first."""

    def __init__(self) -> None:
        self.errors: list[UserError] = []

    def attempt(self, check: Any, *args: Any, default: Any = None) -> Any:
        try:
            return check(*args)
        except StudyErrors as exc:
            self.errors.extend(exc.errors)
        except UserError as exc:
            self.errors.append(exc)
        return default


class _Reader:
    """Reads one table, remembering which keys were used, to reject the rest."""

    def __init__(self, source: str, table: dict[str, Any], prefix: str) -> None:
        self.source = source
        self.table = table
        self.prefix = prefix
        self.used: set[str] = set()

    def where(self, key: str) -> str:
        return f"{self.source}, key {self.prefix}{key}"

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ..., fix: str = "") -> Any:
        self.used.add(key)
        if key not in self.table:
            if default is ...:
                hint = _TABLE_HINTS.get(self.prefix + key, f"Add `{key} = …`.")
                raise UserError("missing required key", self.where(key), fix or hint)
            return default
        value = self.table[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            raise UserError(f"expected {_kind_name(kinds)}, got a boolean", self.where(key), fix)
        if int in kinds and float in kinds and isinstance(value, int):
            return value
        if not isinstance(value, kinds):
            raise UserError(
                f"expected {_kind_name(kinds)}, got {type(value).__name__} {value!r}", self.where(key), fix
            )
        return value

    def number(self, key: str, default: Any = ..., *, minimum: float | None = None) -> Any:
        """A finite number (an integer is accepted), at least ``minimum`` when given."""
        value = self.get(key, (int, float), default)
        if value is None:
            return None
        try:
            number = float(value)
        except OverflowError:
            raise UserError(f"{value!r} is too large", self.where(key)) from None
        if not math.isfinite(number):
            raise UserError(f"expected a finite number, got {value!r}", self.where(key))
        if minimum is not None and number < minimum:
            raise UserError(f"must be at least {minimum:g}, got {value!r}", self.where(key))
        return number

    def path(self, key: str, default: Any = ...) -> str | None:
        value = self.get(key, str, default)
        if value is not None and ("\x00" in value or not value.strip()):
            raise UserError("a path must be non-empty and contain no NUL byte", self.where(key))
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: Any = ...) -> str:
        value = self.get(key, str, default)
        if value not in choices:
            raise UserError(
                f"{value!r} is not one of {', '.join(choices)}", self.where(key), f"Use one of: {', '.join(choices)}."
            )
        return str(value)

    def require(self, keys: tuple[str, ...], fix: str = "") -> None:
        """Report every missing key of ``keys`` at once (not one per run)."""
        missing = [key for key in keys if key not in self.table]
        self.used.update(keys)
        errors = [UserError("missing required key", self.where(key),
                            fix or _TABLE_HINTS.get(self.prefix + key, f"Add `{key} = …`."))
                  for key in missing]
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise StudyErrors(errors, self.source)

    def finish(self, known: dict[str, str] | None = None) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            expected = ", ".join(sorted(known or self.used))
            raise StudyErrors([UserError(
                f"unknown key {key!r}",
                self.where(key),
                f"Remove it or fix its spelling; this table accepts: {expected}.",
            ) for key in unknown], self.source) if len(unknown) > 1 else UserError(
                f"unknown key {unknown[0]!r}",
                self.where(unknown[0]),
                f"Remove it or fix its spelling; this table accepts: {expected}.",
            )


def _kind_name(kinds: tuple[type, ...]) -> str:
    names = {
        str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "an array", dict: "a table"
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


#: A study is a page of TOML; a larger file is a mistake (or an attack on the parser).
MAX_STUDY_BYTES = 2**20


def load_study(path: Path | str) -> Study:
    """Read and validate a study file (a regular file of UTF-8 TOML, BOM accepted, at most 1 MiB)."""
    path = Path(path)
    fix = "Check the path, or run `isocost demo prepare`."
    raw_bytes = read_bytes(path, "study file", max_bytes=MAX_STUDY_BYTES, fix=fix)
    text = decode_text(raw_bytes, "study file", str(path))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"not valid TOML: {exc}", str(path), "Fix the syntax at that line.") from None
    except RecursionError:
        raise UserError("not valid TOML: nested too deeply", str(path), "A study nests tables a few levels deep.") \
            from None
    except ValueError as exc:  # an integer of thousands of digits (int max_str_digits), a date out of range
        raise UserError(f"not valid TOML: {str(exc)[:160]}", str(path), "Fix the value.") from None
    return parse_study(data, path=path.resolve(), sha256=sha256_bytes(raw_bytes))


def parse_study(data: dict[str, Any], *, path: Path, sha256: str) -> Study:
    """Validate every part of the study; all problems are reported together (:class:`StudyErrors`)."""
    source = str(path)
    top = _Reader(source, data, "")
    check = _Collector()
    version = top.get("schema_version", int)
    if version != STUDY_SCHEMA_VERSION:
        raise UserError(
            f"study schema_version {version} is not supported (this isocost reads {STUDY_SCHEMA_VERSION})",
            top.where("schema_version"),
            f"Set `schema_version = {STUDY_SCHEMA_VERSION}` and check the keys against the README.",
        )
    name = check.attempt(_name, top)
    question = check.attempt(_question, top)
    scenario = check.attempt(_scenario, top)
    expected_artifacts = check.attempt(_expected_artifacts, top)

    base_dir = path.parent
    corpus = check.attempt(_data_ref, top, "corpus", base_dir)
    tuning = check.attempt(_data_ref, top, "tuning", base_dir)
    model = check.attempt(_data_ref, top, "model", base_dir)
    if corpus is not None and tuning is not None and corpus.path == tuning.path:
        check.errors.append(UserError(
            "the tuning corpus is the final corpus",
            top.where("tuning.path"),
            "Tuning data must stay separate from the final comparison corpus.",
        ))
    buckets = check.attempt(_length_buckets, top)  # None: the buckets are wrong, already reported
    warmup = check.attempt(_warmup, top)
    campaign = check.attempt(_campaign, top)
    base = check.attempt(_base, top)
    series = check.attempt(_series, top, base)
    quality = check.attempt(_quality, top, buckets)
    deadline = check.attempt(_deadline, top)
    costing = check.attempt(_costing, top, base_dir)
    images = check.attempt(_images, top)
    top.used.add("job")
    job = check.attempt(parse_job, data.get("job"), source, tuple(b.name for b in buckets or ()), expected_artifacts)
    check.attempt(top.finish, _TOP_KEYS)
    if check.errors:
        raise check.errors[0] if len(check.errors) == 1 else StudyErrors(check.errors, source)

    study = Study(
        path=path,
        sha256=sha256,
        name=name,
        question=question,
        scenario=scenario,
        expected_artifacts=expected_artifacts,
        corpus=corpus,
        tuning=tuning,
        model=model,
        length_buckets=buckets,
        quality=quality,
        warmup=warmup,
        campaign=campaign,
        base=base,
        series=series,
        deadline=deadline,
        costing=costing,
        images=images,
        job=job,
    )
    if campaign.seeds and any(s.field == "seed" for s in series):
        raise UserError(
            "campaign.seeds and a series over `seed` both set seeds",
            f"{source}, key campaign.seeds",
            "Use one of them: common seeds for every variant, or a seed series.",
        )
    ids = [v.variant_id for v in study._series_variants()]
    passes = len(ids) * max(1, len(campaign.seeds)) * campaign.repetitions
    _check_bound("passes", passes, f"{source}, keys series and campaign.repetitions",
                 shown=f"the planned passes ({len(ids)} variants x {max(1, len(campaign.seeds))} seeds x "
                       f"{campaign.repetitions} repetitions)")
    if quality.reference_variant not in ids:
        raise UserError(
            f"reference variant {quality.reference_variant!r} is not one of the variants",
            f"{source}, key quality.reference_variant",
            f"Use one of: {', '.join(ids)}.",
        )
    return study


def _name(top: _Reader) -> str:
    name = top.get("name", str)
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise UserError("name must be non-empty letters, digits, '-', '_' or '.'", top.where("name"))
    return str(name)


def _question(top: _Reader) -> str:
    question = str(top.get("question", str)).strip()
    if not question:
        raise UserError("the question is empty", top.where("question"), "Write the decision question first.")
    return question


def _scenario(top: _Reader) -> str:
    scenario = top.get("scenario", str)
    if scenario != "offline":
        raise UserError(
            f"scenario {scenario!r} is out of scope",
            top.where("scenario"),
            'Only "offline" corpus processing is supported: an interactive scenario needs request '
            "arrivals, concurrency and latency bounds, which this protocol does not measure.",
        )
    return str(scenario)


def _expected_artifacts(top: _Reader) -> int:
    expected_artifacts = top.get("expected_artifacts", int, 1)
    if expected_artifacts < 1:
        raise UserError("expected_artifacts must be at least 1", top.where("expected_artifacts"))
    _check_bound("expected_artifacts", expected_artifacts, top.where("expected_artifacts"))
    return int(expected_artifacts)


def _table(top: _Reader, key: str, optional: bool = False) -> _Reader:
    table = top.get(key, dict, {} if optional else ...)
    return _Reader(top.source, table, f"{key}.")


def _data_ref(top: _Reader, key: str, base_dir: Path) -> DataRef:
    table = _table(top, key)
    table.require(("path", "fingerprint"))
    rel = str(table.path("path"))
    fingerprint = table.get(
        "fingerprint", str, fix="Add the expected `fingerprint = \"sha256:…\"` (see `isocost fingerprint PATH`)."
    )
    if not fingerprint.startswith("sha256:") or len(fingerprint) != 71:
        raise UserError(
            "fingerprint must be 'sha256:' followed by 64 hex digits",
            table.where("fingerprint"),
            "Compute it with `isocost fingerprint PATH`.",
        )
    table.finish({"path": "", "fingerprint": ""})
    resolved = _resolved(base_dir / rel, table.where("path")) if not Path(rel).is_absolute() else Path(rel)
    return DataRef(path=resolved, fingerprint=fingerprint)


def _length_buckets(top: _Reader) -> tuple[LengthBucket, ...]:
    items = top.get("length_buckets", list, [])
    _check_bound("length_buckets", len(items), top.where("length_buckets"), shown="the number of length buckets")
    buckets: list[LengthBucket] = []
    previous = 0
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise UserError("each length bucket must be a table", top.where(f"length_buckets[{i}]"))
        reader = _Reader(top.source, item, f"length_buckets[{i}].")
        name = reader.get("name", str)
        max_tokens = reader.get("max_tokens", int, None)
        reader.finish({"name": "", "max_tokens": ""})
        if max_tokens is None and i != len(items) - 1:
            raise UserError("only the last length bucket may be open-ended", reader.where("max_tokens"))
        if max_tokens is not None:
            _check_bound("max_tokens", max_tokens, reader.where("max_tokens"))
        if max_tokens is not None and max_tokens <= previous:
            raise UserError("length buckets must have increasing max_tokens", reader.where("max_tokens"))
        previous = max_tokens or previous
        buckets.append(LengthBucket(name=name, max_tokens=max_tokens))
    if len({b.name for b in buckets}) != len(buckets):
        raise UserError("length bucket names must be unique", top.where("length_buckets"))
    return tuple(buckets)


def _quality(top: _Reader, buckets: tuple[LengthBucket, ...] | None) -> QualityRule:
    q = _table(top, "quality")
    q.require(("metric", "minimum", "tuned_on", "reference_variant"))
    metric = q.choice("metric", METRICS)
    minimum = q.number("minimum")
    if not 0.0 <= minimum <= 1.0:
        raise UserError("minimum must be between 0 and 1", q.where("minimum"))
    tuned_on = q.get("tuned_on", str, fix='Say which data set the threshold was tuned on, e.g. "tuning".')
    if tuned_on == "corpus":
        raise UserError(
            "the threshold was tuned on the final comparison corpus",
            q.where("tuned_on"),
            "Tune thresholds on the tuning corpus, or declare a new independent evaluation corpus.",
        )
    reference = q.get("reference_variant", str)
    drop = q.number("max_metric_drop", 0.0, minimum=0.0)
    agreement = q.number("min_agreement", 0.0)
    if drop < 0 or not 0.0 <= agreement <= 1.0:
        raise UserError("max_metric_drop must be >= 0 and min_agreement in [0, 1]", q.where("max_metric_drop"))
    subgroups = tuple(q.get("subgroups", list, []))
    # buckets None: [[length_buckets]] failed its own check (reported there): do not add a derived error.
    allowed = {"label"} | ({"length_bucket"} if buckets is None or buckets else set())
    for group in subgroups:
        if not isinstance(group, str) or group not in allowed:
            raise UserError(
                f"unknown subgroup {group!r}",
                q.where("subgroups"),
                f"Use {', '.join(sorted(allowed))} (length_bucket needs [[length_buckets]]).",
            )
    replay = q.choice("replay", REPLAY_KINDS, "identical")
    delta = q.number("max_score_delta", None, minimum=0.0) if "max_score_delta" in q.table else None
    q.used.add("max_score_delta")
    if replay == "bounded" and delta is None:
        raise UserError('replay = "bounded" needs a bound', q.where("max_score_delta"), "Add `max_score_delta = …`.")
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
        max_score_delta=float(delta) if delta is not None else None,
    )


def _deadline(top: _Reader) -> Deadline | None:
    if "deadline" not in top.table:
        top.used.add("deadline")
        return None
    d = _table(top, "deadline")
    start = d.get("start", str, fix='Write a local time such as "2026-12-07T09:00".')
    end = d.get("end", str, fix='Write a local time such as "2026-12-11T09:00".')
    tz = d.get("tz", str, fix='Name an IANA time zone such as "Europe/Paris".')
    waiting = d.number("waiting_h", 0, minimum=0.0)
    d.finish()
    if waiting < 0:
        raise UserError("waiting_h must be >= 0", d.where("waiting_h"))
    from protocol.costing.calendar import access_window

    try:
        access_window(start, end, tz)
    except UserError as exc:
        raise UserError(exc.what, d.where("start/end/tz"), exc.fix) from None
    return Deadline(start=start, end=end, tz=tz, waiting_h=waiting)


def _costing(top: _Reader, base_dir: Path) -> Costing:
    if "costing" not in top.table:
        top.used.add("costing")
        return Costing(catalog=None)
    c = _table(top, "costing")
    catalog = c.path("catalog", None)
    c.finish()
    if catalog is None:
        return Costing(catalog=None)
    return Costing(catalog=_resolved(base_dir / catalog, c.where("catalog")))


def _resolved(path: Path, where: str) -> Path:
    """``path.resolve()``, with a symlink loop (RuntimeError on Python 3.11) as a user error."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:
        raise UserError(f"the path {str(path)!r} cannot be resolved: {exc}", where,
                        "Fix the path (a symbolic link loop?).") from None


def _images(top: _Reader) -> tuple[tuple[str, str], ...]:
    if "images" not in top.table:
        top.used.add("images")
        return ()
    table = _table(top, "images")
    found = []
    for stack in sorted(table.table):
        if stack not in STACKS:
            raise UserError(f"unknown stack {stack!r}", table.where(stack), f"Use one of: {', '.join(STACKS)}.")
        ref = table.get(stack, str)
        if "@sha256:" not in ref and not ref.startswith("sha256:"):
            raise UserError(
                f"image {ref!r} is not pinned by digest",
                table.where(stack),
                "Name it as REPO@sha256:<64 hex> (or a local image ID sha256:…) so every trial runs exactly it.",
            )
        found.append((stack, ref))
    table.finish()
    return tuple(found)


def _warmup(top: _Reader) -> WarmupRule:
    w = _table(top, "warmup", optional=True)
    source = w.choice("source", ("tuning",), "tuning")
    inputs = w.get("inputs", int, 8)
    runs = w.get("runs", int, 1)
    recompilation = w.choice("recompilation", ("warmup",), "warmup")
    w.finish()
    if inputs < 0 or runs < 0:
        raise UserError("warm-up inputs and runs must be >= 0", w.where("inputs"))
    _check_bound("warmup_inputs", inputs, w.where("inputs"), shown="inputs")
    _check_bound("warmup_runs", runs, w.where("runs"), shown="runs")
    return WarmupRule(source=source, inputs=inputs, runs=runs, recompilation=recompilation)


def _campaign(top: _Reader) -> CampaignRule:
    c = _table(top, "campaign", optional=True)
    repetitions = c.get("repetitions", int, 5)
    if repetitions < 1:
        raise UserError("repetitions must be at least 1", c.where("repetitions"))
    _check_bound("repetitions", repetitions, c.where("repetitions"))
    order = c.choice("order", ("rotate",), "rotate")
    timeout = c.get("trial_timeout_s", (int, float), None)
    if timeout is not None and (not math.isfinite(timeout) or timeout <= 0):
        raise UserError("trial_timeout_s must be a positive number of seconds", c.where("trial_timeout_s"))
    if timeout is not None:
        _check_bound("trial_timeout_s", timeout, c.where("trial_timeout_s"))
    seeds = c.get("seeds", list, [])
    _check_bound("seeds", len(seeds), c.where("seeds"), shown="the number of seeds")
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise UserError(f"seeds must be non-negative integers, got {seed!r}", c.where("seeds"))
        _check_bound("seed", seed, c.where("seeds"), shown="a seed")
    if len(set(seeds)) != len(seeds):
        raise UserError("a seed is listed twice", c.where("seeds"))
    memory = c.get("memory_limit_bytes", int, None)
    if memory is not None and memory < 6 * 2**20:
        raise UserError("memory_limit_bytes must be at least 6 MiB (Docker's minimum)", c.where("memory_limit_bytes"))
    if memory is not None:
        _check_bound("memory_limit_bytes", memory, c.where("memory_limit_bytes"))
    cpus = c.number("cpu_limit", None)
    if cpus is not None:
        _check_bound("cpu_limit", cpus, c.where("cpu_limit"))
    output_limit = c.get("output_file_limit_bytes", int, None)
    if output_limit is not None:
        _check_bound("output_file_limit_bytes", output_limit, c.where("output_file_limit_bytes"))
    c.finish()
    return CampaignRule(repetitions=repetitions, order=order, trial_timeout_s=timeout, seeds=tuple(seeds),
                        memory_limit_bytes=memory, cpu_limit=cpus, output_file_limit_bytes=output_limit)


_FIELD_RULES: dict[str, Any] = {
    "stack": STACKS,
    "device": ("cpu", "cuda"),
    "precision": PRECISIONS,
    "quantization": QUANTIZATIONS,
    "compile": bool,
    "attention": ATTENTIONS,
    "batch_size": int,
    "padding": PADDINGS,
    "max_length": int,
    "length_grouping": GROUPINGS,
    "resume": RESUMES,
    "threads": int,
    "seed": int,
    "deterministic": bool,
}


def _check_field(key: str, value: Any, where: str) -> Any:
    rule = _FIELD_RULES[key]
    if key == "seed":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UserError(f"expected a non-negative integer seed, got {value!r}", where)
        _check_bound("seed", value, where)
    elif isinstance(rule, tuple):
        if value not in rule:
            raise UserError(f"{value!r} is not one of {', '.join(rule)}", where, f"Use one of: {', '.join(rule)}.")
    elif rule is bool:
        if not isinstance(value, bool):
            raise UserError(f"expected true or false, got {value!r}", where)
    else:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(f"expected a positive integer, got {value!r}", where)
        _check_bound(key, value, where)
    return value


def _base(top: _Reader) -> dict[str, Any]:
    b = _table(top, "base")
    check = _Collector()
    check.attempt(b.require, VARIANT_FIELDS, "Every variant field must be declared in [base].")
    config: dict[str, Any] = {}
    for key in VARIANT_FIELDS:
        if key in b.table:
            config[key] = check.attempt(_check_field, key, b.table[key], b.where(key))
    check.attempt(b.finish, {k: "" for k in VARIANT_FIELDS})
    if not check.errors:
        check.attempt(_check_config, b, config)
    if check.errors:
        raise check.errors[0] if len(check.errors) == 1 else StudyErrors(check.errors, top.source)
    return config


def _check_config(reader: _Reader, config: dict[str, Any]) -> None:
    if config["stack"] == "cpu" and config["device"] != "cpu":
        raise UserError('stack "cpu" runs on device "cpu"', reader.where("device"))
    if config["stack"] in ("cuda", "rocm") and config["device"] != "cuda":
        raise UserError('GPU stacks run on device "cuda" (ROCm uses the same torch device)', reader.where("device"))
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


def _series(top: _Reader, base: dict[str, Any] | None) -> tuple[Series, ...]:
    items = top.get("series", list, fix="Add at least one array table `[[series]]` that varies one field "
                                        "(name, field, values).")
    if not items:
        raise UserError("no series declared", top.where("series"), "Declare at least one [[series]].")
    result: list[Series] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise UserError("each series must be a table", top.where(f"series[{i}]"))
        s = _Reader(top.source, item, f"series[{i}].")
        name = s.get("name", str)
        field_name = s.get("field", str)
        if field_name not in VARIANT_FIELDS:
            raise UserError(
                f"unknown variant field {field_name!r}",
                s.where("field"),
                f"A series varies exactly one of: {', '.join(VARIANT_FIELDS)}.",
            )
        values = s.get("values", list)
        s.finish({"name": "", "field": "", "values": ""})
        if not values:
            raise UserError("a series needs at least one value", s.where("values"))
        if len(set(map(repr, values))) != len(values):
            raise UserError("a series lists the same value twice", s.where("values"))
        for value in values:
            _check_field(field_name, value, s.where("values"))
            if base is not None:  # a broken [base] is reported on its own
                _check_config(s, {**base, field_name: value})
        result.append(Series(name=name, field=field_name, values=tuple(values)))
    if len({s.name for s in result}) != len(result):
        raise UserError("series names must be unique", top.where("series"))
    return tuple(result)


def bucket_for(n_tokens: int, buckets: tuple[LengthBucket, ...]) -> str:
    """Name of the length bucket holding ``n_tokens`` (upper bounds inclusive)."""
    for bucket in buckets:
        if bucket.max_tokens is None or n_tokens <= bucket.max_tokens:
            return bucket.name
    raise UserError(
        f"an input of {n_tokens} tokens is longer than every length bucket",
        "length_buckets",
        "Leave the last bucket open-ended (no max_tokens).",
    )
