"""The pass check every task shares: the exact id set, the verdict record, agreement between two passes.

A written file is not yet an accepted result: the expected id set must be found exactly (no duplicates,
none missing, none unexpected), every line must be well-formed, and the task's metric must meet the
study's minimum (each task's check is in :mod:`protocol.tasks`, which builds a :class:`PassCheck`). Wrong
outputs are kept: they are the quality measurement.

Example::

    ids = check_ids(("a", "b", "b"), ("a", "b", "c"))
    ids.duplicates, ids.missing        # frozenset({'b'}), frozenset({'c'})
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Agreement", "IdCheck", "PassCheck", "check_ids", "id_problems"]


@dataclass(frozen=True)
class PassCheck:
    expected_ids: int
    observed_ids: int
    ids_match: bool
    duplicate_ids: int
    missing_ids: int
    unexpected_ids: int
    format_errors: int
    metric: str
    metric_value: float | None
    subgroups: dict[str, dict[str, float]]
    accepted: bool
    reasons: tuple[str, ...] = field(default_factory=tuple)

    @property
    def verdict(self) -> str:
        return "accepted" if self.accepted else "rejected: " + "; ".join(self.reasons)


@dataclass(frozen=True)
class IdCheck:
    """How the observed ids compare with the corpus's."""

    in_corpus_order: bool  # every expected id exactly once, in corpus order
    duplicates: frozenset[str]
    missing: frozenset[str]
    unexpected: frozenset[str]

    @property
    def ids_match(self) -> bool:
        return not self.missing and not self.unexpected


def check_ids(observed: Sequence[str], expected_ids: Sequence[str], keyed: Mapping[str, Any] | None = None) -> IdCheck:
    """Observed ids against the corpus's; ``keyed`` (a mapping whose keys are the expected ids in order, such as a
    reference's labels) makes the usual pass's distinctness check free."""
    expected_ids = tuple(expected_ids)
    # The usual pass: every expected id exactly once, in corpus order (one sequence comparison).
    if tuple(observed) == expected_ids and _all_distinct(expected_ids, keyed):
        return IdCheck(True, frozenset(), frozenset(), frozenset())
    expected = set(expected_ids)
    seen = set(observed)
    duplicates: frozenset[str] = frozenset()
    if len(seen) != len(observed):
        duplicates = frozenset(ident for ident, count in Counter(observed).items() if count > 1)
    return IdCheck(False, duplicates, frozenset(expected - seen), frozenset(seen - expected))


def id_problems(format_errors: Sequence[str], ids: IdCheck) -> list[str]:
    """Why a pass is incomplete or malformed as far as its lines and ids go (empty when nothing is wrong)."""
    reasons: list[str] = []
    if format_errors:
        reasons.append(f"{len(format_errors)} format error(s), first: {format_errors[0]}")
    if ids.duplicates:
        reasons.append(f"{len(ids.duplicates)} duplicate id(s), e.g. {sorted(ids.duplicates)[0]!r}")
    if ids.missing:
        reasons.append(f"{len(ids.missing)} missing id(s), e.g. {sorted(ids.missing)[0]!r}")
    if ids.unexpected:
        reasons.append(f"{len(ids.unexpected)} id(s) not in the corpus, e.g. {sorted(ids.unexpected)[0]!r}")
        forms = {unicodedata.normalize("NFC", i): i for i in ids.missing}
        renamed = sorted(i for i in ids.unexpected if unicodedata.normalize("NFC", i) in forms)
        if renamed:
            reasons.append(f"{len(renamed)} of them differ from a corpus id only by Unicode normalisation, e.g. "
                           f"{ascii(renamed[0])} for {ascii(forms[unicodedata.normalize('NFC', renamed[0])])} (the "
                           "runner or a tool re-encoded the ids)")
    return reasons


def _all_distinct(ids: tuple[str, ...], keyed: Mapping[str, Any] | None) -> bool:
    """True if no id repeats; cheap when ``keyed`` has exactly these keys in order."""
    if keyed is not None and len(keyed) == len(ids) and tuple(keyed) == ids:
        return True  # dictionary keys are distinct
    return len(set(ids)) == len(ids)


@dataclass(frozen=True)
class Agreement:
    """How a pass compares with the reference variant's pass on the same ids (each task says how).

    ``agreement`` is the share of ids on which the two agree (the rule's ``min_agreement`` applies to it);
    ``max_score_delta`` the largest difference of a per-id score where the task has one; ``identical`` whether the
    outputs are the same; ``details`` the task's own figures (kept in verdicts.json); ``differing_ids`` the ids on which
    they disagree, in corpus order (for the comparison across campaigns); ``failures`` the task's own conditions of
    equivalence with the reference that do not hold (e.g. a generation's length window), each a reason: a pass with any
    is not equivalent (kept in verdicts.json, read by the summary).
    """

    agreement: float | None
    max_score_delta: float | None
    identical: bool | None
    details: dict[str, Any] = field(default_factory=dict)
    differing_ids: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
