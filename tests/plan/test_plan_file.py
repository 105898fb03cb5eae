"""Saved plan files: self-contained, content-hashed, refused when edited, truncated, from a
newer format, or when their input changed."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from conftest import SENTIMENT_SCHEMA, make_spec, write_csv

from batchor import api
from batchor.errors import BatchorError, PlanFileError, StalePlanError
from batchor.plan.plan_file import DATA_MEMBER, HEADER_MEMBER, _header_hash, load_plan


def saved_plan(workdir: Path, rows: int = 4) -> Path:
    plan = api.plan(make_spec(workdir, rows=rows))
    assert plan.saved_path is not None
    return workdir / plan.saved_path


def rewrite(plan_file: Path, member: str, change) -> None:
    """Rewrite one member of the plan zip through `change(bytes) -> bytes` (a valid zip again)."""
    with zipfile.ZipFile(plan_file) as archive:
        members = {info.filename: (info, archive.read(info.filename)) for info in archive.infolist()}
    with zipfile.ZipFile(plan_file, "w") as archive:
        for name, (info, data) in members.items():
            archive.writestr(name, change(data) if name == member else data, compress_type=info.compress_type)


def flip_middle_byte(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]


def assert_plan_invalid(plan_file: Path, match: str | None) -> None:
    with pytest.raises(PlanFileError, match=match) as info:
        load_plan(plan_file)
    assert info.value.code == "plan_invalid"


def test_saved_plan_loads_back(workdir):
    plan_file = saved_plan(workdir)
    loaded = load_plan(plan_file)
    assert loaded.plan_id == plan_file.stem
    assert loaded.header.totals.to_run == 4


def test_a_plan_saved_before_newer_header_fields_still_loads_and_applies(workdir, fake):
    plan_file = saved_plan(workdir)

    def as_older_batchor_wrote_it(data: bytes) -> bytes:
        header = json.loads(data)  # fields added later are missing; its id hashes what it holds
        header["totals"].pop("changed")
        for step in header["steps"]:
            step["counts"].pop("changed")
            step.pop("fan_out")
        header["plan_id"] = _header_hash(header)
        return json.dumps(header).encode()

    rewrite(plan_file, HEADER_MEMBER, as_older_batchor_wrote_it)
    loaded = load_plan(plan_file)
    assert loaded.header.totals.changed == 0
    assert api.apply(plan_file, trust_plan=True).succeeded == 4  # re-hashed: no longer this state's seal


def test_edited_header_is_refused(workdir):
    plan_file = saved_plan(workdir)
    rewrite(plan_file, HEADER_MEMBER, lambda data: data.replace(b"Classify.", b"Classifx."))
    assert_plan_invalid(plan_file, "modified after it was created")


def test_edited_header_with_a_consistent_looking_number_is_refused(workdir):
    plan_file = saved_plan(workdir)

    def cheaper(data: bytes) -> bytes:
        header = json.loads(data)
        header["totals"]["cost_upper"] = 0.0
        return json.dumps(header).encode()

    rewrite(plan_file, HEADER_MEMBER, cheaper)
    assert_plan_invalid(plan_file, "modified after it was created")


def test_edited_data_member_is_refused(workdir):
    plan_file = saved_plan(workdir)
    rewrite(plan_file, DATA_MEMBER, flip_middle_byte)
    assert_plan_invalid(plan_file, "modified after it was created")


def test_byte_flipped_inside_the_zip_is_refused(workdir):
    plan_file = saved_plan(workdir)
    with zipfile.ZipFile(plan_file) as archive:
        info = archive.getinfo(DATA_MEMBER)
    raw = bytearray(plan_file.read_bytes())
    # the stored (uncompressed) data member begins after its 30-byte local header + name
    raw[info.header_offset + 30 + len(DATA_MEMBER) + info.compress_size // 2] ^= 0xFF
    plan_file.write_bytes(bytes(raw))
    assert_plan_invalid(plan_file, None)


@pytest.mark.parametrize("keep", [0.5, 0.9, 0.0])
def test_truncated_plan_is_refused(workdir, keep):
    plan_file = saved_plan(workdir)
    data = plan_file.read_bytes()
    plan_file.write_bytes(data[: int(len(data) * keep)])
    assert_plan_invalid(plan_file, "not a readable batchor plan")


def test_newer_format_version_is_refused(workdir):
    plan_file = saved_plan(workdir)

    def bump(data: bytes) -> bytes:
        header = json.loads(data)
        header["format_version"] += 1
        return json.dumps(header).encode()

    rewrite(plan_file, HEADER_MEMBER, bump)
    assert_plan_invalid(plan_file, "plan format 2")


def test_missing_plan_file(workdir):
    assert_plan_invalid(workdir / "nothing.plan", "not found")


def test_apply_of_a_tampered_plan_sends_nothing(workdir, fake):
    plan_file = saved_plan(workdir)
    rewrite(plan_file, HEADER_MEMBER, lambda data: data.replace(b"Classify.", b"Classifx."))
    with pytest.raises(PlanFileError):
        api.apply(plan_file, handle_signals=False)
    assert fake.stats()["requests"] == 0


def test_saved_plan_applies_after_spec_schema_and_templates_are_deleted(workdir, fake):
    job = workdir / "job"
    (job / "schemas").mkdir(parents=True)
    (job / "schemas" / "sentiment.json").write_text(json.dumps(SENTIMENT_SCHEMA), encoding="utf-8")
    (job / "templates").mkdir()
    (job / "templates" / "review.j2").write_text("Review: {{ row.text }}", encoding="utf-8")
    spec = make_spec(
        job,
        rows=5,
        templates="templates",
        steps={
            "classify": {
                "system": "Classify.",
                "prompt": "{% include 'review.j2' %}",
                "output": {"schema": "sentiment.json"},
            }
        },
    )
    plan = api.plan(spec)
    for path in (spec, job / "schemas" / "sentiment.json", job / "templates" / "review.j2"):
        path.unlink()
    outcome = api.apply(workdir / plan.saved_path, handle_signals=False)
    assert outcome.status == "succeeded"
    assert fake.stats()["requests"] == 5
    prompts = fake.stats()["by_prompt"]
    assert len(prompts) == 5 and set(prompts.values()) == {1}
    output = (job / "out" / "results.csv").read_text(encoding="utf-8")
    assert output.count(",succeeded,") == 5


def test_input_changed_after_planning_is_stale(workdir, fake):
    plan_file = saved_plan(workdir)
    write_csv(workdir / "data.csv", [{"id": "r0", "text": "a different review"}])
    with pytest.raises(StalePlanError) as info:
        api.apply(plan_file, handle_signals=False)
    assert info.value.code == "stale_plan" and info.value.exit_code == 5
    assert fake.stats()["requests"] == 0


def test_plan_moved_elsewhere_still_applies(workdir, fake):
    plan_file = saved_plan(workdir, rows=3)
    moved = shutil.copy(plan_file, workdir / "elsewhere.plan")
    outcome = api.apply(Path(moved), handle_signals=False)
    assert (outcome.status, fake.stats()["requests"]) == ("succeeded", 3)


def test_cached_answers_gone_since_planning_is_stale(workdir, fake):
    spec = make_spec(workdir, rows=3)
    api.apply(spec, handle_signals=False)
    plan_file = workdir / api.plan(spec).saved_path
    assert load_plan(plan_file).header.totals.cached == 3
    (workdir / ".batchor" / "state.duckdb").unlink()
    fake.reset()
    with pytest.raises(BatchorError) as info:
        api.apply(plan_file, handle_signals=False)
    assert info.value.code == "stale_plan"
    assert fake.stats()["requests"] == 0


def joined_file_spec(workdir: Path) -> Path:
    """A triage step, a SQL step joining `teams.csv`, and a step whose prompt reads the joined team."""
    write_csv(
        workdir / "teams.csv", [{"sentiment": "positive", "team": "praise"}, {"sentiment": "negative", "team": "care"}]
    )
    steps = {
        "classify": {"prompt": "Review: {{ row.text }}", "output": {"schema": SENTIMENT_SCHEMA}},
        "routing": {
            "sql": "SELECT rows._row_key, coalesce(t.team, 'general') AS team FROM rows "
            "LEFT JOIN read_csv('teams.csv') AS t ON t.sentiment = classify.sentiment"
        },
        "reply": {"prompt": "Team {{ routing.team }} replies to: {{ row.text }}", "output": "text"},
    }
    return make_spec(workdir, rows=3, steps=steps)


def test_a_file_a_sql_step_reads_changed_after_planning_is_stale(workdir, fake):
    """A saved plan replays exactly: a SQL step's joined file that changed would mix the plan's
    templates with data the plan never saw, so the plan is refused (nothing sent) and says which file."""
    plan_file = workdir / api.plan(joined_file_spec(workdir)).saved_path
    (workdir / "teams.csv").touch()  # the same content: not stale
    write_csv(workdir / "other.csv", [{"a": "1"}])
    planned = (workdir / "teams.csv").read_bytes()
    (workdir / "teams.csv").write_bytes(planned.replace(b"care", b"retention"))
    with pytest.raises(StalePlanError) as info:
        api.apply(plan_file, handle_signals=False)
    assert info.value.code == "stale_plan" and "steps.routing" in str(info.value) and "teams.csv" in str(info.value)
    assert fake.stats()["requests"] == 0
    (workdir / "teams.csv").write_bytes(planned)
    assert api.apply(plan_file, handle_signals=False).status == "succeeded"  # back as planned: replays


def test_a_glob_a_sql_step_reads_that_matches_another_file_since_planning_is_stale(workdir, fake):
    spec = joined_file_spec(workdir)
    (workdir / "teams").mkdir()
    (workdir / "teams.csv").rename(workdir / "teams" / "a.csv")
    spec.write_text(
        spec.read_text(encoding="utf-8").replace("read_csv('teams.csv')", "read_csv('teams/*.csv')"), encoding="utf-8"
    )
    plan_file = workdir / api.plan(spec).saved_path
    write_csv(workdir / "teams" / "b.csv", [{"sentiment": "mixed", "team": "research"}])
    with pytest.raises(StalePlanError, match=r"b\.csv, which is new"):
        api.apply(plan_file, handle_signals=False)
    (workdir / "teams" / "b.csv").unlink()
    assert api.apply(plan_file, handle_signals=False).status == "succeeded"


def _counting_parquet_opens(monkeypatch) -> list[int]:
    """Count every parquet file the plan module opens (each open parses the file's footer)."""
    import pyarrow.parquet as pq

    from batchor.plan import plan_file

    opened: list[int] = []
    real = pq.ParquetFile

    def counting(*args, **kwargs):
        opened.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_file.pq, "ParquetFile", counting)
    return opened


