"""The same result across hardware: every configuration compared by id with one reference configuration.

Within one campaign a variant is judged against that campaign's run of the study's reference variant. A
decision over several campaigns (one per rented GPU type or host) needs more: one **reference configuration
for the whole decision** (the study's reference variant on one campaign, ``decide --reference DIR``), with
every configuration of every campaign compared with it by id, under the rule the study fixed before timing:

- each accepted pass of the configuration against the reference configuration's first accepted pass: the
  task's agreement (:meth:`protocol.tasks.base.Task.agreement`; labels for classification), the smallest over
  the passes ≥ ``min_agreement``;
- the configuration's median metric at most ``max_metric_drop`` below the reference configuration's.

A configuration that is not equivalent to the one reference is not ranked, with the reason. The
:class:`AgreementMatrix` also holds every configuration against every other (``isocost compare``) and, for
each configuration, how its own repetitions agree (:class:`Repeatability`: all passes identical, or how many
ids moved). This module is pure: the outputs are loaded by ``runner.decision.crosscheck``.

Example::

    matrix = build_matrix([ConfigurationOutputs("a on x", "batch_size=1", [0.9], [outputs])], task, study,
                          reference="a on x", reference_dir="results/x")
    cross_equivalence(matrix, "a on x", study.quality)     # (True, "the decision's reference itself")
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from protocol.records.codec import OMIT_NONE, Schema

#: decision.json's ``agreement`` and ``isocost compare --json``. History: 1: first version.
MATRIX_SCHEMA_VERSION = 1
#: How many differing ids a cell names as examples.
EXAMPLES = 5


@dataclass(frozen=True)
class ConfigurationOutputs:
    """One configuration's accepted passes, loaded: its id, variant, each pass's metric and outputs, in run order."""

    configuration_id: str
    variant_id: str
    metrics: Sequence[float | None]
    outputs: Sequence[Any]
    trial_ids: Sequence[str] = ()
    source: str = ""  # the campaign (or replay) directory it comes from


@dataclass(frozen=True)
class PairAgreement:
    """``row`` against ``column``: the share of ids with equal outputs (the task's agreement, first accepted pass
    against first accepted pass, and the smallest over the row's passes), the metric difference (row median
    minus column median), and the ids that differ, with a few examples; empty with a reason when not computed."""

    row: str
    column: str
    share_equal: float | None
    min_share_equal: float | None
    metric_difference: float | None
    ids_differ: int | None
    examples: tuple[str, ...]
    reason: str = ""
    failures: tuple[str, ...] = ()  # the task's own conditions of equivalence that do not hold (a length window)
    CODEC: ClassVar[Schema] = Schema("agreement cell")


@dataclass(frozen=True)
class Repeatability:
    """How a configuration's own accepted passes agree: each against its first (``ids_moved``: ids on which any
    pass differs from the first)."""

    configuration_id: str
    passes: int
    identical: bool | None
    ids_moved: int | None
    examples: tuple[str, ...]
    reason: str = ""
    CODEC: ClassVar[Schema] = Schema("repeatability")


@dataclass(frozen=True)
class AgreementMatrix:
    """Every configuration against every other, the one reference of the decision, and each one's repeatability."""

    reference: str | None
    reference_dir: str
    reference_reason: str
    configurations: tuple[str, ...]
    cells: tuple[PairAgreement, ...]
    repeatability: tuple[Repeatability, ...]
    task: str
    #: configuration → the reference configuration it is judged against (with common seeds: the same seed's)
    reference_of: Mapping[str, str] = field(default_factory=dict)
    schema_version: int = MATRIX_SCHEMA_VERSION
    #: Set by ``compare``: what the outputs must say first (a campaign run with the test-only fault hook).
    flags: tuple[str, ...] | None = field(default=None, metadata=OMIT_NONE)
    CODEC: ClassVar[Schema] = Schema("agreement matrix", MATRIX_SCHEMA_VERSION)

    def cell(self, row: str, column: str) -> PairAgreement | None:
        return next((c for c in self.cells if c.row == row and c.column == column), None)

    def reference_for(self, configuration_id: str) -> str | None:
        return self.reference_of.get(configuration_id, self.reference) if self.reference else None

    def against_reference(self, configuration_id: str) -> PairAgreement | None:
        reference = self.reference_for(configuration_id)
        return self.cell(configuration_id, reference) if reference else None

    def repeat_of(self, configuration_id: str) -> Repeatability | None:
        return next((r for r in self.repeatability if r.configuration_id == configuration_id), None)



def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def compare_pair(row: ConfigurationOutputs, column: ConfigurationOutputs, task: Any, study: Any) -> PairAgreement:
    """``row`` against ``column`` by id (see :class:`PairAgreement`)."""
    if not row.outputs or not column.outputs:
        missing = row if not row.outputs else column
        return PairAgreement(row.configuration_id, column.configuration_id, None, None, None, None, (),
                             f"{missing.configuration_id} has no accepted pass")
    anchor = column.outputs[0]
    agreements = [task.agreement(outputs, anchor, study) for outputs in row.outputs]
    first = agreements[0]
    shares = [a.agreement for a in agreements]
    differing = sorted({ident for a in agreements for ident in a.differing_ids})
    failures = tuple(dict.fromkeys(f for a in agreements for f in a.failures))  # the task's own conditions
    row_metric, column_metric = _median(row.metrics), _median(column.metrics)
    difference = row_metric - column_metric if row_metric is not None and column_metric is not None else None
    if any(share is None for share in shares):
        return PairAgreement(row.configuration_id, column.configuration_id, None, None, difference, None, (),
                             "the two passes do not hold the same ids")
    known = [s for s in shares if s is not None]
    return PairAgreement(row.configuration_id, column.configuration_id, first.agreement, min(known), difference,
                         len(differing), tuple(differing[:EXAMPLES]), failures=failures)


