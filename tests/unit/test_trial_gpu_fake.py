"""The trial's GPU path, with CPU torch posing as CUDA and as ROCm (tests/unit/fakegpu.py).

These assert the calls the trial makes (synchronise, reset peaks, events per forward) and what it
writes (batches.jsonl, status.json energy and device time); a real card is only exercised by
tests/gpu (marker ``gpu``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from fakegpu import GPU_UUID, FakeModel, FakeNvml, FakeTokenizer, pose_as_gpu, write_corpus

from protocol.records import codec
from protocol.records.stages import TrialSpec, Variant, WarmupRule
from protocol.study.shapes import pass_shapes, warmup_shapes

torch = pytest.importorskip("torch")

BASE = Variant(variant_id="v", stack="cuda", device="cuda", precision="fp32", quantization="none", compile=False,
               attention="sdpa", batch_size=4, padding="longest", max_length=16, length_grouping="none",
               resume="none", threads=1, seed=0, deterministic=False)


def make_spec(tmp_path: Path, lengths: list[int], buckets: dict[str, str] | None = None,
              shapes: tuple[tuple[int, int], ...] | None = None, **variant: Any) -> TrialSpec:
    corpus = tmp_path / "corpus.jsonl"
    ids = write_corpus(corpus, lengths)
    if buckets is None:
        buckets = {i: ("short" if n <= 5 else "long") for i, n in zip(ids, lengths, strict=True)}
    chosen = dataclasses.replace(BASE, **variant)
    if shapes is None:  # as the host computes them from corpus_index.csv (token counts with special tokens)
        shapes = warmup_shapes([n + 2 for n in lengths], chosen.batch_size, chosen.padding, chosen.max_length,
                               chosen.length_grouping)
    return TrialSpec(trial_id="t1", campaign_id="c", study_sha256="s", variant=chosen, warmup_shapes=shapes,
                     repetition=1, order_index=1, attempt=1, corpus_path=str(corpus), corpus_fingerprint="x",
                     model_path=str(tmp_path / "model"), model_fingerprint="y",
                     warmup=WarmupRule("tuning", 2, 1, "warmup"), warmup_texts=("one two", "three"),
                     launcher="process", input_buckets=buckets)


def run_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: TrialSpec, backend: str | None = "cuda",
              compiled: bool = False):
    """Run the trial's stages in this process; returns (trial, call log, fake model)."""
    from protocol.tasks.classification import trial as model_module
    from runner.trial.run import Trial

    log = pose_as_gpu(monkeypatch, torch, backend) if backend else None
    fake_model = FakeModel(torch, log or _NullLog(), compiled=compiled)

    def load(cls: Any, path: Path, variant: Variant, torch_: Any) -> Any:
        return cls(tokenizer=FakeTokenizer(torch), model=fake_model, variant=variant, torch=torch,
                   labels={0: "a", 1: "b"}, device=torch.device("cpu"))

    monkeypatch.setattr(model_module.Classifier, "load", classmethod(load))
    monkeypatch.setattr("runner.trial.energy.POWERCAP", tmp_path / "no-powercap")
    out = tmp_path / "out"
    out.mkdir()
    trial = Trial(spec, out)
    trial.base_manifest()
    trial.setup_torch()
    trial.run()
    trial.write_status("ok")
    return trial, log, fake_model


class _NullLog:
    calls: list[str] = []