def test_a_small_plans_data_is_read_once_however_many_steps_read_it(workdir, monkeypatch):
    """Issue 35: apply read the plan's data once per step and pass; a footer grows with the
    columns (four per step), so 2,000 steps spent ~0.9 s per read. Small data is read once."""
    plan = load_plan(saved_plan(workdir))
    opened = _counting_parquet_opens(monkeypatch)
    columns = plan.data_columns()
    opened.clear()
    reads = [pa_table(plan.iter_batches([c])) for c in columns] + [pa_table(plan.iter_batches(columns[::-1]))]
    assert len(opened) == 1
    assert [t.column_names for t in reads[:-1]] == [[c] for c in columns] and reads[-1].column_names == columns[::-1]
    assert reads[-1].num_rows == plan.rows == 4


def test_big_plan_data_is_streamed_at_each_read(workdir, monkeypatch):
    from batchor.plan import plan_file

    monkeypatch.setattr(plan_file, "SMALL_DATA_BYTES", 0)
    plan = load_plan(saved_plan(workdir))
    opened = _counting_parquet_opens(monkeypatch)
    first = pa_table(plan.iter_batches())
    again = pa_table(plan.iter_batches())
    assert len(opened) == 2 and first.equals(again) and first.num_rows == 4


def pa_table(batches):
    import pyarrow as pa

    return pa.Table.from_batches(list(batches))
