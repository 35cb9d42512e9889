"""The columns of ``raw.csv``, in order, and the raw table's format version.

Example::

    RAW_COLUMNS[0], RAW_COLUMNS[-1]      # ('trial_id', 'chain_sha256')
    raw_domain("pass_s").words()          # '≥ 0, ≤ 10^9'
"""

from __future__ import annotations

from protocol.records.domains import FINITE, Domain, unit_domain
from protocol.records.stages import DEFAULT_ENGINE, VARIANT_FIELDS_1_0
from protocol.study.traffic import MAX_RATE_QPS

#: Columns of ``raw.csv`` in format 5 (isocost 1.0), in order.
RAW_COLUMNS_1_0: tuple[str, ...] = (
    "trial_id", "variant_id", "repetition", "order_index", "status", "pass_s", "expected_ids", "observed_ids",
    "ids_match", "corpus_accepted", "notes", "attempt", "completed", "metric", "metric_value", "quality_verdict",
    *VARIANT_FIELDS_1_0,
    "verify_s", "imports_s", "load_s", "warmup_s", "gpu_pass_s", "write_s", "trial_s", "launch_overhead_s",
    "peak_rss_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes", "truncated_count",
    "oom_events", "launcher", "image_id", "image_digest", "exit_code", "started_at", "ended_at", "predictions_path",
    "empty_reasons",
    # GPU path (device share, compilations, energy), appended at the end:
    "device_busy_share",  # gpu_pass_s / pass_s: the share of the measured pass the device was busy
    "pass_compilations",  # torch.compile graphs compiled inside the pass (>0: the warm-up missed a shape)
    "gpu_energy_j", "cpu_energy_j", "device_used_max_bytes",
    # The trial files this row seals (runner.campaign_dir.seal): sha256 of each, empty when the trial wrote none.
    "spec_sha256", "manifest_sha256", "status_sha256", "outputs_sha256", "batches_sha256",
    # Slurm: where a cluster scheduler put the trial (empty, with the reason, for launchers without one):
    "queue_s",  # submitted -> started, waiting in the scheduler's queue (not part of any trial time)
    "node", "job_id", "allocated_gpu",  # the node, the job, the card index(es) and UUID allocated to it
    # Columns added by other changes go above this line: the chain digest is always the last column.
    "chain_sha256",
)

#: Columns of ``raw.csv`` in format 6 (isocost 1.1 with engines): 1.0's and the variant's ``engine``.
RAW_COLUMNS_6: tuple[str, ...] = (*RAW_COLUMNS_1_0[:-1], "engine", RAW_COLUMNS_1_0[-1])
#: Columns of ``raw.csv``, in order (format 7, isocost 1.1 with a series of rates): format 6's and the variant's
#: ``rate_qps`` (a server trial's target rate; empty for offline). New columns are only ever appended at the end,
#: before the chain digest.
RAW_COLUMNS: tuple[str, ...] = (*RAW_COLUMNS_6[:-1], "rate_qps", RAW_COLUMNS_6[-1])

#: The raw table's format. History: 1 (0.1.0): first version; 2: ``chain_sha256`` (last column),
#: sha256 over the previous row's digest and this row's cells (see ``runner.campaign_dir.raw_table``); the five
#: GPU-path columns (``device_busy_share`` … ``device_used_max_bytes``) were appended within 2;
#: 3: the seal columns (``spec_sha256``, ``manifest_sha256``, ``status_sha256``, ``outputs_sha256``: the task's
#: output files as ``name=sha256;…``, ``batches_sha256``), and the first row's anchor includes campaign.json's
#: ``catalog`` (the frozen catalog's sha256) and ``raw_schema_version``; the Slurm block (``queue_s``, ``node``,
#: ``job_id``, ``allocated_gpu``) was appended within 3, without a bump; 4: the same columns as 3 with the Slurm
#: block, under their own number; 5: the same columns, each row's digest of its text as written up to its last
#: comma instead of its cells as a JSON list (checkable with any sha256 tool; a re-quoted cell breaks it).
#: Format 5 is isocost 1.0's raw format (kept under its number, so that no number names two formats); 6 (isocost
#: 1.1) appends ``engine`` before the chain digest; 7 (isocost 1.1) appends ``rate_qps`` before it. 1.x reads all
#: three (a format-5 row's engine is ``transformers``, the only one 1.0 ran; a format-5 or 6 row's rate is empty:
#: offline, or a server study of one rate, which its spec.json names) and writes 7. Formats 1 to 4 (isocost 0.x) are
#: refused with what to do (``runner.campaign_dir.raw_format``).
RAW_SCHEMA_VERSION = 7
#: The columns of each raw format 1.x reads.
FORMAT_COLUMNS: dict[int, tuple[str, ...]] = {5: RAW_COLUMNS_1_0, 6: RAW_COLUMNS_6, 7: RAW_COLUMNS}
#: The isocost that wrote each older raw format (named when this isocost refuses to append to one).
FORMAT_WRITERS: dict[int, str] = {5: "isocost 1.0", 6: "isocost 1.1 before the rate_qps column"}
#: The cell of a column a table's older format lacks, in every row of that format.
ABSENT_CELLS: dict[str, str] = {"engine": DEFAULT_ENGINE, "rate_qps": ""}

#: The domain of a numeric column: by its unit (``pass_s`` seconds, ``peak_rss_bytes`` bytes, ``gpu_energy_j``
#: joules, ``device_busy_share`` a share) or its name (``completed``, ``attempt``, ``batch_size``, ``exit_code``
#: …: :data:`protocol.records.domains.QUANTITIES`, shared with spec.json, status.json and manifest.json), else the one
#: declared here; any other number is finite (an integer, 64-bit). Every numeric cell is checked against its
#: column's domain when read (:class:`protocol.records.raw_record.RawRecord`, and the typed frame of
#: ``runner.campaign_dir.raw_frame``): the chain proves a row unchanged, not possible.
RAW_DOMAINS: dict[str, Domain] = {
    "metric_value": FINITE,  # accuracy, ROUGE-L, a cosine agreement (which may be negative)
    "rate_qps": Domain(0, MAX_RATE_QPS, "a target rate, queries per second"),  # a server trial's declared rate
}


def raw_domain(column: str) -> Domain:
    """The domain of a numeric raw.csv column: :data:`RAW_DOMAINS`, else its unit's or name's."""
    return RAW_DOMAINS.get(column) or unit_domain(column, is_int=True)