def batches(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "batches.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_fake_gpu_writes_one_batch_record_per_batch_with_device_time_of_its_forwards(tmp_path, monkeypatch, backend):
    FakeNvml().install(monkeypatch)
    lengths = [3, 9, 4, 12, 2, 7, 5, 1, 10, 6]  # 10 inputs at batch 4: batches of 4, 4, 2
    trial, log, model = run_trial(tmp_path, monkeypatch, make_spec(tmp_path, lengths, stack=backend), backend)
    records = batches(trial.out)
    assert [r["index"] for r in records] == [0, 1, 2]
    assert [r["n_inputs"] for r in records] == [4, 4, 2]
    # tokens: the ids fed to the model (words + 2 special tokens), after truncation at 16, before padding
    fed = [min(n + 2, 16) for n in lengths]
    assert [r["n_tokens"] for r in records] == [sum(fed[0:4]), sum(fed[4:8]), sum(fed[8:10])]
    assert records[0]["inputs_by_bucket"] == {"short": 2, "long": 2}
    assert records[0]["tokens_by_bucket"] == {"short": fed[0] + fed[2], "long": fed[1] + fed[3]}
    assert sum(sum(r["inputs_by_bucket"].values()) for r in records) == len(lengths)
    for r in records:
        assert set(r) == {"index", "n_inputs", "n_tokens", "inputs_by_bucket", "tokens_by_bucket", "batch_s",
                          "device_s"}
        assert r["batch_s"] > 0
        assert 0 < r["device_s"] < r["batch_s"]  # the forward alone, timed by its own events
    status = json.loads((trial.out / "status.json").read_text())
    assert status["schema_version"] == 2
    # gpu_pass_s is device time of the forwards (summed), not a span around the whole pass
    assert status["phases"]["gpu_pass_s"] == pytest.approx(sum(r["device_s"] for r in records))
    assert status["phases"]["gpu_pass_s"] <= status["phases"]["pass_s"]
    # warm-up forwards carry no events; after it, each forward sits between its own two events
    calls = log.names("event.record", "forward", "reset_peak_memory_stats")
    after = calls[calls.index("reset_peak_memory_stats") + 1:]
    assert "event.record" not in calls[: calls.index("reset_peak_memory_stats")]
    assert after == ["event.record", "forward", "event.record"] * 3


def test_cpu_trial_batches_have_null_device_time_and_energy_reasons(tmp_path, monkeypatch):
    spec = make_spec(tmp_path, [3, 4, 5], stack="cpu", device="cpu", batch_size=2)
    trial, _, _ = run_trial(tmp_path, monkeypatch, spec, backend=None)
    records = batches(trial.out)
    assert [r["n_inputs"] for r in records] == [2, 1]
    assert all(r["device_s"] is None for r in records)
    status = json.loads((trial.out / "status.json").read_text())
    assert status["gpu_energy_j"] is None and status["gpu_energy_reason"] == "CPU trial: no GPU energy counter"
    assert status["cpu_energy_j"] is None and "no RAPL powercap interface" in status["cpu_energy_reason"]


def test_study_without_buckets_puts_every_input_in_bucket_all(tmp_path, monkeypatch):
    spec = make_spec(tmp_path, [3, 4, 5], buckets={}, stack="cpu", device="cpu", batch_size=8)
    trial, _, _ = run_trial(tmp_path, monkeypatch, spec, backend=None)
    assert batches(trial.out)[0]["inputs_by_bucket"] == {"all": 3}


def test_gpu_energy_is_read_from_the_trials_card_around_the_pass(tmp_path, monkeypatch):
    nvml = FakeNvml(energy_mj=[5_000_000, 5_012_345]).install(monkeypatch)
    trial, _, _ = run_trial(tmp_path, monkeypatch, make_spec(tmp_path, [3, 4, 5]), "cuda")
    status = json.loads((trial.out / "status.json").read_text())
    assert status["gpu_energy_j"] == pytest.approx(12.345)
    assert status["gpu_energy_reason"] == ""
    assert nvml.energy_handles == [1, 1]  # the card whose UUID torch reported, not NVML device 0
    assert trial.manifest["device"]["gpu_uuid"] == GPU_UUID


def test_gpu_energy_without_nvml_is_null_with_reason(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    trial, _, _ = run_trial(tmp_path, monkeypatch, make_spec(tmp_path, [3]), "cuda")
    status = json.loads((trial.out / "status.json").read_text())
    assert status["gpu_energy_j"] is None
    assert "nvidia-ml-py (pynvml) not installed" in status["gpu_energy_reason"]


def test_oom_trial_reports_energy_not_measured(tmp_path, monkeypatch):
    from runner.trial.run import Trial

    trial = Trial(make_spec(tmp_path, [3]), tmp_path)
    trial.write_status("oom", "boom")
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["gpu_energy_j"] is None
    assert status["gpu_energy_reason"] == "not measured: the measured pass did not complete (status oom)"


def pass_and_warmup_shapes(model: FakeModel, n_pass_batches: int) -> tuple[list, list]:
    return model.shapes[: -n_pass_batches], model.shapes[-n_pass_batches:]


@pytest.mark.parametrize(("padding", "grouping"), [("longest", "none"), ("longest", "sort"), ("max_length", "none")])
def test_warmup_runs_the_passs_longest_shortest_and_last_shapes_at_the_variants_batch(
        tmp_path, monkeypatch, padding, grouping):
    FakeNvml().install(monkeypatch)
    lengths = [3, 30, 4, 12, 2, 7, 5, 1, 10, 6, 20]  # 11 inputs at batch 4: the last batch has 3 rows
    spec = make_spec(tmp_path, lengths, padding=padding, length_grouping=grouping, max_length=24)
    trial, _, model = run_trial(tmp_path, monkeypatch, spec)
    expected = pass_shapes([n + 2 for n in lengths], 4, padding, 24, grouping)
    warm, measured = pass_and_warmup_shapes(model, len(expected))
    assert measured == expected  # the host's arithmetic matches what the trial really ran
    longest = max(expected, key=lambda s: (s[1], s[0]))
    shortest = min(expected, key=lambda s: (s[1], -s[0]))
    for shape in (longest, shortest, expected[-1]):
        assert shape in warm, (shape, warm)
    assert expected[-1][0] == 3
    assert trial.manifest["warmup_shapes"] == [list(s) for s in spec.warmup_shapes]


def test_length_sorted_pass_really_runs_in_length_order(tmp_path, monkeypatch):
    lengths = [9, 1, 5, 3, 7, 2]
    spec = make_spec(tmp_path, lengths, length_grouping="sort", batch_size=2, stack="cpu", device="cpu")
    trial, _, model = run_trial(tmp_path, monkeypatch, spec, backend=None)
    assert model.shapes[-3:] == [(2, 2 + 2), (2, 5 + 2), (2, 9 + 2)]
    ids = [json.loads(line)["id"] for line in (trial.out / "predictions.jsonl").read_text().splitlines()]
    assert ids == ["t001", "t005", "t003", "t002", "t004", "t000"]


def test_compilations_inside_the_pass_are_counted_and_flagged(tmp_path, monkeypatch):
    FakeNvml().install(monkeypatch)
    lengths = [3, 9, 4, 12, 2, 7, 5, 1, 10]
    # a warm-up that misses the pass's shapes (as before issue 12): every new shape compiles inside the pass
    spec = make_spec(tmp_path, lengths, shapes=(), compile=True)
    trial, _, model = run_trial(tmp_path, monkeypatch, spec, compiled=True)
    status = json.loads((trial.out / "status.json").read_text())
    new_in_pass = {s for s in model.shapes[-3:]} - set(model.shapes[:-3])
    assert status["pass_compilations"] == len(new_in_pass) > 0


def test_warmup_covering_the_shapes_leaves_no_compilation_in_the_pass(tmp_path, monkeypatch):
    FakeNvml().install(monkeypatch)
    lengths = [3, 9, 4, 12, 2, 7, 5, 1, 10]  # three batches: longest, shortest and last are all of them
    trial, _, _ = run_trial(tmp_path, monkeypatch, make_spec(tmp_path, lengths, compile=True), compiled=True)
    status = json.loads((trial.out / "status.json").read_text())
    assert status["pass_compilations"] == 0


def test_pass_compilations_is_empty_with_reason_without_compile(tmp_path, monkeypatch):
    FakeNvml().install(monkeypatch)
    trial, _, _ = run_trial(tmp_path, monkeypatch, make_spec(tmp_path, [3, 4]))
    status = json.loads((trial.out / "status.json").read_text())
    assert status["pass_compilations"] is None
    assert status["empty_reasons"]["pass_compilations"] == "not counted: the variant does not use torch.compile"


# -- memory (defect 5) and the OOM retry (defect 6) ----------------------------------------------


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_device_memory_from_mem_get_info_sampled_per_batch_on_both_backends(tmp_path, monkeypatch, backend):
    FakeNvml().install(monkeypatch)
    monkeypatch.delitem(__import__("sys").modules, "pynvml")  # no NVML at all: ROCm hosts have none
    from fakegpu import TOTAL_BYTES

    frees = iter([70, 40, 55, 60, 60, 60] + [60] * 20)
    trial, log, _ = run_trial_with_frees(tmp_path, monkeypatch, backend, frees)
    status = json.loads((trial.out / "status.json").read_text())
    memory = status["memory"]
    assert memory["device_used_max_bytes"] == TOTAL_BYTES - 40 * 2**30  # the fullest sample, after batch 2
    assert memory["device_total_bytes"] == TOTAL_BYTES
    assert memory["device_used_bytes"] == TOTAL_BYTES - 60 * 2**30  # read once more after the pass
    assert memory["peak_allocated_bytes"] == log.allocated_bytes
    assert memory["peak_reserved_bytes"] == log.reserved_bytes  # kept apart, never summed
    assert "device_used_bytes" not in status["empty_reasons"]
    calls = log.names("reset_peak_memory_stats", "mem_get_info", "forward")
    assert calls[calls.index("reset_peak_memory_stats") + 1:] == ["forward", "mem_get_info"] * 3 + ["mem_get_info"]


def run_trial_with_frees(tmp_path, monkeypatch, backend, frees):
    from protocol.tasks.classification import trial as model_module
    from runner.trial.run import Trial

    log = pose_as_gpu(monkeypatch, torch, backend)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (log.calls.append("mem_get_info"),
                                                             (next(frees) * 2**30, TOTAL))[1])
    fake_model = FakeModel(torch, log)
    monkeypatch.setattr(model_module.Classifier, "load", classmethod(
        lambda cls, path, variant, torch_: cls(tokenizer=FakeTokenizer(torch), model=fake_model, variant=variant,
                                               torch=torch, labels={0: "a", 1: "b"}, device=torch.device("cpu"))))
    monkeypatch.setattr("runner.trial.energy.POWERCAP", tmp_path / "no-powercap")
    out = tmp_path / "out"
    out.mkdir()
    trial = Trial(make_spec(tmp_path, [3, 9, 4, 12, 2, 7, 5, 1, 10, 6], stack=backend), out)
    trial.base_manifest()
    trial.setup_torch()
    trial.run()
    trial.write_status("ok")
    return trial, log, fake_model


TOTAL = 80 * 2**30


def run_main(tmp_path, monkeypatch, spec, fake_model):
    """The trial's entry point (``python -m runner.trial``), fingerprints not checked, fake model."""
    from protocol.tasks.classification import trial as model_module
    from runner.trial import run as run_module

    monkeypatch.setattr(model_module.Classifier, "load", classmethod(
        lambda cls, path, variant, torch_: cls(tokenizer=FakeTokenizer(torch), model=fake_model, variant=variant,
                                               torch=torch, labels={0: "a", 1: "b"}, device=torch.device("cpu"))))
    monkeypatch.setattr(run_module.Trial, "verify", lambda self: "")
    monkeypatch.setattr("runner.trial.energy.POWERCAP", tmp_path / "no-powercap")
    monkeypatch.setattr("signal.signal", lambda *a: None)
    spec_path = tmp_path / "spec.json"
    codec.write_record(spec_path, spec)
    out = tmp_path / "out"
    code = run_module.main([str(spec_path), str(out)])
    return code, json.loads((out / "status.json").read_text())


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_oom_row_keeps_allocated_and_reserved_peaks_apart(tmp_path, monkeypatch, backend):
    log = pose_as_gpu(monkeypatch, torch, backend)
    monkeypatch.setenv("ISOCOST_FAULT_INJECT", "oom-at-batch:1")
    code, status = run_main(tmp_path, monkeypatch, make_spec(tmp_path, [3, 9, 4, 12, 2, 7], stack=backend),
                            FakeModel(torch, log))
    assert code == 1 and status["status"] == "oom"
    assert status["memory"]["peak_allocated_bytes"] == log.allocated_bytes
    assert status["memory"]["peak_reserved_bytes"] == log.reserved_bytes
    assert status["memory"]["device_used_max_bytes"] is not None


class Held:
    """Stands for a failed batch's activations: alive as long as something references it."""


class OomModel(FakeModel):
    def __init__(self, torch_: Any, log: Any, alive: Any) -> None:
        super().__init__(torch_, log)
        self.alive = alive

    def __call__(self, input_ids: Any, attention_mask: Any) -> Any:
        if input_ids.shape[0] > 2:
            activations = Held()  # a local of the failing frame: the traceback keeps it alive
            self.alive.add(activations)
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return super().__call__(input_ids, attention_mask)


def test_oom_retry_frees_the_failed_batch_before_empty_cache(tmp_path, monkeypatch):
    import gc
    import weakref

    log = pose_as_gpu(monkeypatch, torch, "cuda")
    alive: weakref.WeakSet = weakref.WeakSet()
    seen_at_empty_cache: list[int] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: seen_at_empty_cache.append(len(alive)))
    gc.disable()  # only references count here, as for CUDA tensors freed by refcount
    try:
        spec = make_spec(tmp_path, [3, 9, 4, 12], shapes=(), resume="halve-batch-on-oom")
        code, status = run_main(tmp_path, monkeypatch, spec, OomModel(torch, log, alive))
    finally:
        gc.enable()
    assert code == 0 and status["status"] == "ok" and status["oom_events"] == 1
    assert seen_at_empty_cache == [0]  # the failed batch's tensors were already gone


