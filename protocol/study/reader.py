"""Reading a study's TOML tables key by key, keeping every error instead of stopping at the first.

:class:`TableReader` reads one table (type checks, finite numbers, choices,
paths) and remembers the keys it used so that :meth:`TableReader.finish`
refuses the unknown ones; :class:`ErrorCollector` runs one check after
another and keeps each :class:`~protocol.errors.UserError`;
:class:`StudyErrors` reports them together. :meth:`TableReader.declared` reads a key
as :data:`protocol.study.schema.KEYS` declares it (type, default, bounds); :data:`BOUNDS` caps the counts
that size work (:func:`check_bound`).

Example: ``TableReader("study.toml", {"repetitions": 0}, "campaign.").get("repetitions", int)`` is ``0``;
``.declared("repetitions")`` raises ``UserError("repetitions must be between 1 and 1000, got 0 …")``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from protocol.errors import UserError
from protocol.study.keys import StudyKey
from protocol.study.schema import KEYS, bound

#: Bounds of the counts a study sizes work by (every key's own bounds are declared with it, in
#: :data:`protocol.study.schema.KEYS`; batch_size and max_length bound ``isocost memory``'s options too).
BOUNDS: dict[str, tuple[float, float]] = {
    "seeds": (0, 100),  # how many common seeds
    "length_buckets": (0, 64),
    "passes": (1, 100_000),  # variants x repetitions
    **{name: (bound(f"base.{name}").low, bound(f"base.{name}").high) for name in ("batch_size", "max_length")},
}
#: The Python types of each declared kind (a "number" may be written as an integer).
KIND_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,), "number": (int, float), "string": (str,), "boolean": (bool,), "array": (list,),
    "table": (dict,),
}


def check_bound(name: str, value: float, where: str, *, shown: str = "") -> None:
    low, high = BOUNDS[name]
    if not low <= value <= high:
        raise UserError(f"{shown or name} must be between {_plain(low)} and {_plain(high)}, got {value!r}", where,
                        f"Use a value from {_plain(low)} to {_plain(high)}.")


def check_declared(key: str, value: Any, where: str, *, fix: str = "", shown: str = "") -> Any:
    """``value`` of the declared ``key`` (``"campaign.repetitions"``): of its kind, a finite number (returned as a
    float), within its bounds (the error names them and the key's meaning).

    Example: ``check_declared("campaign.repetitions", 0, "here")`` raises
    ``UserError("repetitions must be between 1 and 1000, got 0 …")``.
    """
    entry = KEYS[key]
    value = checked_type(value, KIND_TYPES[entry.kind], where, fix)
    if entry.kind == "number":
        value = _finite(value, where)
    return within_bounds(entry, value, where, shown or key.rpartition(".")[2])


def within_bounds(entry: StudyKey, value: Any, where: str, name: str) -> Any:
    """``value`` when ``entry``'s bounds (if any) hold it; else the error naming ``name``, the bounds, the meaning."""
    limits = entry.bounds
    if limits is None or (limits.low < value < limits.high or
                          (value == limits.low and not limits.low_open) or
                          (value == limits.high and not limits.high_open)):
        return value
    low, high = (f"{_plain(end)}{' (excluded)' if is_open else ''}"
                 for end, is_open in ((limits.low, limits.low_open), (limits.high, limits.high_open)))
    raise UserError(f"{name} must be between {low} and {high}, got {value!r}", where,
                    f"Use a value from {low} to {high} ({entry.meaning}).")


def checked_type(value: Any, kinds: tuple[type, ...], where: str, fix: str = "") -> Any:
    if isinstance(value, bool) and bool not in kinds:
        raise UserError(f"expected {kind_name(kinds)}, got a boolean", where, fix)
    if not isinstance(value, kinds):
        raise UserError(f"expected {kind_name(kinds)}, got {type(value).__name__} {value!r}", where, fix)
    return value


def _finite(value: int | float, where: str) -> float:
    try:
        number = float(value)
    except OverflowError:
        raise UserError(f"{value!r} is too large", where) from None
    if not math.isfinite(number):
        raise UserError(f"expected a finite number, got {value!r}", where)
    return number


def _plain(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else f"{number:g}"


class StudyErrors(UserError):
    """Several problems in one study file, reported together (one line each)."""

    def __init__(self, errors: list[UserError], source: str) -> None:
        self.errors = tuple(errors)
        lines = "\n".join(f"  - {error.message}" for error in errors)
        super().__init__(f"{len(errors)} problems in the study", source,
                         f"Fix each of these (then `isocost check STUDY` lists what is left):\n{lines}")


#: Tables and arrays of tables at the top level: a missing one is hinted as a table, never as a scalar.
TABLE_HINTS = {
    "corpus": 'Add a table `[corpus]` with path = "…" and fingerprint = "sha256:…" (or start from `isocost init`).',
    "tuning": 'Add a table `[tuning]` with path = "…" and fingerprint = "sha256:…" (or start from `isocost init`).',
    "model": 'Add a table `[model]` with path = "…" and fingerprint = "sha256:…" (or start from `isocost init`).',
    "quality": "Add a table `[quality]` with metric, minimum, tuned_on and reference_variant "
               "(`isocost tune` proposes the minimum).",
    "base": "Add a table `[base]` declaring every variant field (docs/study.md lists them).",
    "series": "Add at least one array table `[[series]]` with name, field and values.",
}


class ErrorCollector:
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


class TableReader:
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
                hint = TABLE_HINTS.get(self.prefix + key, f"Add `{key} = …`.")
                raise UserError("missing required key", self.where(key), fix or hint)
            return default
        return checked_type(self.table[key], kind if isinstance(kind, tuple) else (kind,), self.where(key), fix)

    def declared(self, key: str, fix: str = "") -> Any:
        """``key`` as :data:`protocol.study.schema.KEYS` declares it (:func:`check_declared`), its declared default
        when absent (None for a default in words, a "missing required key" for a required one).

        Example: ``TableReader("s.toml", {}, "campaign.").declared("repetitions") == 5``.
        """
        name = re.sub(r"\[\d+\]", "[]", self.prefix) + key
        value = self.get(key, KIND_TYPES[KEYS[name].kind], KEYS[name].value, fix)
        return None if value is None else check_declared(name, value, self.where(key), fix=fix)

    def number(self, key: str, default: Any = ...) -> Any:
        """A finite number (an integer is accepted), as a float."""
        value = self.get(key, (int, float), default)
        return None if value is None else _finite(value, self.where(key))

    def path(self, key: str, default: Any = ...) -> str | None:
        """A path (``default`` omitted: the declared key's default)."""
        value = self.declared(key) if default is ... else self.get(key, str, default)
        if value is not None and ("\x00" in value or not value.strip()):
            raise UserError("a path must be non-empty and contain no NUL byte", self.where(key))
        return value

    def choice(self, key: str, choices: tuple[str, ...], default: Any = ...) -> str:
        """One of ``choices`` (``default`` omitted: the declared key's default)."""
        value = self.declared(key) if default is ... else self.get(key, str, default)
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
                            fix or TABLE_HINTS.get(self.prefix + key, f"Add `{key} = …`."))
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


def kind_name(kinds: tuple[type, ...]) -> str:
    names = {
        str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "an array", dict: "a table"
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def sub_table(top: TableReader, key: str, optional: bool = False) -> TableReader:
    table = top.get(key, dict, {} if optional else ...)
    return TableReader(top.source, table, f"{key}.")


def resolved_path(path: Path, where: str) -> Path:
    """``path.resolve()``, with a symlink loop (RuntimeError on Python 3.11) as a user error."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:
        raise UserError(f"the path {str(path)!r} cannot be resolved: {exc}", where,
                        "Fix the path (a symbolic link loop?).") from None


