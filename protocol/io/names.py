"""Names and free text from files a user (or a stranger) wrote, checked where they enter and made safe where they leave.

A name travels: a catalog's GPU name becomes a configuration id in ``decide --format csv``, a
Markdown table of decision.md, a heading of report.html and a line on a terminal. Two rules:

- where a name enters, it is checked (:func:`check_gpu_name`, :func:`check_plain_text`): a GPU name
  is lower-case letters, digits, ``.``, ``_``, ``+`` and ``-``, starting with a letter or digit
  (never ``=``, ``+``, ``-`` or ``@``, which a spreadsheet runs as a formula); free text (a catalog's
  source, an expense's description, the study's question) holds no control character (an ANSI
  escape that would rewrite a terminal, a NUL, a carriage return) and no bidirectional override
  (text that reads differently than it is stored);
- where text leaves, it is made safe for where it goes: :func:`terminal_text` for a terminal,
  :func:`markdown_text` for Markdown, :func:`protocol.io.csvio.safe_cell` for CSV; HTML is written
  with ``html.escape``.

Example::

    check_gpu_name(" RTX-4090 ", "--gpu")           # "rtx-4090"
    check_gpu_name("=HYPERLINK(1)", "catalog.csv:2")  # UserError
    terminal_text("a\\x1b[2Jb")                       # "a\\\\x1b[2Jb"
"""

from __future__ import annotations

import re
import unicodedata

from protocol.errors import UserError

MAX_GPU_NAME_CHARS = 64
GPU_NAME = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")
#: Characters that make text display differently from what it holds (Trojan Source, CVE-2021-42574).
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def check_gpu_name(name: object, where: str) -> str:
    """A GPU type as catalogs and rentals name it, lower-cased and stripped; refused unless it is a plain name."""
    key = name.strip().lower() if isinstance(name, str) else ""
    if not key:
        raise UserError("the GPU name is empty", where, "Name the GPU type, e.g. rtx-4090.")
    if len(key) > MAX_GPU_NAME_CHARS or not GPU_NAME.fullmatch(key):
        raise UserError(f"GPU name {key[:80]!a} is not a plain name", where,
                        f"Use 1 to {MAX_GPU_NAME_CHARS} lower-case letters, digits, '.', '_', '+' or '-', starting "
                        "with a letter or digit (e.g. rtx-4090, h100-sxm).")
    return key


def unsafe_character(text: str, *, newlines: bool = False) -> str | None:
    """The first control character or bidirectional override in ``text`` (``None``: there is none).

    A tab and, with ``newlines``, a line feed are allowed.
    """
    for char in text:
        if char in BIDI_CONTROLS or (unicodedata.category(char) == "Cc"
                                     and not (char == "\t" or (newlines and char == "\n"))):
            return char
    return None


def check_plain_text(text: str, what: str, where: str, *, max_chars: int = 1000, newlines: bool = False) -> str:
    """Free text with no control character or bidirectional override, at most ``max_chars`` long."""
    if len(text) > max_chars:
        raise UserError(f"{what} is longer than {max_chars} characters ({len(text)})", where,
                        f"Keep {what} to one short line.")
    bad = unsafe_character(text, newlines=newlines)
    if bad is not None:
        raise UserError(f"{what} holds the control character {bad!a}", where,
                        "Remove it: control characters and direction overrides would change how the text "
                        "reads on a terminal or a page.")
    return text


def terminal_text(text: str) -> str:
    """Text a terminal prints as it is: control characters and direction overrides as ``\\xNN`` escapes.

    Line feeds and tabs stay (messages are several lines). Example: ``terminal_text("\\x1b[31m") == "\\\\x1b[31m"``.
    """
    if unsafe_character(text, newlines=True) is None:
        return text
    return "".join(char.encode("unicode_escape").decode("ascii")
                   if char in BIDI_CONTROLS or (unicodedata.category(char) == "Cc" and char not in "\n\t")
                   else char for char in text)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]<>|])")


def markdown_text(text: str) -> str:
    """Text from a file, shown literally in Markdown (one line; no link, image, HTML tag or table break).

    Example: ``markdown_text("a|b <img>") == "a\\\\|b \\\\<img\\\\>"``.
    """
    flat = " ".join(terminal_text(text).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", flat)


_REF_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
#: A registry host is what Docker takes for one: a first component holding "." or ":", "localhost", or [IPv6].
_REF_HOST = (r"(?:localhost|\[[0-9A-Fa-f:]+\]|(?=[^/]*[.:])[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
             r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)(?::[0-9]{1,5})?")
#: Docker's reference grammar (distribution/reference): [HOST[:PORT]/]PATH[:TAG][@sha256:DIGEST], or an image ID.
IMAGE_REFERENCE = re.compile(rf"^(?:(?:{_REF_HOST}/)?{_REF_COMPONENT}(?:/{_REF_COMPONENT})*"
                             r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
                             r"|sha256:[0-9a-f]{64}|[0-9a-f]{12,64})$")


def check_image_reference(ref: str, where: str) -> str:
    """An image reference in Docker's own grammar, checked before an engine sees it (an engine answers a malformed
    one with an HTTP 400, not a message). Example: ``check_image_reference("127.0.0.1:5000/isocost/cpu@sha256:…")``.
    """
    ref = ref.strip()
    if len(ref) > 512 or not IMAGE_REFERENCE.fullmatch(ref):
        raise UserError(f"{ref[:120]!a} is not an image reference", where,
                        "Name an image as REPOSITORY@sha256:<64 hex> (e.g. 127.0.0.1:5000/isocost/cpu@sha256:…) "
                        "or by its image ID (sha256:<64 hex>).")
    return ref
