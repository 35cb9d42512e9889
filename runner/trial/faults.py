"""Fault injection for tests (``ISOCOST_FAULT_INJECT=KIND:VALUE``), never set in real campaigns.

Recorded in the manifest when present. Kinds: ``sleep-per-batch:S``, ``oom-at-batch:N``,
``oom-if-batch-over:N``, ``hang-at-batch:N``, ``allocate-mib:M`` (at the first batch),
``fill-device-at-batch:N`` (a REAL device out-of-memory: :func:`fill_device` before batch N; used by
``isocost selfcheck``), ``corrupt:duplicate|foreign-id|bad-label|truncate`` (the prediction file a
buggy runner would write), ``kill-server-at-batch:N`` (the engine's HTTP server killed before batch N: each
callable in :data:`SERVER_KILLERS`, which an engine that starts a server fills), ``bad-request-at-batch:N`` (the
first request of batch N sent to the engine's HTTP server malformed, so the real server answers it with an HTTP
error: each callable in :data:`SERVER_SPOILERS`), ``server-port-taken:1`` and
``server-ready-timeout:S`` (read by that engine when it starts its server: another listener on its port first; a
wait for readiness of S seconds), and ``disagree:SHARE`` (a well-formed pass whose outputs differ from the model's on a
declared share of the ids, chosen by :func:`disagrees`: another card or stack that answers differently, for
the tests of the comparison across campaigns). Also: :func:`is_oom`, how the trial tells an out-of-memory
failure from others.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.records.selfcheck import FILL_MAX_STEPS, FILL_STEPS_PER_FREE

if TYPE_CHECKING:
    from runner.trial.tasks.base import TrialTask

#: Test hook, never set in real campaigns; recorded in the manifest when present.
FAULT_ENV = "ISOCOST_FAULT_INJECT"
#: What ``kill-server-at-batch`` calls: each engine server's kill (SIGKILL), added when the engine starts one.
SERVER_KILLERS: list[Callable[[], None]] = []
#: What ``bad-request-at-batch`` calls: each engine server's "spoil the next request", added when it starts one.
SERVER_SPOILERS: list[Callable[[], None]] = []


class SimulatedOOM(MemoryError):
    """Raised by the fault-injection hook to exercise the OOM path."""


def is_oom(exc: BaseException) -> bool:
    """True for an out-of-memory failure: ``MemoryError``, torch's ``OutOfMemoryError`` or a message saying so."""
    if isinstance(exc, MemoryError):
        return True
    name = type(exc).__name__
    return name == "OutOfMemoryError" or "out of memory" in str(exc).lower()


def allocate_device_bytes(torch: Any, nbytes: int) -> Any:
    """One uninitialised block of ``nbytes`` on the trial's GPU (a seam the fake-GPU tests replace)."""
    return torch.empty(nbytes, dtype=torch.uint8, device="cuda")


def fill_device(torch: Any, held: list[Any], max_steps: int = FILL_MAX_STEPS) -> int:
    """Allocate GPU memory in steps of 1/FILL_STEPS_PER_FREE of the free memory (at least 64 MiB) into ``held``
    until the device refuses: torch's ``OutOfMemoryError`` propagates, and the blocks are released when
    ``held`` is. Capped at ``max_steps`` steps (twice the free memory); returns the step in bytes when the
    cap is reached without a refusal (a device that overcommits memory)."""
    free, _total = torch.cuda.mem_get_info()
    step = max(int(free) // FILL_STEPS_PER_FREE, 64 * 2**20)
    for _ in range(max_steps):
        held.append(allocate_device_bytes(torch, step))
    return step


def disagrees(ident: str, share: float) -> bool:
    """Whether ``disagree:SHARE`` changes the output of input ``ident``: a fixed function of the id (its sha256
    read as a number in [0, 1) below ``share``), so a test knows which ids differ."""
    import hashlib

    return int(hashlib.sha256(ident.encode()).hexdigest()[:12], 16) / 16**12 < share


class FaultInjector:
    """The fault this trial was asked to simulate (none unless :data:`FAULT_ENV` is set)."""

    def __init__(self, text: str | None = None) -> None:
        self.text = os.environ.get(FAULT_ENV, "") if text is None else text
        kind, _, value = self.text.partition(":")
        self.kind, self.value = kind, value
        self._ballast: bytearray | None = None

    def before_batch(self, batch_no: int, batch_size: int) -> None:
        """Sleep, fail, hang or allocate before a measured batch, as the fault says."""
        kind, value = self.kind, self.value
        if kind == "sleep-per-batch":
            time.sleep(float(value))
        elif kind == "oom-at-batch" and batch_no >= int(value):
            raise SimulatedOOM(f"simulated out-of-memory at batch {batch_no} ({FAULT_ENV})")
        elif kind == "oom-if-batch-over" and batch_size > int(value):
            raise SimulatedOOM(f"simulated out-of-memory for a batch of {batch_size} > {value} ({FAULT_ENV})")
        elif kind == "hang-at-batch" and batch_no >= int(value):
            while True:
                time.sleep(1)
        elif kind == "kill-server-at-batch" and batch_no == int(value):
            for kill in SERVER_KILLERS:
                kill()
        elif kind == "bad-request-at-batch" and batch_no == int(value):
            for spoil in SERVER_SPOILERS:
                spoil()
        elif kind == "allocate-mib" and batch_no == 0:
            self._ballast = bytearray(int(value) * 2**20)  # touches real memory: a container limit kills us
        elif kind == "fill-device-at-batch" and batch_no == int(value):
            import torch

            held: list[Any] = []  # freed with this frame, once the out-of-memory error has been recorded
            fill_device(torch, held)

    def perturb(self, ids: list[str], outputs: Any, model: Any, task: TrialTask) -> Any:
        """With ``disagree:SHARE``, the batch's outputs changed on the ids :func:`disagrees` picks (the task's own
        ``perturb`` says how: another label for classification); otherwise the outputs as they are."""
        if self.kind != "disagree":
            return outputs
        picked = {ident for ident in ids if disagrees(ident, float(self.value))}
        return task.perturb(ids, outputs, model, picked) if picked else outputs

    def corrupt(self, lines: str, completed: int, expected: int) -> str:
        """Make this trial write a faulty prediction file, as a buggy runner would (``lines``: one batch's)."""
        if self.kind != "corrupt" or not lines:
            return lines
        value = self.value
        if value == "duplicate":
            return lines + lines.splitlines(keepends=True)[0]
        if value == "foreign-id":
            return lines.replace('{"id": "', '{"id": "not-in-corpus-', 1)
        if value == "bad-label":
            item = json.loads(lines.splitlines()[0])
            return lines.replace(json.dumps(item["label"]), '"__no_such_label__"', 1)
        if value == "truncate" and completed + lines.count("\n") >= expected:
            return lines[: len(lines) - 7]  # the last line is cut short, as by a crash mid-write
        return lines
