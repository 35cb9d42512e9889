"""The expenses ledger: other project costs (storage, egress, …), each with its evidence, read from a CSV.

The ledger is shown beside the decision and never added to a configuration's
cost. Its header is exactly ``date,description,amount_usd,evidence``; amounts
are decimal USD (a credit may be negative) and every line names its evidence.
An amount has at most 12 digits before the point and 6 after, a ledger at most
:data:`MAX_EXPENSES` lines, and a description or evidence no control character
(they reach the memo, the report and a terminal).

Example: ``parse_ledger("date,description,amount_usd,evidence\\n2026-09-30,storage,12.50,inv 17\\n",
"ledger.csv").total_usd == Decimal("12.50")``.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import date
from decimal import Decimal

from protocol.decision.records import Expense, Ledger
from protocol.errors import UserError
from protocol.io.names import check_plain_text

LEDGER_COLUMNS: tuple[str, ...] = ("date", "description", "amount_usd", "evidence")

_AMOUNT_RE = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")
#: A bounded amount: up to 999,999,999,999.999999 USD (a larger figure is a typo, and beyond exact money).
_BOUNDED_AMOUNT_RE = re.compile(r"^-?[0-9]{1,12}(\.[0-9]{1,6})?$")
MAX_EXPENSES = 100_000
MAX_TEXT_CHARS = 500

_DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def parse_ledger(text: str, path: str) -> Ledger:
    """Read an expenses ledger CSV: ``date,description,amount_usd,evidence`` (one expense a line).

    Amounts are decimal USD (a credit may be negative); every line needs its evidence.

    Example: ``parse_ledger("date,description,amount_usd,evidence\\n2026-09-30,storage,12.50,inv 17\\n",
    "ledger.csv").expenses[0].amount_usd == Decimal("12.50")``.
    """
    try:
        reader = csv.reader(io.StringIO(text))
        numbered = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    except csv.Error as exc:
        raise UserError(f"expenses ledger is not valid CSV: {exc}", path) from None
    expected = f"The first line must be exactly: {','.join(LEDGER_COLUMNS)}."
    if not numbered:
        raise UserError("expenses ledger is empty", path, expected)
    if len(numbered) - 1 > MAX_EXPENSES:
        raise UserError(f"expenses ledger has {len(numbered) - 1} lines, more than {MAX_EXPENSES:,}", path,
                        "Sum small expenses into one line each (with their evidence).")
    header_line, header = numbered[0]
    columns = tuple(cell.strip() for cell in header)
    if columns != LEDGER_COLUMNS:
        raise UserError(f"expenses ledger header is {','.join(columns)!r}", f"{path}:{header_line}", expected)
    expenses = []
    for line, row in numbered[1:]:
        where = f"{path}:{line}"
        if len(row) != len(LEDGER_COLUMNS):
            raise UserError(f"line has {len(row)} fields, expected {len(LEDGER_COLUMNS)}", where,
                            "Quote a description or evidence that contains commas.")
        day_text, description, amount_text, evidence = (cell.strip() for cell in row)
        try:
            if not _DATE_RE.match(day_text):
                raise ValueError(day_text)
            day = date.fromisoformat(day_text)
        except ValueError:
            raise UserError(f"date is not YYYY-MM-DD: {day_text!r}", where, "Write it like 2026-09-30.") from None
        if not description:
            raise UserError("description is empty", where, "Say what the expense was.")
        check_plain_text(description, "the description", f"{where}, column description", max_chars=MAX_TEXT_CHARS)
        _check_amount(amount_text, where)
        if not evidence:
            raise UserError("evidence is empty", where,
                            "Every expense needs its evidence (invoice number, receipt file, ledger reference).")
        check_plain_text(evidence, "the evidence", f"{where}, column evidence", max_chars=MAX_TEXT_CHARS)
        expenses.append(Expense(day, description, Decimal(amount_text), evidence, line))
    return Ledger(path=path, expenses=tuple(expenses))




def _check_amount(text: str, where: str) -> None:
    if not _AMOUNT_RE.match(text):
        raise UserError(f"amount_usd is not a decimal number: {text[:40]!r}", f"{where}, column amount_usd",
                        "Write USD with a dot and no currency sign or thousands separator, e.g. 1250.00.")
    if not _BOUNDED_AMOUNT_RE.match(text):
        raise UserError(f"amount_usd {text[:40]}{'…' if len(text) > 40 else ''} has more than 12 digits before "
                        "the point or 6 after", f"{where}, column amount_usd",
                        "Write the amount in USD, at most 999999999999.999999 (split a larger one into lines).")