# -- settings that change GPU numbers (defect 7) -----------------------------------------------------


def test_manifest_records_tf32_precision_attention_and_determinism(tmp_path, monkeypatch):
    FakeNvml().install(monkeypatch)
    torch.backends.cuda.matmul.allow_tf32 = True  # as a user's sitecustomize or a library might
    try:
        monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        trial, _, _ = run_trial(tmp_path, monkeypatch, make_spec(tmp_path, [3, 4], deterministic=True))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        torch.use_deterministic_algorithms(False)
    numerics = trial.manifest["numerics"]
    assert numerics["float32_matmul_precision"] == "high"
    assert numerics["cuda_matmul_allow_tf32"] is True
    assert set(numerics["sdpa_backends_enabled"]) >= {"flash", "mem_efficient", "math"}
    determinism = trial.manifest["determinism"]
    assert determinism["deterministic_algorithms_enabled"] is True
    assert determinism["fill_uninitialized_memory"] in (True, False)
    assert determinism["cublas_workspace_config"] == ":4096:8"
    assert determinism["deterministic_api"] == "torch.set_deterministic_debug_mode"  # eager: Inductor not loaded
    assert determinism["inductor_deterministic"] is None
    assert "does not use torch.compile" in trial.manifest["empty_reasons"]["inductor_deterministic"]
    assert trial.manifest["attention_ops"] == []  # the fake model has no attention operator
    assert "no fused attention operator" in trial.manifest["empty_reasons"]["attention_ops"]


