"""The demo's time limits on a slow machine: scaled from what was measured there, never a fixed limit chosen for
a fast one (``protocol/study/time_limits.py``, and the generation demo's builder that applies it)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from protocol.study.time_limits import CAMPAIGN_SAFETY, campaign_limit, tuning_limit

TEMPLATE = (Path(__file__).resolve().parents[2] / "runner/demo/studies/generation/generate.toml").read_text()


def template_limit() -> float:
    return float(tomllib.loads(TEMPLATE.replace("@", "x"))["campaign"]["trial_timeout_s"])


def test_the_tuning_limit_grows_with_the_measured_load_and_never_shrinks() -> None:
    study_s = template_limit()
    busy = tuning_limit(study_s, load_per_core=3.0, study="generate.toml")
    assert busy.seconds == pytest.approx(study_s * 3.0)
    assert "load" in busy.source and "3.0" in busy.source
    assert "ISOCOST_DEMO_TIMEOUT_S" in busy.fix
    idle = tuning_limit(study_s, load_per_core=0.2, study="generate.toml")
    assert idle.seconds == study_s


def test_the_tuning_limit_can_be_set_by_one_variable() -> None:
    chosen = tuning_limit(900.0, load_per_core=0.2, study="generate.toml", override="5000")
    assert chosen.seconds == 5000.0 and "ISOCOST_DEMO_TIMEOUT_S" in chosen.source


@pytest.mark.parametrize("override", ["0", "-5", "nan", "inf", "lots"])
def test_a_bad_override_is_refused_naming_the_variable(override: str) -> None:
    from protocol.errors import UserError

    with pytest.raises(UserError, match="ISOCOST_DEMO_TIMEOUT_S"):
        tuning_limit(900.0, load_per_core=0.0, study="generate.toml", override=override)


def test_the_campaign_limit_is_scaled_from_the_measured_tuning_pass() -> None:
    study_s = template_limit()
    slow_s = study_s * 1.5  # a tuning pass that would have been killed at the template's limit
    seconds, reason = campaign_limit(study_s, measured_s=slow_s, corpus_inputs=24, tuning_inputs=30)
    assert seconds >= CAMPAIGN_SAFETY * slow_s * 24 / 30 and seconds % 60 == 0
    assert f"{slow_s:.0f} s" in reason
    fast, _ = campaign_limit(study_s, measured_s=10.0, corpus_inputs=24, tuning_inputs=30)
    assert fast == study_s  # a fast machine keeps the template's limit


def test_the_generation_demo_tunes_under_the_scaled_limit_and_writes_the_scaled_campaign_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.demo import generation

    study = tmp_path / "generate.toml"
    study.write_text(TEMPLATE.replace("@TEXT_COUNT@", "24"), encoding="utf-8")
    seen: dict[str, Any] = {}
    clock = iter([100.0, 100.0 + 2 * template_limit()])  # the tuning pass measured at twice the template's limit
    monkeypatch.setattr(generation, "clock", lambda: next(clock))
    monkeypatch.setattr(generation, "load_per_core", lambda: 2.5)

    def tuner(path: Path, **kw: Any) -> Any:
        seen.update(kw)
        proposal = SimpleNamespace(metric_value=0.2, se=0.03, minimum=0.1, max_metric_drop=0.04, min_agreement=0.9,
                                   n=30)
        return SimpleNamespace(lines=lambda: [], proposal=proposal, metric="rouge_l")

    lines: list[str] = []
    tuned = generation._tune(tuner, study, lines.append, corpus_inputs=24, tuning_inputs=30)
    assert seen["time_limit"].seconds == pytest.approx(template_limit() * 2.5)
    written = tomllib.loads(study.read_text(encoding="utf-8").replace("@", "x"))["campaign"]["trial_timeout_s"]
    assert written >= CAMPAIGN_SAFETY * 2 * template_limit() * 24 / 30
    assert tuned["trial_timeout_s"] == written
    assert any("trial_timeout_s" in line and "measured" in line for line in lines), lines
