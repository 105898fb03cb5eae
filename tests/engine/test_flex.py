"""OpenAI flex processing against the fake over HTTP: `mode: flex` sends `service_tier: flex` and is
priced at the flex rate; a 429 "Resource Unavailable" waits and sends flex again (never the
standard tier) unless `limits.flex_fallback` allows it, priced at the tier that served it; `auto`
with a deadline under the batch window picks flex where the model has it; a model without flex
is refused at `validate`."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml
from conftest import make_spec

from batchor import api
from batchor.errors import FlexUnsupportedError, SpecProblemsError
from batchor.plan.prices import ModelPrice
from tests.fakes.bill import fake_bill

FLEX_MODEL = "gpt-5-mini"


def flex_spec(folder: Path, model: str = FLEX_MODEL, rows: int = 6, **limits) -> Path:
    spec = make_spec(folder, rows=rows, model=model)
    data = yaml.safe_load(spec.read_text())
    data["limits"].update({"mode": "flex", **limits})
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    return spec


def recorded(workdir: Path) -> float:
    with duckdb.connect(str(workdir / ".batchor" / "state.duckdb"), read_only=True) as db:
        return float(db.execute("SELECT sum(cost_usd) FROM attempts").fetchone()[0])  # type: ignore[index]


def test_flex_is_sent_waits_out_resource_unavailable_and_is_priced_at_the_flex_rate(workdir, fake):
    fake.configure(flex_unavailable=3)
    spec = flex_spec(workdir)
    step = api.plan(spec, save=False).header.steps[0]
    assert step.service_tier == "flex" and step.mode == "realtime"
    result = api.apply(spec, handle_signals=False)
    assert result.succeeded == 6
    stats = fake.stats()
    assert stats["faults"]["flex_unavailable"] == 3 and stats["sent_429"] == 3
    assert all(body["service_tier"] == "flex" for body in stats["bodies"])  # never the standard tier
    assert list(stats["usage"]) == [f"openai|{FLEX_MODEL}|realtime|flex"]
    assert recorded(workdir) == pytest.approx(fake_bill(stats), rel=1e-9)
    price = ModelPrice.from_dict(step.price or {})
    standard = price.cost(stats["input_tokens"], stats["output_tokens"])
    assert recorded(workdir) == pytest.approx(standard / 2, rel=1e-9)  # flex bills the Batch API's half


def test_flex_fallback_sends_the_standard_tier_and_prices_it(workdir, fake):
    fake.configure(flex_unavailable=2)
    spec = flex_spec(workdir, flex_fallback=True)
    plan = api.plan(spec, save=False)
    result = api.apply(spec, handle_signals=False)
    assert result.succeeded == 6
    stats = fake.stats()
    tiers = {key.rsplit("|", 1)[1] for key in stats["usage"]}
    assert tiers == {"flex", "standard"}  # two rows answered at the standard tier
    assert recorded(workdir) == pytest.approx(fake_bill(stats), rel=1e-9)
    strict = api.plan(flex_spec(workdir), save=False)
    assert plan.header.totals.cost_upper > strict.header.totals.cost_upper  # the bound allows the standard tier


def test_auto_with_a_short_deadline_picks_flex_where_the_model_has_it(workdir):
    spec = make_spec(workdir, rows=3, model=FLEX_MODEL, limits={"mode": "auto", "deadline": "2h"})
    step = api.plan(spec, save=False, mock=False).header.steps[0]
    assert step.service_tier == "flex" and "flex" in (step.mode_note or "")
    price = ModelPrice.from_dict(step.price or {})
    upper = price.cost(step.counts.input_tokens, step.counts.output_tokens_upper, flex=True)
    assert step.counts.cost_upper == pytest.approx(upper)
    other = make_spec(workdir, rows=3, model="gpt-4.1-mini", limits={"mode": "auto", "deadline": "2h"})
    assert api.plan(other, save=False).header.steps[0].service_tier is None


def test_flex_on_a_model_without_it_is_refused_at_validate(workdir):
    spec = flex_spec(workdir, model="gpt-4.1-mini")
    with pytest.raises((FlexUnsupportedError, SpecProblemsError)) as caught:
        api.validate(spec)
    codes = [p.code for p in getattr(caught.value, "problems", [caught.value])]
    assert codes == ["flex_unsupported"]
    assert "gpt-4.1-mini" in str(caught.value)
