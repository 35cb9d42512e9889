"""The trial checks and the whole ``python -m runner.trial.selfcheck`` process, on fake CUDA and ROCm.

The model is the selfcheck's own random encoder, real, kept on the CPU while ``torch.cuda`` poses as a
card (tests/unit/fakegpu.py): the trials run the trial's real code (``runner.trial.run.execute``), only
the tensors stay home. fp16 is loaded as bf16 there (a CPU refuses fp16 by design).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest
from fakegpu import FakeAmdsmi, FakeNvml, pose_as_gpu

from protocol.records import codec
from protocol.records.selfcheck import CHECK_NAMES, OOM_BATCH_SIZE, OOM_FAULT, SelfcheckReport
from protocol.records.stages import TrialStatus

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from protocol.tasks.classification.trial import Classifier  # noqa: E402
from runner.launch.launcher import LaunchResult  # noqa: E402
from runner.selfcheck.host import judge_oom_trial  # noqa: E402
from runner.trial import selfcheck as selfcheck_main  # noqa: E402
from runner.trial import selfcheck_trials as trials  # noqa: E402
from runner.trial.selfcheck_device import Context  # noqa: E402
from runner.trial.selfcheck_model import build_random_encoder, prepare_workload  # noqa: E402


@pytest.fixture(scope="module")
def random_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("selfcheck") / "random-model"
    build_random_encoder(path, initializer_range=0.05)  # one label by a wide margin: a stable agreement
    return path


def keep_on_cpu(monkeypatch) -> None:
    """Classifier.load as the trial calls it, the model kept on the CPU (fp16 as bf16 there)."""
    original = Classifier.load.__func__

    def load(cls, path, variant, torch_):
        here = dataclasses.replace(variant, device="cpu", compile=False,
                                   precision="bf16" if variant.precision == "fp16" else variant.precision)
        classifier = original(cls, path, here, torch_)
        classifier.variant = variant
        return classifier

    monkeypatch.setattr(Classifier, "load", classmethod(load))
    monkeypatch.setattr("runner.trial.energy.POWERCAP", Path("/nonexistent-powercap"))


def fake_gpu(monkeypatch, backend: str):
    log = pose_as_gpu(monkeypatch, torch, backend)
    (FakeNvml(energy_mj=[1_000_000 + 1000 * i for i in range(40)]) if backend == "cuda" else
     FakeAmdsmi(accumulators=[10_000 + 100 * i for i in range(40)])).install(monkeypatch)
    keep_on_cpu(monkeypatch)
    return log


def gpu_context(tmp_path, monkeypatch, random_model, backend="cuda", texts=12) -> Context:
    fake_gpu(monkeypatch, backend)
    ctx = Context(torch=torch, device=backend, out=tmp_path, budget_s=300, tensor_device="cpu")
    ctx.usable = True
    from runner.trial.env import device_facts

    ctx.facts, ctx.reasons = device_facts(torch, "cuda")
    ctx.workload = prepare_workload(tmp_path, random_model, None, texts, "given")
    return ctx


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_warmup_check_runs_a_real_trial_and_compares_its_shapes(tmp_path, monkeypatch, random_model, backend):
    ctx = gpu_context(tmp_path, monkeypatch, random_model, backend)
    check = trials.check_warmup(ctx)
    assert check.verdict == "PASS", check
    status = json.loads((tmp_path / "trials" / "fp32" / "status.json").read_text())
    assert status["status"] == "ok" and status["completed"] == 12
    assert 0 < status["phases"]["gpu_pass_s"] <= status["phases"]["pass_s"]  # from the (fake) CUDA events
    spec = json.loads((tmp_path / "trials" / "fp32" / "spec.json").read_text())
    warmed = {tuple(s) for s in check.details["warmup_shapes"]}
    assert {tuple(s) for s in spec["warmup_shapes"]} <= warmed  # longest, shortest and last batch
    assert len(check.details["pass_shapes"]) == 1  # 12 texts at batch 32
    assert ctx.reference == tmp_path / "trials" / "fp32" / "predictions.jsonl"
    assert "busy" in check.figure


def test_warmup_check_fails_when_the_pass_runs_shapes_the_host_did_not_predict(tmp_path, monkeypatch, random_model):
    ctx = gpu_context(tmp_path, monkeypatch, random_model)
    ctx.workload = dataclasses.replace(ctx.workload, token_counts=tuple(3 for _ in ctx.workload.token_counts))
    check = trials.check_warmup(ctx)
    assert check.verdict == "FAIL"
    assert "the host predicts" in check.reason and "did not run the pass's shapes" in check.reason


def test_warmup_check_reports_a_refused_trial(tmp_path, monkeypatch, random_model):
    ctx = gpu_context(tmp_path, monkeypatch, random_model)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    check = trials.check_warmup(ctx)
    assert check.verdict == "FAIL" and "ended refused (exit 3): no GPU visible to the trial" in check.reason


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_numerics_compares_half_precisions_with_fp32_by_id(tmp_path, monkeypatch, random_model, backend):
    ctx = gpu_context(tmp_path, monkeypatch, random_model, backend)
    trials.check_warmup(ctx)
    check = trials.check_numerics(ctx)
    assert check.verdict == "PASS", check
    assert "fp16 agrees with fp32 on 12/12 ids" in check.figure and "bf16 agrees with fp32 on" in check.figure
    assert "float32_matmul_precision highest, TF32 matmul off" in check.figure
    assert check.details["bf16"]["agreement"] >= 0.99


def test_numerics_fails_below_the_agreement_floor(tmp_path, monkeypatch, random_model):
    ctx = gpu_context(tmp_path, monkeypatch, random_model)
    trials.check_warmup(ctx)
    lines = ctx.reference.read_text().splitlines()
    flipped = [json.dumps({**json.loads(line), "label": "__other__"}) for line in lines[:2]]
    ctx.reference.write_text("\n".join(flipped + lines[2:]) + "\n")  # fp32 now disagrees on 2 of 12 ids
    check = trials.check_numerics(ctx)
    assert check.verdict == "FAIL" and "fp16 agrees on 0.8333 < 0.99" in check.reason


def test_numerics_with_the_random_encoder_reports_agreement_without_judging_it(tmp_path, monkeypatch, random_model):
    ctx = gpu_context(tmp_path, monkeypatch, random_model)
    ctx.workload = dataclasses.replace(ctx.workload, source="random")
    trials.check_warmup(ctx)
    lines = ctx.reference.read_text().splitlines()
    ctx.reference.write_text("\n".join([json.dumps({**json.loads(lines[0]), "label": "__other__"}), *lines[1:]]) + "\n")
    check = trials.check_numerics(ctx)
    assert check.verdict == "PASS" and check.details["agreement_judged"] is False
    assert "fp16 agrees with fp32 on 11/12 ids" in check.figure and "agreement reported, not judged" in check.figure


def test_numerics_skips_bf16_on_a_card_without_it(tmp_path, monkeypatch, random_model):
    ctx = gpu_context(tmp_path, monkeypatch, random_model)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    trials.check_warmup(ctx)
    check = trials.check_numerics(ctx)
    assert check.verdict == "PASS" and "bf16 not run: this GPU has no bf16 support" in check.figure


def test_numerics_without_a_reference_is_a_skip(tmp_path):
    ctx = Context(torch=torch, device="cuda", out=tmp_path, budget_s=300)
    assert trials.check_numerics(ctx).reason == "no fp32 reference: the warm-up check did not complete"


def test_compile_check_counts_compilations_inside_the_pass(tmp_path, monkeypatch, random_model):
    ctx = gpu_context(tmp_path, monkeypatch, random_model)
    check = trials.check_compile(ctx)  # the model is not really compiled here: nothing compiles in the pass
    assert check.verdict == "PASS", check
    assert check.figure.startswith("0 compilations inside the pass")
    from torch._dynamo.utils import counters

    original = trials.ShapeTrial.probe_attention

    def probe_then_compile(self, classifier):  # a recompilation during the pass, as a missed shape would cause
        original(self, classifier)
        forward = classifier.model

        def compiling(**batch):
            counters["stats"]["unique_graphs"] += 1
            return forward(**batch)

        classifier.model = compiling

    monkeypatch.setattr(trials.ShapeTrial, "probe_attention", probe_then_compile)
    check = trials.check_compile(ctx)
    assert check.verdict == "FAIL" and "recompilation was timed" in check.reason


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_the_oom_trial_ends_as_an_oom_row_with_its_first_batch_and_peaks(tmp_path, monkeypatch, random_model,
                                                                         backend):
    ctx = gpu_context(tmp_path, monkeypatch, random_model, backend)
    directory = trials.write_oom_trial(ctx)
    spec = json.loads((directory / "spec.json").read_text())
    assert spec["variant"]["batch_size"] == OOM_BATCH_SIZE and spec["launcher"] == "process"
    made = []

    def allocate(torch_, nbytes):  # the fake device refuses the 20th block
        if len(made) == 19:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.19 GiB")
        made.append(nbytes)
        return torch.empty(0)

    monkeypatch.setattr("runner.trial.faults.allocate_device_bytes", allocate)
    monkeypatch.setenv("ISOCOST_FAULT_INJECT", OOM_FAULT)
    from protocol.records.stages import TrialSpec
    from runner.trial.run import Trial, execute

    code = execute(Trial(codec.from_dict(TrialSpec, spec), directory))  # what python -m runner.trial runs
    status = codec.read_record(directory / "status.json", TrialStatus)
    assert code == 1 and status.status == "oom" and status.completed == OOM_BATCH_SIZE
    check = judge_oom_trial(codec.from_dict(TrialSpec, spec), directory, LaunchResult(exit_code=code))
    assert check.verdict == "PASS", check
    assert check.details["row_status"] == "oom"
    assert check.figure.startswith(f"row status oom (exit 1, status.json written): {OOM_BATCH_SIZE} of 12 inputs")


def run_process(tmp_path, monkeypatch, budget_s=300.0, device="cuda", model=None, steps=None) -> SelfcheckReport:
    """The check process's main loop in this process (``steps``: only these, to keep the test short)."""
    args = argparse.Namespace(device=device, out=tmp_path, budget_s=budget_s, texts=6, model=model,
                              model_source="random", corpus=None)
    if steps is not None:
        monkeypatch.setattr(selfcheck_main, "STEPS", tuple(s for s in selfcheck_main.STEPS if s.name in steps))
    monkeypatch.setattr("runner.trial.selfcheck_device._matmuls", lambda ctx, reps: None)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr("runner.trial.selfcheck_device.Context.__post_init__",
                        lambda self: setattr(self, "tensor_device", "cpu"))
    monkeypatch.setattr("runner.trial.faults.allocate_device_bytes", _refuse_at_once)
    selfcheck_main.Selfcheck(args, torch).run()
    return codec.read_record(tmp_path / "selfcheck.json", SelfcheckReport)


