"""Where a small in-process apply spends its time: the cost every apply test and every short job pays.

    python benchmarks/apply_profile.py [applies] [--top N]     # default 5 applies, top 40

Applies `specs/reviews.yaml --mock` to its first 5 rows, each time with a fresh state in a new
scratch folder, after one warm-up apply (imports, the tokenizer). Prints the mean wall time of
an apply, then a cProfile of the same number of applies sorted by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time
from pathlib import Path

from batchor import api

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "reviews.yaml"


def one_apply() -> None:
    """A 5-row mock apply of the example spec, with its state and output in a new folder."""
    folder = Path(tempfile.mkdtemp(prefix="batchor-apply-profile-"))
    os.chdir(folder)
    api.apply(
        str(SPEC),
        mock=True,
        limit=5,
        state=str(folder / "state.duckdb"),
        output=str(folder / "out.csv"),
        handle_signals=False,
        progress=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("applies", nargs="?", type=int, default=5)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    one_apply()  # warm-up: imports, the tokenizer, the remembered counts
    started = time.perf_counter()
    for _ in range(args.applies):
        one_apply()
    print(f"{(time.perf_counter() - started) / args.applies:.3f} s per apply (mean of {args.applies})")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(args.applies):
        one_apply()
    profile.disable()
    pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
