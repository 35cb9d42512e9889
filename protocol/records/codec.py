"""One record codec: a frozen dataclass ↔ a JSON-ready dict, driven by the dataclass's type hints.

Every file isocost writes and reads as JSON goes through :func:`to_dict` and :func:`from_dict`
(:func:`read_record` for a file, :func:`parse_record` for a line). A record class that is a file of
its own declares ``CODEC: ClassVar[Schema]``: the ``schema_version`` it writes, the versions it reads
(an older one is lifted to the current keys by ``Schema.upgrade``) and how the file is named in
errors. Reading refuses, each as a :class:`UserError` naming the file and the key:

- a ``schema_version`` the record does not read;
- a key the record does not have (written by a newer isocost, or edited);
- a required key (a field without a default) that is missing;
- a value of the wrong type (``int`` is never ``bool``; a ``float`` field takes a JSON integer);
- a number outside its field's domain (:mod:`protocol.records.domains`): never infinite or NaN, and within the range
  its unit gives (``load_s`` seconds ≥ 0, ``peak_rss_bytes`` below 2^60) or the field declares
  (``options(domain=…)``). A sealed file is unchanged, not possible: this is what makes it possible.

The types understood: ``str``, ``int``, ``float``, ``bool``, ``None``, ``X | None``, unions,
``Literal[...]``, enums (by value), ``tuple[X, ...]``, ``tuple[X, Y]``, ``list[X]``, ``dict[str, X]``,
nested dataclasses, ``Any`` (any JSON value, kept as read), ``Mapping[str, X]`` (as ``dict``), ``Decimal``
(money: text with at least two decimals, ``"220.00"``, read from text only) and ``datetime.date`` (ISO text,
``"2026-09-30"``). Writing turns tuples into lists, enums into their values and nested records into dicts;
``Schema.omit_none`` leaves out fields that are None.

A field may say how it is written (:func:`options`): under another key, by its own :class:`Convert` (a time
written in a format of its own), or not at all. A record may write values derived from its fields beside them
(``Schema.derived``: property names; ``Schema.extra``: a function of the record); read back, each must equal
what the decoded record derives, so a hand-edited total is refused naming its key.

Example::

    status = read_record(trial_dir / "status.json", TrialStatus)
    # UserError: key 'phases.load_s' must be a number, got 'x' (…/status.json). Restore the file …
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext
from pathlib import Path
from typing import Any, TypeVar, Union

from protocol.errors import UserError
from protocol.io.jsonio import parse_json, read_json, write_json_atomic
from protocol.records.domains import Domain, domain_of

T = TypeVar("T")

VERSION_KEY = "schema_version"
_VERSION_FIX = "Use the isocost version that wrote it, or re-run the stage that produced it."
PRE_RELEASE_FIX = "Re-run with isocost 0.x to finish or read it, or start a new campaign: isocost run STUDY --out NEW."
_UNKNOWN_FIX = "Was it written by a newer isocost? Read it with the version that wrote it."
_CONTENT_FIX = "It was changed after isocost wrote it: restore it from a backup or bundle, or re-run its stage."


@dataclass(frozen=True)
class Schema:
    """How a record is versioned on disk.

    ``kind`` names the file in messages (``"status.json"``). ``version`` is written (None: the record is part of a file
    and carries none); ``reads`` are the versions read. ``upgrade(data, version)`` turns the dict of an older version
    into the current keys (after the version check, before the keys are checked). ``check(record)`` returns what is
    wrong with a decoded record beyond its types ("" when nothing), reported at the record's key. ``unversioned``: the
    version a dict without ``schema_version`` is (a format that carried none before its first bump). ``fix``: what a
    content error tells the reader to do (the :func:`from_dict` argument wins; the default says to restore the file or
    re-run its stage). ``pre_release``: isocost 0.x's versions (:data:`PRE_RELEASE_FIX`). ``derived``: attributes
    (properties) written beside the fields; ``extra(record)``: more keys written beside them (a note, a figure in
    another shape). Neither is read into the record: read back, each must equal what the decoded record gives, else it
    is refused (so a record reads back only when they depend on written fields alone).
    """

    kind: str
    version: int | None = None
    reads: tuple[int, ...] = ()
    upgrade: Callable[[dict[str, Any], int], dict[str, Any]] | None = None
    omit_none: bool = False
    check: Callable[[Any], str] | None = None
    unversioned: int | None = None
    fix: str = ""
    pre_release: tuple[int, ...] = ()
    derived: tuple[str, ...] = ()
    extra: Callable[[Any], dict[str, Any]] | None = None

    def read_versions(self) -> tuple[int, ...]:
        return self.reads or ((self.version,) if self.version is not None else ())

    @property
    def versioned(self) -> bool:
        return self.version is not None


class _Mismatch(Exception):
    """A value is not of its declared type (turned into a UserError where the file is known)."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(what)


