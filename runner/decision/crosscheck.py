"""Load every configuration's accepted passes from its campaign directory and compare them across campaigns.

``decide`` and ``compare`` call :func:`cross_check` after the evidence checks of each directory: the outputs
read here are the sealed ones. The reference configuration of the decision is the study's reference variant
on one campaign: ``--reference DIR``, by default the first directory given (and the memo says which). The
comparison itself is pure (:mod:`protocol.decision.agreement`).

Example::

    matrix = cross_check([(Path("results/h200"), evidence_a), (Path("results/4090"), evidence_b)], study,
                         labels, reference_root=Path("results/h200"))
    matrix.against_reference("batch_size=8 on rtx-4090 ×1 lot").min_share_equal
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from protocol.decision.agreement import AgreementMatrix, ConfigurationOutputs, build_matrix
from protocol.decision.rank import CampaignEvidence
from protocol.errors import UserError
from protocol.tasks import study_task
from runner.campaign_dir.layout import CampaignPaths


def configuration_outputs(root: Path, evidence: CampaignEvidence, study: Any,
                          labels: Mapping[tuple[str, str], str]) -> list[ConfigurationOutputs]:
    """One entry per variant of the campaign: its accepted passes in run order, with their metric values."""
    task = study_task(study)
    paths = CampaignPaths(root)
    rows = sorted(evidence.rows, key=lambda r: (r.order_index or 0, r.attempt or 0))
    found = []
    for variant in evidence.summary.variants:
        accepted = [r for r in rows if r.variant_id == variant.variant_id and r.trial_id in evidence.accepted_trials]
        found.append(ConfigurationOutputs(
            configuration_id=labels[(evidence.campaign_id, variant.variant_id)],
            variant_id=variant.variant_id,
            metrics=[r.metric_value for r in accepted],
            outputs=[task.read_pass(paths.trial_dir(r.trial_id)) for r in accepted],
            trial_ids=[r.trial_id for r in accepted],
            source=str(root),
        ))
    return found


def reference_root(roots: Sequence[Path], reference: Path | None, command: str = "decide") -> Path:
    """The campaign whose reference variant is the decision's reference: ``--reference`` (one of ``roots``), or
    the first directory given; ``command`` is named in the error."""
    if reference is None:
        return roots[0]
    resolved = {root.resolve(): root for root in roots}
    if reference.resolve() not in resolved:
        raise UserError(f"--reference names a directory that is not among those given to isocost {command}",
                        str(reference), f"Name one of: {', '.join(str(r) for r in roots)}.")
    return resolved[reference.resolve()]


def cross_check(loaded: Sequence[tuple[Path, CampaignEvidence]], study: Any,
                labels: Mapping[tuple[str, str], str], *, reference: Path | None = None,
                extra: Sequence[ConfigurationOutputs] = (), command: str = "decide") -> AgreementMatrix:
    """The agreement matrix of every configuration of ``loaded`` (directory, evidence), and of ``extra`` ones (replays),
    the decision's reference being the study's reference variant on the ``reference`` campaign (default: the first)."""
    roots = [root for root, _ in loaded]
    chosen = reference_root(roots, reference, command)
    configs: list[ConfigurationOutputs] = []
    reference_id: str | None = None
    reason = ""
    for root, evidence in loaded:
        entries = configuration_outputs(root, evidence, study, labels)
        configs += entries
        if root == chosen:  # the reference variant (with common seeds: under the first seed)
            mine = next((c for c in entries if study.reference_for(c.variant_id) == c.variant_id), None)
            if mine is None or not mine.outputs:
                reason = (f"the reference variant {study.quality.reference_variant} has no accepted pass on "
                          f"{chosen}: choose another --reference")
            else:
                reference_id = mine.configuration_id
    configs += extra
    reference_of = {}
    if reference_id is not None:
        chosen_evidence = next(e for root, e in loaded if root == chosen)
        for config in configs:
            own = study.reference_for(config.variant_id)  # common seeds: the same seed's reference
            reference_of[config.configuration_id] = labels.get((chosen_evidence.campaign_id, own), reference_id)
    return build_matrix(configs, study_task(study), study, reference=reference_id, reference_dir=str(chosen),
                        reference_reason=reason, reference_of=reference_of)

