"""The comparison across campaigns, shown: the memo's table against the one reference, the whole matrix as
text and CSV (``isocost compare``), and a heat map for report.html.

Example::

    "\\n".join(reference_lines(decision.agreement, decision.configurations))   # the memo's section
    print(matrix_text(matrix))                                                  # isocost compare
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from typing import Any

from protocol.decision.agreement import AgreementMatrix, PairAgreement
from protocol.io.csvio import csv_writer
from protocol.io.names import markdown_text


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _difference(value: float | None) -> str:
    return "—" if value is None else f"{value:+.4f}"


def _ids(cell: PairAgreement) -> str:
    if cell.ids_differ is None:
        return "—"
    shown = ", ".join(cell.examples)
    more = cell.ids_differ - len(cell.examples)
    return f"{cell.ids_differ}" + (f" ({shown}{', …' if more > 0 else ''})" if shown else "")


def _repeat(matrix: AgreementMatrix, configuration_id: str) -> str:
    repeat = matrix.repeat_of(configuration_id)
    if repeat is None or repeat.identical is None:
        return f"— ({repeat.reason})" if repeat is not None and repeat.reason else "—"
    if repeat.identical:
        return f"all {repeat.passes} passes identical"
    return f"{repeat.ids_moved} id(s) moved over {repeat.passes} passes"


#: What "differ" and "moved" mean for a generation (the task's agreement counts a near-tie divergence as agreeing).
NEAR_TIE_NOTE = (" For text generation an id differs (or moved) when its first divergence from the other's tokens is "
                 "not a near tie; ids that diverge at a near tie agree here: verdicts.json counts them (`near_ties`, "
                 "`identical_share`), and summary.md names them where the engine varies.")


def reference_lines(matrix: AgreementMatrix | None, configs: Sequence[Any]) -> list[str]:
    """``## The same result across campaigns``: every configuration against the decision's one reference."""
    lines = ["## The same result across campaigns", ""]
    if matrix is None:
        return [*lines, "Not compared.", ""]
    if matrix.reference is None:
        return [*lines, f"No reference configuration: {markdown_text(matrix.reference_reason)}.", ""]
    lines += [f"Reference: **{markdown_text(matrix.reference)}** (the study's reference variant on "
              f"{markdown_text(matrix.reference_dir)}; `decide --reference DIR` names another). Every configuration "
              "is compared with it by id on each of its accepted passes, under the study's rule." + (
                  NEAR_TIE_NOTE if matrix.task == "text-generation" else ""), "",
              "| configuration | agreement with the reference (lowest pass) | metric difference | ids that differ | "
              "its own repetitions | across campaigns |", "|---|---|---|---|---|---|"]
    for config in configs:
        cell = matrix.against_reference(config.configuration_id)
        verdict = {True: "equivalent", False: "**not equivalent**", None: "unknown"}[config.cross_equivalent]
        if cell is None:
            row = ["—", "—", "—"]
        else:
            row = [_share(cell.min_share_equal), _difference(cell.metric_difference), _ids(cell)]
        lines.append(f"| {markdown_text(config.configuration_id)} | {' | '.join(markdown_text(c) for c in row)} | "
                     f"{markdown_text(_repeat(matrix, config.configuration_id))} | {verdict} |")
    priced = {config.configuration_id for config in configs}
    for name in (n for n in matrix.configurations if n not in priced):  # replays: compared, never priced
        cell = matrix.against_reference(name)
        row = ["—", "—", "—"] if cell is None else [_share(cell.min_share_equal), _difference(cell.metric_difference),
                                                    _ids(cell)]
        lines.append(f"| {markdown_text(name)} | {' | '.join(markdown_text(c) for c in row)} | "
                     f"{markdown_text(_repeat(matrix, name))} | replay (compared, not priced) |")
    return [*lines, ""]


def matrix_text(matrix: AgreementMatrix) -> str:
    """Every configuration against every other, as text: share of equal outputs (first passes), metric difference
    (row − column), ids that differ; then each configuration's own repetitions."""
    names = matrix.configurations
    lines = [f"reference: {matrix.reference or 'none'}"
             + (f" ({matrix.reference_dir})" if matrix.reference else f" ({matrix.reference_reason})"), ""]
    for row in names:
        lines.append(f"{row}:")
        for column in names:
            cell = matrix.cell(row, column)
            if cell is None or row == column:
                continue
            if cell.share_equal is None:
                lines.append(f"  vs {column}: not compared ({cell.reason})")
                continue
            lines.append(f"  vs {column}: equal {_share(cell.share_equal)} (lowest pass "
                         f"{_share(cell.min_share_equal)}), metric {_difference(cell.metric_difference)}, ids differ "
                         f"{_ids(cell)}")
        lines.append(f"  own repetitions: {_repeat(matrix, row)}")
    return "\n".join(lines) + "\n"


MATRIX_COLUMNS = ("row", "column", "share_equal", "min_share_equal", "metric_difference", "ids_differ", "examples",
                  "reason", "not_a_measurement")


def matrix_csv(matrix: AgreementMatrix) -> str:
    """One CSV row per ordered pair (formula-like cells neutralised)."""
    buffer = io.StringIO()
    writer = csv_writer(buffer)
    writer.writerow(MATRIX_COLUMNS)
    flags = " ".join(matrix.flags or ())  # a campaign run with the test-only fault hook: on every row
    for cell in matrix.cells:
        values = [cell.row, cell.column, cell.share_equal, cell.min_share_equal, cell.metric_difference,
                  cell.ids_differ, " ".join(cell.examples), cell.reason, flags]
        writer.writerow(values)
    return buffer.getvalue()


def heat_map(matrix: AgreementMatrix | None) -> str:
    """An HTML table coloured by the share of equal outputs (white 1.0 → red at or below 0.9), or "" without a
    matrix; each cell's title says the figures."""
    if matrix is None or not matrix.configurations:
        return ""
    names = matrix.configurations
    head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    rows = []
    for row in names:
        cells = []
        for column in names:
            cell = matrix.cell(row, column)
            share = cell.share_equal if cell is not None else None
            title = "not compared" if cell is None or share is None else (
                f"equal {share:.4f}; metric {_difference(cell.metric_difference)}; ids differ {cell.ids_differ}")
            level = 0.0 if share is None else max(0.0, min(1.0, (1.0 - share) / 0.1))
            colour = "#eee" if share is None else f"rgb(255,{int(255 - 155 * level)},{int(255 - 155 * level)})"
            text = "—" if share is None else f"{share:.3f}"
            cells.append(f'<td style="background:{colour}" title="{html.escape(title)}">{text}</td>')
        rows.append(f"<tr><th>{html.escape(row)}</th>{''.join(cells)}</tr>")
    reference = html.escape(matrix.reference or "none")
    return (f'<section id="agreement"><h2>The same result across campaigns</h2><p>Share of equal outputs by id '
            f"(row against column, first accepted passes); reference: <b>{reference}</b>.</p>"
            f'<table class="heat"><tr><th></th>{head}</tr>{"".join(rows)}</table></section>')
