"""Precision and recall of a `resolve:` job's merges, against the fake's rule-based pair judge.

Generates companies with planted duplicates (examples/make_companies.py, the true company of
each row known), runs `batchor apply` on a resolve spec like specs/company_resolution.yaml
against the fake provider (config `judge_pairs`: it judges a pair the same when the names match
once case, punctuation, `&` and legal suffixes are ignored, so a typo is missed), and compares
the clusters with the truth over every pair of rows:

- precision: of the row pairs the job put in one cluster, the share that are the same company;
- recall: of the row pairs that are the same company, the share the job put in one cluster;
- blocking recall: of the true pairs, the share the blocking rule offered to the judge.

With `--pipeline` the job is specs/company_mentions.yaml instead: the names are first extracted
from ledger notes by a row step (the fake's extraction rule), the resolve step judges the pairs
and asks each cluster's canonical name (the fake cleans the first spelling), and the script also
reports the share of clusters whose canonical name is the company's true name.

    python benchmarks/resolve.py [--entities 300] [--mode realtime|batch] [--pipeline]
"""

from __future__ import annotations

import argparse
import csv
import itertools
import sys
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.harness import batchor, fake_server, fresh_dir  # noqa: E402
from examples.make_companies import companies, notes  # noqa: E402


def _spec(folder: Path, base_url: str, mode: str) -> Path:
    spec = yaml.safe_load((ROOT / "specs" / "company_resolution.yaml").read_text())
    spec["input"]["path"] = "companies.csv"
    spec["output"]["path"] = "out/pairs.csv"
    spec["model"]["base_url"] = base_url
    spec["model"]["allow_key_env"] = True
    spec["limits"] = {"concurrency": 16}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _pairs(groups: dict[str, list[str]]) -> set[tuple[str, str]]:
    return {tuple(sorted(p)) for keys in groups.values() for p in itertools.combinations(keys, 2)}  # type: ignore[misc]


def _grouped(rows: list[dict[str, str]], column: str) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for row in rows:
        groups.setdefault(row[column], []).append(row["id"])
    return groups


def _pipeline(entities: int, mode: str) -> None:
    """specs/company_mentions.yaml over generated notes: merges and canonical names vs the truth."""
    folder = fresh_dir(f"resolve-pipeline-{mode}")
    rows = notes(entities, seed=23)
    with (folder / "notes.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "note", "city"])
        writer.writeheader()
        writer.writerows({k: r[k] for k in ("id", "note", "city")} for r in rows)
    spec = yaml.safe_load((ROOT / "specs" / "company_mentions.yaml").read_text())
    spec["input"]["path"], spec["output"]["path"] = "notes.csv", "out/notes.csv"
    spec["model"].update(allow_key_env=True, base_url="")
    spec["limits"] = {"concurrency": 16}
    with fake_server(judge_pairs=True, batch_polls=1, batch_seconds=0.2) as server:
        spec["model"]["base_url"] = server.openai_base_url
        (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
        batchor(["apply", str(folder / "spec.yaml"), "--yes", "--mode", mode], cwd=folder).check()
        calls = server.stats()["answered"]
    with (folder / "out" / "notes.csv").open(newline="", encoding="utf-8") as handle:
        out = {r["id"]: r for r in csv.DictReader(handle)}
    truth, merged = _pairs(_grouped(rows, "entity")), _pairs(_grouped(list(out.values()), "entity.cluster"))
    hits = len(truth & merged)
    names = {r["entity"]: r["truth"] for r in rows}
    clusters = _grouped(list(out.values()), "entity.cluster")
    entity_of = {r["id"]: r["entity"] for r in rows}
    right, asked, asked_right = 0, 0, 0
    for keys in clusters.values():  # the cluster's company: the one most of its rows are
        entity = Counter(entity_of[k] for k in keys).most_common(1)[0][0]
        correct = out[keys[0]]["entity.canonical"] == names[entity]
        right += correct
        if len({out[k]["company.company"] for k in keys}) > 1:  # several spellings: the model was asked
            asked, asked_right = asked + 1, asked_right + correct
    print(f"rows {len(rows)}, companies {entities}, true pairs {len(truth)}, model calls {calls}")
    print(
        f"precision {hits / len(merged):.3f}  recall {hits / len(truth):.3f}  clusters {len(clusters)}  "
        f"canonical = true name {right / len(clusters):.3f} (asked clusters {asked}: {asked_right / asked:.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=300)
    parser.add_argument("--mode", choices=["realtime", "batch"], default="realtime")
    parser.add_argument("--pipeline", action="store_true", help="specs/company_mentions.yaml (extract, resolve, use)")
    args = parser.parse_args()
    if args.pipeline:
        _pipeline(args.entities, args.mode)
        return
    folder = fresh_dir(f"resolve-{args.mode}")
    rows = companies(args.entities, seed=23)
    with (folder / "companies.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "name", "city"])
        writer.writeheader()
        writer.writerows({k: r[k] for k in ("id", "name", "city")} for r in rows)
    with fake_server(judge_pairs=True, batch_polls=1, batch_seconds=0.2) as server:
        spec = _spec(folder, server.openai_base_url, args.mode)
        batchor(["apply", str(spec), "--yes", "--mode", args.mode], cwd=folder).check()
    with (folder / "out" / "pairs.clusters.csv").open(newline="", encoding="utf-8") as handle:
        clusters = list(csv.DictReader(handle))
    with (folder / "out" / "pairs.csv").open(newline="", encoding="utf-8") as handle:
        offered = {tuple(sorted((r["a_key"], r["b_key"]))) for r in csv.DictReader(handle)}
    truth, merged = _pairs(_grouped(rows, "entity")), _pairs(_grouped(clusters, "_cluster"))
    hits = len(truth & merged)
    print(f"rows {len(rows)}, companies {args.entities}, true pairs {len(truth)}, pairs judged {len(offered)}")
    print(
        f"precision {hits / len(merged):.3f}  recall {hits / len(truth):.3f}  "
        f"blocking recall {len(truth & offered) / len(truth):.3f}  clusters {len(_grouped(clusters, '_cluster'))}"
    )


if __name__ == "__main__":
    main()
