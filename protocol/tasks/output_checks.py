"""Each output file agrees with itself: what no trial could have written makes the pass not accepted, with a reason.

The seals prove an output file unchanged since its trial ended; these checks make its content possible (issue 38,
class 3). Each is a small function of the parsed file, called by its task's pass check, so a problem is a
reason in the verdict (like a malformed line), never a traceback:

- ``generations.jsonl``: each line's ``text`` is the decoding of its ``tokens`` with the study's own tokenizer
  (special tokens skipped, as the trial decodes; the ``tokenizers`` library on the checkpoint's
  ``tokenizer.json``, no torch), :func:`text_problems`. Where the checkpoint's ``tokenizer.json`` is not there
  (a bundle verified without the model) the texts are not checked, and the pass check says nothing of them.
- every output file is valid UTF-8 (:func:`protocol.io.safe_read.decoded_lines`, used by the predictions and
  generations readers): a reader that replaced a bad byte would score an id or a text the trial never wrote.
- vectors: finite (:mod:`protocol.tasks.embedding`), and of norm 1 where the study normalises them
  (:func:`norm_problems`).
- predictions and every JSON line: no ``NaN`` or ``Infinity`` (the strict reader, :mod:`protocol.io.jsonio`);
  labels inside the corpus label set (:mod:`protocol.tasks.classification`).

Example::

    text_problems(parsed.items, Path("models/smollm2"))   # ["id 'a': text is not the decoding of its tokens …"]
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: How far an L2 norm may be from 1 where the study normalises (float32 rows normalised in fp16 or bf16).
NORM_TOLERANCE = 1e-2
#: transformers' ``clean_up_tokenization``: a checkpoint whose tokenizer config asks for it decodes this way.
_CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
             (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def text_problems(items: Sequence[Any], model_dir: Path | None) -> list[str]:
    """One problem per generation whose ``text`` is not the decoding of its ``tokens`` (the first few named)."""
    tokenizer = _tokenizer(model_dir)
    if tokenizer is None or not items:
        return []
    try:
        decoded = tokenizer.decode_batch([list(item.tokens) for item in items], skip_special_tokens=True)
    except Exception:  # noqa: BLE001 - the tokenizers library raises a bare Exception on an id it cannot decode
        return ["the generated tokens cannot be decoded with the study's tokenizer"]
    wrong = [item.id for item, text in zip(items, decoded, strict=True) if item.text not in (text, _clean_up(text))]
    if not wrong:
        return []
    return [f"{len(wrong)} generation(s) whose text is not the decoding of its tokens with the study's tokenizer, "
            f"e.g. id {wrong[0]!r}"]


def _clean_up(text: str) -> str:
    for before, after in _CLEAN_UP:
        text = text.replace(before, after)
    return text


def _tokenizer(model_dir: Path | None) -> Any:
    """The checkpoint's tokenizer (cached while its ``tokenizer.json`` is unchanged); None when there is none."""
    if model_dir is None:
        return None
    path = Path(model_dir) / "tokenizer.json"
    try:
        info = os.stat(path)
    except OSError:
        return None
    return _load(str(path), info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int, size: int) -> Any:
    from tokenizers import Tokenizer

    from protocol.corpus import MAX_TOKENIZER_BYTES
    from protocol.errors import UserError
    from protocol.io.safe_read import read_text

    try:
        return Tokenizer.from_str(read_text(Path(path), "the model's tokenizer.json", max_bytes=MAX_TOKENIZER_BYTES))
    except (UserError, Exception):  # noqa: BLE001 - a malformed tokenizer.json: `isocost check` names it; nothing to decode with
        return None


def norm_problems(vectors: Any, ids: Sequence[str], what: str) -> list[str]:
    """Rows of a normalised vector file whose L2 norm is not 1 (within :data:`NORM_TOLERANCE`)."""
    import numpy as np

    if vectors is None or not len(vectors):
        return []
    norms = np.linalg.norm(np.asarray(vectors, dtype=np.float64), axis=1)
    bad = ~(np.abs(norms - 1.0) <= NORM_TOLERANCE)
    if not bad.any():
        return []
    first = int(np.argmax(bad))
    return [f"{what}: {int(bad.sum())} vector(s) not of norm 1 though the study normalises them, e.g. id "
            f"{ids[first]!r} (norm {norms[first]:.4g})"]
