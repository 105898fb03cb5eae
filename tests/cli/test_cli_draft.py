"""`batchor draft`: a model's draft (scripted answers of the fake provider, real SDKs over HTTP)
is validated, sent back with the validator's problems when invalid, rehearsed with the mock,
planned, and only then written; drafting calls are recorded and costed like any run."""

from __future__ import annotations

import copy
import json

import pytest
import yaml
from conftest import write_csv

from batchor import api
from batchor.draft.ask import draft_schema, request_text
from batchor.draft.sample import read_sample
from batchor.spec.json_schema import SCHEMA_FILE, spec_json_schema_text
from tests.cli.cli_helpers import Terminal, run_inprocess

ROWS = [
    {"id": "r1", "product": "kettle", "text": "Boils fast, love it"},
    {"id": "r2", "product": "chair", "text": "Wobbly legs, sent it back"},
    {"id": "r3", "product": "lamp", "text": "Fine I guess"},
    {"id": "r4", "product": "desk", "text": "Sturdy and cheap"},
]
OUTPUT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["sentiment", "reason"],
    "properties": {
        "sentiment": {"type": "string", "enum": ["positive", "negative", "mixed"]},
        "reason": {"type": "string"},
    },
}


def drafted(
    prompt: str = "Product: {{ row.product }}\nReview: {{ row.text }}",
    provider: str = "openai",
    model: str = "gpt-4.1-mini",
) -> dict:
    """A drafter's answer: a spec (as the model writes it: no real paths) and its output schema."""
    spec = {
        "version": 1,
        "name": "review-sentiment",
        "input": {"path": "DATA", "key": "id"},
        "model": {"provider": provider, "name": model, "params": {"temperature": 0, "max_tokens": 200}},
        "steps": {
            "classify": {
                "system": "You classify product reviews by sentiment.",
                "prompt": prompt,
                "output": {"schema": "output.schema.json"},
            }
        },
        "output": {"path": "out/review-sentiment.csv"},
    }
    return {"spec": spec, "output_schema": copy.deepcopy(OUTPUT_SCHEMA)}


@pytest.fixture
def data(workdir):
    return write_csv(workdir / "data" / "reviews.csv", ROWS)


def draft_cli(monkeypatch, capsys, workdir, *args):
    return run_inprocess(
        monkeypatch, capsys, workdir, "draft", "classify reviews by sentiment", "--data", "data/reviews.csv", *args
    )


def user_messages(body: dict) -> str:
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")


def test_invalid_first_draft_goes_back_with_the_validator_errors_then_the_valid_one_is_written(
    fake, data, workdir, monkeypatch, capsys
):
    fake.configure(scripted_answers=[drafted("Review: {{ row.body }}"), drafted()])
    code, out, err = draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1", "-o", "sentiment.yaml")
    assert code == 0, err
    problems = [line.strip() for line in err.splitlines() if line.strip().startswith("error [")]
    assert problems and "body" in problems[0], err  # the missing column is named
    line = int(problems[0].split("sentiment.yaml:")[1].split(":")[0])  # a line of the draft as sent back
    assert (
        "{{ row.body }}"
        in (user_messages(fake.stats()["bodies"][1]).split("as this spec:")[1].lstrip("\n").splitlines()[line - 1])
    )
    first, second = fake.stats()["bodies"][:2]
    assert fake.stats()["scripted_served"] == 2
    assert "row.body" not in user_messages(first)
    for problem in problems:  # the validator's own words reach the model, with the draft they are about
        assert problem in user_messages(second)
    assert "Review: {{ row.body }}" in user_messages(second)
    spec = yaml.safe_load((workdir / "sentiment.yaml").read_text())
    assert spec["input"]["path"] == "data/reviews.csv" and "state" not in spec
    # named after the spec -o named, as an output schema (`sentiment.schema.json` read as the spec format's)
    assert spec["steps"]["classify"]["output"]["schema"] == "sentiment.output.schema.json"
    assert json.loads((workdir / "sentiment.output.schema.json").read_text()) == OUTPUT_SCHEMA
    assert api.validate(workdir / "sentiment.yaml").steps == ["classify"]
    assert "draft 1: 1 problem(s)" in err and "draft 2: valid, rehearsed" in err
    assert "rehearsal: 3 row(s) through the mock provider: 3 answered, 0 failed" in err
    assert "Plan " in err and "4 to run" in err  # the plan for the full data (4 rows), with its model
    assert "Product: {{ row.product }}" in out  # the draft is shown before it is written
    assert (
        "wrote sentiment.yaml, sentiment.output.schema.json, schemas/batchor-spec.schema.json; drafting cost $" in err
    )