#: Field metadata: leave the field out of the dict when it is None (``field(default=None, metadata=OMIT_NONE)``).
OMIT_NONE = {"codec_omit_none": True}
#: Decimal digits a ``Decimal`` is formatted with (money: exact to the cent below 10^90).
_DECIMAL_DIGITS = 100
_CENT = Decimal("0.01")


@dataclass(frozen=True)
class Convert:
    """A field value written by its own functions: ``write(value)`` gives the JSON value, ``read(json)`` the value
    back (raising ``ValueError``, ``TypeError`` or ``KeyError`` on a bad one: refused as "must be ``words``").
    None stays None. Example: ``Convert(format_offset, parse_offset, "a UTC offset like '+01:00'")``."""

    write: Callable[[Any], Any]
    read: Callable[[Any], Any]
    words: str


def options(*, key: str | None = None, convert: Convert | None = None, written: bool = True,
            domain: Domain | None = None) -> dict[str, Any]:
    """Field metadata: ``key`` the name written and read (``field(metadata=options(key="date"))``), ``convert``
    its own format, ``written=False`` neither written nor read (read back, it takes its default; without one the
    record is written only, its keys grouped by ``Schema.extra``), ``domain`` the range its numbers must lie in
    (default: the one its unit gives, :func:`protocol.records.domains.unit_domain`)."""
    return {"codec_key": key, "codec_convert": convert, "codec_skip": not written, "codec_domain": domain}


def decimal_text(amount: Decimal) -> str:
    """A ``Decimal`` as the codec writes it: at least two decimals, nothing rounded away.

    Example: ``decimal_text(Decimal("2071")) == "2071.00"``; ``decimal_text(Decimal("0.125")) == "0.125"``.
    """
    with localcontext(prec=_DECIMAL_DIGITS):
        if amount == amount.quantize(_CENT):
            return str(amount.quantize(_CENT))
    return str(amount)


def schema_of(cls: type) -> Schema | None:
    schema = getattr(cls, "CODEC", None)
    return schema if isinstance(schema, Schema) else None


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


# -- writing ------------------------------------------------------------------------------------------


def to_dict(record: Any) -> dict[str, Any]:
    """A dataclass record as a JSON-ready dict (with its ``schema_version`` when its class declares one)."""
    schema, plan = _plan(type(record))
    data: dict[str, Any] = {}
    for name, key, convert, omit_none in plan:
        value = getattr(record, name)
        if value is None:
            if not omit_none:
                data[key] = None
        elif convert is not None:
            data[key] = convert.write(value)
        else:
            data[key] = value if type(value) in _SCALARS else _encode(value)
    if schema is not None:
        data.update(_derived(schema, record))
    if schema is not None and schema.versioned and VERSION_KEY not in data:
        data[VERSION_KEY] = schema.version
    return data


#: What a record writes, per class: its schema, and (field name, key, own format, left out when None) of each
#: field it writes (worked out once: a summary writes tens of thousands of records of one class).
_PLANS: dict[type, tuple[Schema | None, tuple[tuple[str, str, Convert | None, bool], ...]]] = {}
#: Values written as they are.
_SCALARS = frozenset((str, int, float, bool))


def _plan(cls: type) -> tuple[Schema | None, tuple[tuple[str, str, Convert | None, bool], ...]]:
    if cls not in _PLANS:
        schema = schema_of(cls)
        omit = schema is not None and schema.omit_none
        _PLANS[cls] = schema, tuple(
            (spec.name, spec.metadata.get("codec_key") or spec.name, spec.metadata.get("codec_convert"),
             omit or bool(spec.metadata.get("codec_omit_none")))
            for spec in dataclasses.fields(cls) if not spec.metadata.get("codec_skip"))
    return _PLANS[cls]