def repeatability(config: ConfigurationOutputs, task: Any, study: Any) -> Repeatability:
    """How the configuration's own accepted passes agree with its first."""
    if not config.outputs:
        return Repeatability(config.configuration_id, 0, None, None, (), "no accepted pass")
    if len(config.outputs) == 1:
        return Repeatability(config.configuration_id, 1, None, None, (), "one accepted pass: nothing to repeat")
    anchor = config.outputs[0]
    agreements = [task.agreement(outputs, anchor, study) for outputs in config.outputs[1:]]
    if any(a.agreement is None for a in agreements):
        return Repeatability(config.configuration_id, len(config.outputs), None, None, (),
                             "its passes do not hold the same ids")
    moved = sorted({ident for a in agreements for ident in a.differing_ids})
    identical = all(a.identical for a in agreements)
    return Repeatability(config.configuration_id, len(config.outputs), identical, len(moved), tuple(moved[:EXAMPLES]))


def build_matrix(configs: Sequence[ConfigurationOutputs], task: Any, study: Any, *, reference: str | None,
                 reference_dir: str, reference_reason: str = "",
                 reference_of: Mapping[str, str] | None = None) -> AgreementMatrix:
    """The whole matrix (every ordered pair, the diagonal included: a configuration against itself is its
    repeatability seen from its first pass), the reference and each configuration's repeatability."""
    cells = tuple(compare_pair(row, column, task, study) for row in configs for column in configs)
    return AgreementMatrix(
        reference=reference, reference_dir=reference_dir, reference_reason=reference_reason,
        configurations=tuple(c.configuration_id for c in configs), cells=cells,
        repeatability=tuple(repeatability(c, task, study) for c in configs), task=getattr(task, "name", ""),
        reference_of=dict(reference_of or {}),
    )


def cross_equivalence(matrix: AgreementMatrix, configuration_id: str, quality: Any,
                      row_metric: float | None = None) -> tuple[bool | None, str]:
    """Is the configuration equivalent to the decision's one reference under the study's rule? (None: unknown.)
    ``row_metric``: the configuration's median metric, for a task whose rule has a score share
    (``min_score_share``: generation), applied as the summary applies it within a campaign."""
    if matrix.reference is None:
        return None, f"no reference configuration for the decision: {matrix.reference_reason}"
    reference = matrix.reference_for(configuration_id)
    if configuration_id == reference:
        return True, "the decision's reference itself"
    cell = matrix.against_reference(configuration_id)
    if cell is None or cell.min_share_equal is None:
        return None, f"not compared with the reference {reference}: {cell.reason if cell else 'no pass'}"
    examples = f" (e.g. {', '.join(cell.examples)})" if cell.examples else ""
    if cell.metric_difference is not None and -cell.metric_difference > quality.max_metric_drop + 1e-12:
        return False, (f"{quality.metric} {-cell.metric_difference:.4f} below the decision's reference "
                       f"{reference}; tolerance {quality.max_metric_drop}")
    short = _short_of_score_share(cell, quality, row_metric, reference)
    if short:
        return False, short
    if cell.failures:
        return False, f"against the decision's reference {reference}: {'; '.join(cell.failures)}"
    if cell.min_share_equal < quality.min_agreement:
        return False, (f"agreement with the decision's reference {reference} {cell.min_share_equal:.4f} < "
                       f"required {quality.min_agreement}: {cell.ids_differ} id(s) differ{examples}")
    return True, (f"equivalent to the decision's reference {reference}: agreement ≥ "
                  f"{cell.min_share_equal:.4f}, {cell.ids_differ} id(s) differ{examples}")


def _score_share(quality: Any) -> float | None:
    extra = getattr(quality, "extra", None) or {}
    share = extra.get("min_score_share")
    return float(share) if share is not None else None


def _short_of_score_share(cell: PairAgreement, quality: Any, row_metric: float | None, reference: str | None) -> str:
    """Words when the configuration's median metric is below ``min_score_share`` of the reference's ('' if not)."""
    share = _score_share(quality)
    if share is None or row_metric is None or cell.metric_difference is None:
        return ""
    reference_metric = row_metric - cell.metric_difference
    if reference_metric <= 0 or row_metric >= share * reference_metric - 1e-12:
        return ""
    return (f"{quality.metric} {row_metric:.4f} is {row_metric / reference_metric:.4f} of the decision's reference "
            f"{reference}'s {reference_metric:.4f}; the rule needs at least {share}")


def judge_across(config: Any, matrix: AgreementMatrix, quality: Any) -> Any:
    """The configuration with its verdict against the decision's one reference; not ranked unless equivalent.

    A configuration its own campaign already excludes on quality, or that has no accepted pass, keeps that
    reason alone (the comparison could only repeat it).
    """
    equivalent, why = cross_equivalence(matrix, config.configuration_id, quality, config.median_metric)
    exclusions = list(config.exclusions)
    repeated = config.equivalent is not True or config.accepted_passes == 0
    if equivalent is not True and not repeated:
        word = "not equivalent to" if equivalent is False else "equivalence unknown against"
        exclusions.append(f"quality across campaigns: {word} the decision's reference ({why})")
    return replace(config, cross_equivalent=equivalent, cross_reason=why, exclusions=tuple(exclusions),
                   acceptable=config.acceptable and not (equivalent is not True and not repeated))