@pytest.mark.slow  # several drafts, each planned and rehearsed (about 3 s each on a quiet machine)
def test_drafting_calls_are_recorded_and_costed_like_any_run(fake, data, workdir, monkeypatch, capsys):
    fake.configure(scripted_answers=[drafted("{{ row.nope }}"), drafted()])
    code, out, err = draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert [bool(a["problems"]) for a in result["attempts"]] == [True, False]
    runs = json.loads(run_inprocess(monkeypatch, capsys, workdir, "runs", "--json")[1])
    drafts = [r for r in runs if r["name"] == "batchor-draft"]
    assert {r["run_id"] for r in drafts} == {a["run_id"] for a in result["attempts"]}
    assert all(r["cost_usd"] > 0 and r["status"] == "succeeded" for r in drafts)
    assert result["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in drafts))
    written = ["spec.yaml", "review-sentiment.output.schema.json", "schemas/batchor-spec.schema.json"]
    assert sorted(result["written"]) == sorted(written) and result["plan"]["rows"] == 4


def test_the_answer_is_constrained_by_the_spec_formats_own_schema(fake, data, workdir, monkeypatch, capsys):
    fake.configure(scripted_answers=[drafted()])
    assert draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1")[0] == 0
    sent = fake.stats()["bodies"][0]["response_format"]["json_schema"]["schema"]
    committed = json.loads(SCHEMA_FILE.read_text()) if SCHEMA_FILE.exists() else None
    committed = committed or json.loads((api.Path(__file__).parents[2] / SCHEMA_FILE).read_text())
    assert sent["properties"]["spec"] == {"$ref": "#/$defs/JobSpec"}
    assert sent["$defs"]["JobSpec"]["properties"] == committed["properties"]
    assert {k: v for k, v in sent["$defs"].items() if k != "JobSpec"} == committed["$defs"]
    assert draft_schema()["$defs"]["JobSpec"]["required"] == committed["required"]


def test_no_rows_sends_column_names_and_types_but_no_row_values(fake, data, workdir, monkeypatch, capsys):
    fake.configure(scripted_answers=[drafted()])
    assert draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1", "--no-rows")[0] == 0
    sent = json.dumps(fake.stats()["bodies"][0])
    assert all(name in sent for name in ("id: text (unique: can be the key)", "product: text\\n", "text: text"))
    assert not any(value in sent for row in ROWS for value in row.values())
    with_rows = request_text("x", read_sample(data, 2), ("openai", "gpt-4.1-mini"))  # what --rows 2 sends
    assert "Boils fast, love it" in with_rows and "Wobbly legs" in with_rows and "Fine I guess" not in with_rows


def test_a_model_that_never_drafts_a_valid_spec_fails_cleanly_and_writes_nothing(
    fake, data, workdir, monkeypatch, capsys
):
    fake.configure(scripted_answers=[drafted("{{ row.missing }}")] * 3)
    code, out, err = draft_cli(
        monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1", "-o", "x.yaml", "--max-cost", "1"
    )  # a budget that covers all three calls
    assert code == 1
    assert "error [draft_invalid]: no valid draft in 3 attempt(s)" in err and "missing" in err
    assert err.count("sent back to the model") == 2 and "draft 3: 1 problem(s)" in err and "no attempt left" in err
    assert "Traceback" not in err
    assert not (workdir / "x.yaml").exists() and not (workdir / "x.schema.json").exists()
    assert fake.stats()["scripted_served"] == 3
    runs = json.loads(run_inprocess(monkeypatch, capsys, workdir, "runs", "--json")[1])
    assert sum(r["name"] == "batchor-draft" and r["cost_usd"] > 0 for r in runs) == 3  # all three paid, recorded


def test_missing_data_file_and_existing_output_are_refused_before_any_call(fake, workdir, monkeypatch, capsys):
    code, _, err = draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1")
    assert code == 1 and "error [input_missing]" in err and "reviews.csv" in err
    write_csv(workdir / "data" / "reviews.csv", ROWS)
    (workdir / "spec.yaml").write_text("mine\n")
    code, _, err = draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1")
    assert code == 1 and "error [file_exists]" in err and "--force" in err
    assert (workdir / "spec.yaml").read_text() == "mine\n" and fake.stats()["requests"] == 0
    fake.configure(scripted_answers=[drafted()])
    assert draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1", "--force")[0] == 0
    assert "review-sentiment" in (workdir / "spec.yaml").read_text()
    (workdir / "data" / "reviews.csv").write_text("id,product,text\n")
    code, _, err = draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1", "-o", "empty.yaml")
    assert code == 1 and "error [input_empty]" in err and fake.stats()["requests"] == 1  # no model asked


@pytest.mark.slow  # a drafting run re-asked up to its max_attempts
def test_a_drafter_that_never_answers_in_the_schema_stops_cleanly(fake, data, workdir, monkeypatch, capsys):
    fake.configure(scripted_answers=["not json at all"] * 3)
    code, _, err = draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1", "-o", "x.yaml")
    assert code == 1 and "error [invalid_output]: the drafter gave no usable answer" in err, err
    assert "Traceback" not in err and not (workdir / "x.yaml").exists()
    assert fake.stats()["scripted_served"] == 3  # the engine re-asked with its feedback, within max_attempts


def test_a_drafting_budget_refuses_a_call_that_could_pass_it(fake, data, workdir, monkeypatch, capsys):
    fake.configure(scripted_answers=[drafted()])
    code, _, err = draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1", "--max-cost", "0.0001")
    assert code == 4 and "error [cost_limit]" in err and fake.stats()["requests"] == 0
    assert not (workdir / "spec.yaml").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "drafter, spec_model",
    [("anthropic:claude-sonnet-4-5", "claude-haiku-4-5"), ("gemini:gemini-2.5-flash", "gemini-2.5-flash")],
)
def test_other_providers_draft_through_their_own_sdk(fake, data, workdir, monkeypatch, capsys, drafter, spec_model):
    provider = drafter.split(":")[0]
    fake.configure(scripted_answers=[drafted(provider=provider, model=spec_model)])
    code, _, err = draft_cli(monkeypatch, capsys, workdir, "--model", drafter)
    assert code == 0, err
    assert fake.stats()["by_endpoint"] and f"the spec will use {provider}:{spec_model}" in err
    assert yaml.safe_load((workdir / "spec.yaml").read_text())["model"]["provider"] == provider