def _derived(schema: Schema, record: Any) -> dict[str, Any]:
    data = {name: _encode(getattr(record, name)) for name in schema.derived}
    if schema.extra is not None:
        data.update({key: _encode(value) for key, value in schema.extra(record).items()})
    return data


def _encode(value: Any) -> Any:
    if value is None or type(value) in _SCALARS:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_encode(item) for item in value]
    if isinstance(value, dict):
        return {key: _encode(item) for key, item in value.items()}
    if isinstance(value, Decimal):
        return decimal_text(value)
    if type(value) is datetime.date:
        return value.isoformat()
    return value


def write_record(path: Path, record: Any, root: Path | None = None, fix: str = "") -> None:
    """Write a record as sorted JSON, atomically (see :func:`protocol.io.jsonio.write_json_atomic`)."""
    write_json_atomic(path, to_dict(record), root, fix)


# -- reading ------------------------------------------------------------------------------------------


def from_dict(cls: type[T], data: Any, where: str = "", *, fix: str = "") -> T:
    """Decode ``data`` into ``cls``; every problem a UserError naming ``where`` (the file) and the key."""
    schema = schema_of(cls)
    where = where or (schema.kind if schema else cls.__name__)
    try:
        return _record(cls, data, "")
    except _Mismatch as exc:
        raise UserError(exc.what, where, fix or (schema.fix if schema else "") or _CONTENT_FIX) from None
    except _Refusal as exc:
        raise UserError(exc.what, where, exc.fix) from None


class _Refusal(Exception):
    """A version or key refusal, with its own fix."""

    def __init__(self, what: str, fix: str) -> None:
        self.what = what
        self.fix = fix
        super().__init__(what)


def _name(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _record(cls: type[T], data: Any, prefix: str) -> T:
    schema = schema_of(cls)
    if not isinstance(data, dict):
        raise _Mismatch(f"{_subject(prefix, schema)} must be a JSON object, got {_shown(data)}")
    hints = _hints(cls)
    fields = {spec.metadata.get("codec_key") or spec.name: spec for spec in dataclasses.fields(cls)  # type: ignore[arg-type]
              if not spec.metadata.get("codec_skip")}
    versioned = schema is not None and schema.versioned
    if schema is not None and versioned:
        data = _versioned(schema, data, prefix)
    known = set(fields) | ({VERSION_KEY} if versioned else set()) | set(schema.derived if schema else ())
    if schema is None or schema.extra is None:
        _refuse_unknown(set(data) - known, prefix)
    values: dict[str, Any] = {}
    for key, spec in fields.items():
        if key in data:
            values[spec.name] = _field(hints[spec.name], spec, data[key], _name(prefix, key))
        elif spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
            raise _Mismatch(f"key {_name(prefix, key)!r} is missing")
    _check_readable(cls)
    record = cls(**values)
    if schema is not None:
        _check_derived(schema, record, {key: value for key, value in data.items() if key not in fields}, prefix)
    problem = schema.check(record) if schema is not None and schema.check is not None else ""
    if problem:
        raise _Mismatch(f"{_subject(prefix, schema)}: {problem}")
    return record


def _check_readable(cls: type) -> None:
    """A field neither written nor defaulted: the record is written only (reading it is a bug, not a user's mistake)."""
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]
        if spec.metadata.get("codec_skip") and spec.default is dataclasses.MISSING \
                and spec.default_factory is dataclasses.MISSING:
            raise TypeError(f"the record codec cannot read {cls.__name__}: its field {spec.name!r} is not written")


def _refuse_unknown(unknown: set[str], prefix: str) -> None:
    if unknown:
        names = ", ".join(repr(_name(prefix, key)) for key in sorted(unknown))
        raise _Refusal(f"unknown key{'s' if len(unknown) > 1 else ''} {names}", _UNKNOWN_FIX)


