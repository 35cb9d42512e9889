"""The corpus label set against the model's ``id2label``: checked before anything is timed.

A corpus label the model cannot predict (renamed, or never trained) would be
scored as always wrong, and a pass still accepted; a label the model predicts
that the corpus never uses rejects every pass at validation. Both are found
here, from ``config.json`` alone (no torch), by ``isocost init``, ``isocost
check`` and at campaign start.

Example::

    check_labels({"spam", "ham"}, Path("my-model"), "corpus.jsonl")  # → () or raises UserError
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from protocol.errors import UserError
from protocol.hardware.memory import read_model_config


def model_labels(model_dir: Path) -> tuple[str, ...]:
    """The labels the checkpoint predicts, in id order (``config.json`` ``id2label``)."""
    path = Path(model_dir) / "config.json"
    if not path.exists() and not path.is_symlink():
        raise UserError("the model directory has no config.json", str(model_dir),
                        "Save the checkpoint with model.save_pretrained(DIR).")
    config = read_model_config(model_dir)  # a regular UTF-8 file; a key named twice is refused
    id2label = config.get("id2label") if isinstance(config, dict) else None
    if not isinstance(id2label, dict) or not id2label:
        raise UserError("config.json has no id2label", str(path),
                        "Save a sequence-classification checkpoint whose config names its labels "
                        "(id2label = {0: \"…\", …}).")
    try:
        ordered = sorted(((int(key), label) for key, label in id2label.items()), key=lambda item: item[0])
    except ValueError:
        raise UserError("id2label keys must be integer ids", str(path)) from None
    check_label_ids([key for key, _ in ordered], str(path))
    return tuple(str(label) for _, label in ordered)


def check_label_ids(ids: list[int], where: str) -> None:
    """The classifier's output ``i`` is ``id2label[i]``: the ids must be exactly 0 to n-1, or a trial dies at the first
    prediction of a missing id (``{"0": "x", "2": "y"}``: the head has two outputs, 0 and 1)."""
    expected = set(range(len(ids)))
    if set(ids) == expected and len(ids) == len(expected):
        return
    missing = sorted(expected - set(ids))
    extra = sorted(set(ids) - expected)
    parts = ([f"missing: {', '.join(map(str, missing[:10]))}"] if missing else []) + (
        [f"not allowed: {', '.join(map(str, extra[:10]))}"] if extra else [])
    raise UserError(
        f"the model's id2label ids must be 0 to {len(ids) - 1}, one label each ({'; '.join(parts)}): every trial "
        "would fail at the first prediction of a missing id",
        where,
        "Save the checkpoint with consecutive label ids from 0 (model.config.id2label = dict(enumerate(labels))).",
    )


def check_labels(corpus_labels: Iterable[str], model_dir: Path, where: str) -> tuple[str, ...]:
    """Raise if a corpus label is not one the model predicts; return the model's labels the corpus lacks.

    Those extra labels are not an error by themselves (a rare class may be absent from a small corpus), but any
    prediction of one is outside the corpus label set and rejects that pass: callers show them as a warning.
    """
    known = model_labels(model_dir)
    labels = sorted(set(corpus_labels))
    unknown = [label for label in labels if label not in known]
    if unknown:
        raise UserError(
            f"corpus label(s) {', '.join(repr(u) for u in unknown)} are not labels of the model "
            f"(its id2label: {', '.join(repr(k) for k in known)})",
            where,
            "Rename the corpus labels to the model's, or use the checkpoint trained for these labels: "
            "the model can never predict a label it does not have.",
        )
    return tuple(label for label in known if label not in set(labels))