# -- refusals (defect 8) ---------------------------------------------------------------------------


def test_cuda_build_without_a_gpu_refuses_naming_it(tmp_path, monkeypatch):
    log = pose_as_gpu(monkeypatch, torch, "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, status = run_main(tmp_path, monkeypatch, make_spec(tmp_path, [3]), FakeModel(torch, log))
    assert code == 3 and status["status"] == "refused"
    assert status["error"].startswith("no GPU visible to the trial: torch")
    assert "forward" not in log.calls


@pytest.mark.parametrize(("stack", "backend"), [("cuda", "rocm"), ("rocm", "cuda"), ("cuda", None)])
def test_stack_other_than_the_detected_backend_refuses(tmp_path, monkeypatch, stack, backend):
    log = pose_as_gpu(monkeypatch, torch, backend) if backend else None
    if backend is None:  # a CPU build, whichever torch this machine has (a CUDA build without a GPU, say)
        monkeypatch.setattr(torch.version, "cuda", None)
        monkeypatch.setattr(torch.version, "hip", None)
    code, status = run_main(tmp_path, monkeypatch, make_spec(tmp_path, [3], stack=stack),
                            FakeModel(torch, log or _NullLog()))
    assert code == 3 and status["status"] == "refused"
    assert status["error"].startswith(f"torch build does not match the study's stack: the study's stack is '{stack}'")
    assert f"is a {backend or 'cpu'} build" in status["error"]


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_sync_order_and_peak_reset_after_warmup(tmp_path, monkeypatch, backend):
    nvml = FakeNvml().install(monkeypatch)
    original = nvml._energy

    def energy(handle):  # log the energy reads among the device calls
        log.calls.append("energy")
        return original(handle)

    nvml._energy = energy
    import sys

    sys.modules["pynvml"].nvmlDeviceGetTotalEnergyConsumption = energy
    log = pose_as_gpu(monkeypatch, torch, backend)
    trial, _, model = run_trial_logged(tmp_path, monkeypatch, make_spec(tmp_path, [3, 9, 4, 12, 2], stack=backend),
                                       log)
    calls = log.names("synchronize", "reset_peak_memory_stats", "forward", "energy")
    reset = calls.index("reset_peak_memory_stats")
    warmup, measured = calls[:reset], calls[reset + 1:]
    # warm-up: bracketed by synchronisations (its timer), then one untimed forward that reads the attention
    # operators; every one of them before the reset of the peaks
    assert warmup[0] == "synchronize" and warmup.count("forward") >= 2
    assert warmup[-2:] == ["synchronize", "forward"]
    # measured pass: sync, energy read, forwards, sync, energy read, in this order
    first, last = measured.index("forward"), len(measured) - 1 - measured[::-1].index("forward")
    assert measured[:first] == ["synchronize", "energy"] if backend == "cuda" else measured[:first] == ["synchronize"]
    assert measured[last + 1:][:1] == ["synchronize"]
    if backend == "cuda":
        assert measured[last + 1:] == ["synchronize", "energy"]


def run_trial_logged(tmp_path, monkeypatch, spec, log):
    from protocol.tasks.classification import trial as model_module
    from runner.trial.run import Trial

    fake_model = FakeModel(torch, log)
    monkeypatch.setattr(model_module.Classifier, "load", classmethod(
        lambda cls, path, variant, torch_: cls(tokenizer=FakeTokenizer(torch), model=fake_model, variant=variant,
                                               torch=torch, labels={0: "a", 1: "b"}, device=torch.device("cpu"))))
    monkeypatch.setattr("runner.trial.energy.POWERCAP", tmp_path / "no-powercap")
    out = tmp_path / "out"
    out.mkdir()
    trial = Trial(spec, out)
    trial.base_manifest()
    trial.setup_torch()
    trial.run()
    return trial, log, fake_model


def test_rocm_facts_and_energy_come_from_the_trials_card(tmp_path, monkeypatch):
    from fakegpu import FakeAmdsmi

    smi = FakeAmdsmi(accumulators=[10_000, 30_000]).install(monkeypatch)
    trial, _, _ = run_trial(tmp_path, monkeypatch, make_spec(tmp_path, [3, 4, 5], stack="rocm"), "rocm")
    device = trial.manifest["device"]
    assert device["gpu_uuid"] == "amd-uuid-trial" and device["pci_bus_id"] == "00000000:65:00.0"
    assert device["driver_version"] == "6.12.12"
    assert smi.energy_handles == [1, 1]  # matched by PCI bus id, not processor 0
    status = json.loads((trial.out / "status.json").read_text())
    assert status["gpu_energy_j"] == pytest.approx(20_000 * 15.259 / 1e6)