def _check_derived(schema: Schema, record: Any, given: dict[str, Any], prefix: str) -> None:
    """Keys beside the fields: each must be one the record derives (``Schema.derived``, ``extra``), and equal it."""
    derived = _derived(schema, record)
    _refuse_unknown(set(given) - set(derived) - {VERSION_KEY}, prefix)
    for key in sorted(set(given) & set(derived)):
        if given[key] != derived[key]:
            raise _Mismatch(f"key {_name(prefix, key)!r} is {_shown(given[key])}, but the record's other keys "
                            f"give {_shown(derived[key])}")


def _field(hint: Any, spec: dataclasses.Field[Any], value: Any, key: str) -> Any:
    convert = spec.metadata.get("codec_convert")
    if convert is None:
        return _in_domain(spec, _decode(hint, value, key), key)
    if value is None:
        return _decode(hint, value, key) if _admits_none(hint) else _mismatch(key, convert.words, value)
    try:
        return convert.read(value)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
        return _mismatch(key, convert.words, value)


def _in_domain(spec: dataclasses.Field[Any], value: Any, key: str) -> Any:
    """``value`` when each number in it (a scalar, or the items of a list) lies in the field's domain: its own
    (``options(domain=…)``), or the one its name gives (:func:`protocol.records.domains.domain_of`: ``_s`` seconds,
    ``_bytes``, ``_j``, ``_share``, counts, and the shared quantities such as ``completed`` and ``attempt``)."""
    domain = spec.metadata.get("codec_domain") or domain_of(spec.name)
    if domain is None:
        return value
    numbers = value if isinstance(value, list | tuple) else (value,)
    for index, number in enumerate(numbers):
        if isinstance(number, int | float) and not isinstance(number, bool):
            problem = domain.problem(number)
            if problem:
                where = key if numbers is not value else f"{key}[{index}]"
                raise _Mismatch(f"key {where!r} is {_shown(number)}: {problem}")
    return value


def _admits_none(hint: Any) -> bool:
    return (typing.get_origin(hint) in (Union, types.UnionType)) and type(None) in typing.get_args(hint)


def _mismatch(key: str, words: str, value: Any) -> typing.NoReturn:
    raise _Mismatch(f"key {key!r} must be {words}, got {_shown(value)}")


def _subject(prefix: str, schema: Schema | None) -> str:
    return f"key {prefix!r}" if prefix else (schema.kind if schema else "the record")


def _versioned(schema: Schema, data: dict[str, Any], prefix: str) -> dict[str, Any]:
    version = data.get(VERSION_KEY, schema.unversioned)
    reads = schema.read_versions()
    if isinstance(version, bool) or version not in reads:
        where, listed = f" (key {_name(prefix, VERSION_KEY)!r})" if prefix else "", " or ".join(map(str, reads))
        said = (": a pre-release format (isocost 0.x) that isocost 1.x no longer reads (it reads {})"
                if version in schema.pre_release else "; this isocost reads {}")
        raise _Refusal(f"{schema.kind} has schema_version {version!r}{where}" + said.format(listed),
                       PRE_RELEASE_FIX if version in schema.pre_release else _VERSION_FIX)
    if schema.upgrade is not None and version != schema.version:
        return schema.upgrade(dict(data), version)
    return data


def _decode(hint: Any, value: Any, key: str) -> Any:  # noqa: C901 - one branch per kind of type
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin is Union or origin is types.UnionType:
        return _union(typing.get_args(hint), value, key)
    if origin is typing.Literal:
        if value in typing.get_args(hint) and type(value) in {type(a) for a in typing.get_args(hint)}:
            return value
        raise _Mismatch(f"key {key!r} must be {describe(hint)}, got {_shown(value)}")
    if origin is tuple or origin is list:
        return _sequence(hint, origin, value, key)
    if origin is dict or origin is Mapping:
        return _mapping(hint, value, key)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _record(hint, value, key)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise _Mismatch(f"key {key!r} must be {describe(hint)}, got {_shown(value)}") from None
    return _scalar(hint, value, key)