def test_default_drafter_is_the_provider_whose_key_is_set(fake, data, workdir, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY")
    fake.configure(scripted_answers=[drafted(provider="anthropic", model="claude-haiku-4-5")])
    code, _, err = draft_cli(monkeypatch, capsys, workdir)
    assert code == 0 and "drafting with anthropic:claude-sonnet-4-5" in err, err
    for name in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = draft_cli(monkeypatch, capsys, workdir, "-o", "other.yaml")
    assert code == 1 and "error [no_api_key]" in err and "--mock" in err


def test_mock_draft_is_an_offline_rehearsal_that_validates(data, workdir, monkeypatch, capsys):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    code, out, err = draft_cli(monkeypatch, capsys, workdir, "--mock", "-o", "jobs/reviews.yaml")
    assert code == 0, err
    assert "a rehearsal of the draft flow, not a draft of the task" in err
    assert "drafting cost $0 (mock: no model was called)" in err
    spec = yaml.safe_load((workdir / "jobs" / "reviews.yaml").read_text())
    assert spec["input"] == {"path": "../data/reviews.csv", "key": "id"}  # unique and id-like: the key
    assert all(f"row.{c}" in spec["steps"]["answer"]["prompt"] for c in ROWS[0])
    assert api.validate(workdir / "jobs" / "reviews.yaml").steps == ["answer"]
    assert not (workdir / ".batchor").exists()  # the rehearsal and the plan used a scratch state


def test_a_draft_names_the_spec_formats_schema_by_a_path_it_wrote(data, workdir, monkeypatch, capsys):
    (workdir / ".batchor").mkdir()  # the project's folder: the schema goes to its schemas/
    code, _, err = draft_cli(monkeypatch, capsys, workdir, "--mock", "-o", "jobs/reviews.yaml")
    assert code == 0, err
    first = (workdir / "jobs" / "reviews.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schemas/batchor-spec.schema.json"
    assert (workdir / "schemas" / "batchor-spec.schema.json").read_text() == spec_json_schema_text()


@pytest.mark.slow
def test_the_real_command_on_a_terminal_asks_before_writing(data, workdir, monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    term = Terminal(workdir, "draft", "tag each review with its product area", "--data", "data/reviews.csv", "--mock")
    screen = term.read_until("[Y/n]")
    files = "spec.yaml and tag-review-product.output.schema.json and schemas/batchor-spec.schema.json"
    assert f"Write {files}? [Y/n]" in screen, screen
    assert not (workdir / "spec.yaml").exists(), screen  # shown, not yet written
    assert "rehearsal: 3 row(s)" in screen and "Plan " in screen
    term.type("y\n")
    assert term.finish() == 0, term.screen
    assert api.validate(workdir / "spec.yaml").steps == ["answer"]
    assert (workdir / "tag-review-product.output.schema.json").exists()
    assert (workdir / "schemas" / "batchor-spec.schema.json").exists()  # the editor's schema the spec names
    assert "wrote spec.yaml, tag-review-product.output.schema.json" in term.screen
    assert (
        api.validate(workdir / "spec.yaml").spec and "name: tag-review-product" in (workdir / "spec.yaml").read_text()
    )


@pytest.mark.slow  # several drafts, each planned and rehearsed (about 3 s each on a quiet machine)
def test_the_same_request_again_is_answered_from_the_cache_and_no_cache_asks_again(
    fake, data, workdir, monkeypatch, capsys
):
    fake.configure(scripted_answers=[drafted(), drafted(prompt="Review: {{ row.text }}")])
    assert draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1", "-o", "a.yaml")[0] == 0
    code, out, _ = draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1", "-o", "b.yaml", "--json")
    assert code == 0 and json.loads(out)["cost_usd"] == 0 and fake.stats()["scripted_served"] == 1
    assert (workdir / "a.yaml").read_text().replace("a.yaml", "b.yaml").replace(
        "a.output.schema", "b.output.schema"
    ) == (workdir / "b.yaml").read_text()
    code, out, _ = draft_cli(monkeypatch, capsys, workdir, "--model", "openai:gpt-4.1", "-o", "c.yaml", "--no-cache")
    assert code == 0 and fake.stats()["scripted_served"] == 2
    assert "Review: {{ row.text }}" in (workdir / "c.yaml").read_text()