def _refuse_at_once(torch_, nbytes):
    raise torch.cuda.OutOfMemoryError("CUDA out of memory")


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_the_check_process_runs_every_step_in_order_and_writes_the_oom_trial(tmp_path, monkeypatch, backend):
    fake_gpu(monkeypatch, backend)
    report = run_process(tmp_path, monkeypatch, device=backend)
    assert report.device == backend
    names = [c.name for c in report.checks]
    assert names == [n for n in CHECK_NAMES if n != "oom-trial"]
    verdicts = {c.name: c.verdict for c in report.checks}
    assert verdicts["gpu"] == verdicts["warmup"] == verdicts["numerics"] == verdicts["compile"] == "PASS", report
    assert verdicts["oom"] == "PASS"
    assert report.model["source"] == "random" and "randomly initialised" in report.model["description"]
    assert report.environment["device"]["gpu_name"].startswith("Fake")
    assert (tmp_path / "trials" / "oom" / "spec.json").is_file()
    assert report.elapsed_s is not None and all(c.seconds is not None for c in report.checks)


def test_the_budget_cuts_the_steps_that_do_not_fit_saying_so(tmp_path, monkeypatch, random_model):
    fake_gpu(monkeypatch, "cuda")
    report = run_process(tmp_path, monkeypatch, budget_s=100, model=random_model, steps={"gpu", "warmup", "compile"})
    compile_check = report.check("compile")
    assert compile_check.verdict == "SKIP" and compile_check.details == {"cut": True}
    assert compile_check.reason.startswith("cut to fit --budget-s 100: needs about 150 s")
    assert report.check("warmup").verdict == "PASS"  # the cheaper steps still ran


def test_without_a_usable_gpu_every_other_check_skips_with_the_reason(tmp_path, monkeypatch):
    fake_gpu(monkeypatch, "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    report = run_process(tmp_path, monkeypatch)
    assert report.check("gpu").verdict == "FAIL"
    assert {c.verdict for c in report.checks if c.name != "gpu"} == {"SKIP"}
    assert report.check("timing").reason == "no usable GPU: see the gpu check"
    assert not (tmp_path / "trials" / "oom").exists()


def test_a_check_that_breaks_is_a_fail_and_the_rest_still_run(tmp_path, monkeypatch, random_model):
    fake_gpu(monkeypatch, "cuda")

    def broken(ctx):
        raise RuntimeError("CUDA error: device-side assert triggered")

    steps = tuple(dataclasses.replace(s, run=broken) if s.name == "memory" else s for s in selfcheck_main.STEPS)
    monkeypatch.setattr(selfcheck_main, "STEPS", steps)
    report = run_process(tmp_path, monkeypatch, model=random_model, steps={"gpu", "memory", "warmup"})
    assert report.check("memory").verdict == "FAIL"
    assert report.check("memory").reason == "RuntimeError: CUDA error: device-side assert triggered"
    assert report.check("warmup").verdict == "PASS"