def _scalar(hint: Any, value: Any, key: str) -> Any:
    if hint is type(None) or hint is None:
        ok = value is None
    elif hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
        if ok and not math.isfinite(value):  # a JSON reader that let Infinity or NaN through, or 10^400
            raise _Mismatch(f"key {key!r} must be a finite number, got {_shown(value)}")
    elif hint is str:
        ok = isinstance(value, str)
    elif hint is Decimal or hint is datetime.date:
        return _text_scalar(hint, value, key)
    else:
        raise TypeError(f"the record codec cannot read type {hint!r} (key {key!r})")  # a bug, not a user's mistake
    if not ok:
        raise _Mismatch(f"key {key!r} must be {describe(hint)}, got {_shown(value)}")
    return value


def _text_scalar(hint: Any, value: Any, key: str) -> Any:
    """A ``Decimal`` (finite) or a ``date`` from its text."""
    if isinstance(value, str) and value == value.strip() and "_" not in value:
        try:
            parsed = Decimal(value) if hint is Decimal else datetime.date.fromisoformat(value)
        except (InvalidOperation, ValueError):
            parsed = None
        if parsed is not None and (not isinstance(parsed, Decimal) or parsed.is_finite()):
            return parsed
    return _mismatch(key, describe(hint), value)


def _union(options: tuple[Any, ...], value: Any, key: str) -> Any:
    if value is None and type(None) in options:
        return None
    candidates = [option for option in options if option is not type(None)]
    for option in candidates:
        try:
            return _decode(option, value, key)
        except _Mismatch as exc:
            if not exc.what.startswith(f"key {key!r} must be "):
                raise  # a key inside the value: that key is what is wrong
    raise _Mismatch(f"key {key!r} must be {' or '.join(describe(option) for option in options)}, got {_shown(value)}")


def _sequence(hint: Any, origin: Any, value: Any, key: str) -> Any:
    if not isinstance(value, list | tuple):  # a tuple: a dict built in memory (JSON gives lists)
        raise _Mismatch(f"key {key!r} must be {describe(hint)}, got {_shown(value)}")
    args = typing.get_args(hint)
    if origin is list:
        item = args[0] if args else Any
        return [_decode(item, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_decode(args[0], v, f"{key}[{i}]") for i, v in enumerate(value))
    if not args:
        return tuple(value)
    if len(value) != len(args):
        raise _Mismatch(f"key {key!r} must be a list of {len(args)} items, got {len(value)}")
    return tuple(_decode(a, v, f"{key}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))


def _mapping(hint: Any, value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Mismatch(f"key {key!r} must be {describe(hint)}, got {_shown(value)}")
    args = typing.get_args(hint)
    item = args[1] if len(args) == 2 else Any
    return {name: _decode(item, v, f"{key}.{name}") for name, v in value.items()}


def describe(hint: Any) -> str:
    """A type in words, as the errors say it: ``describe(float | None) == "a number or null"``."""
    origin = typing.get_origin(hint)
    words = {str: "a string", int: "an integer", float: "a number", bool: "true or false", type(None): "null",
             Decimal: "a decimal number as text (\"12.50\")", datetime.date: "a date as text (\"2026-09-30\")"}
    if hint in words:
        return words[hint]
    if origin is Union or origin is types.UnionType:
        return " or ".join(describe(option) for option in typing.get_args(hint))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "one of " + ", ".join(repr(member.value) for member in hint)
    if origin is tuple or origin is list:
        return "a list"
    return "a JSON object"


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = "null" if value is None else ("true" if value is True else "false" if value is False else repr(value))
    return text if len(text) <= 60 else text[:57] + "…"


def read_record(path: Path, cls: type[T], *, fix: str = "") -> T:
    """A JSON file as a record: strict JSON (:func:`protocol.io.jsonio.read_json`), then :func:`from_dict`."""
    return from_dict(cls, read_json(path), str(path), fix=fix)


def parse_record(text: str | bytes, cls: type[T], where: str, *, fix: str = "") -> T:
    """One JSON text (a line of a log) as a record, every problem a UserError naming ``where``."""
    return from_dict(cls, parse_json(text, where), where, fix=fix)


__all__ = ["OMIT_NONE", "Convert", "Schema", "VERSION_KEY", "decimal_text", "describe", "from_dict", "options",
           "parse_record", "read_record", "schema_of", "to_dict", "write_record"]
