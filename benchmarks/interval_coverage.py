"""How often the plan's 90 % interval of a sum of answer lengths holds, simulated on its own functions.

    python benchmarks/interval_coverage.py [--trials 4000] [--seed 1] [--fixed 120]

For each length distribution (log-normal sigma 0.35, 0.6 and 0.8 around 120 tokens; symmetric
lengths, uniform 50-150; and, to show what the skewness rule does off its target, gamma k = 2, a
two-mode mix of 5- and 300-token answers, and short structured answers, normal 42 +- 3), n answers
measured (15, 30, 50) and R requests to come (100, 400): `trials` times, n answers drawn, their
OutputStats (sums of tokens, squares, cubes and of their logs, as the ledger query reads them),
the interval `plan/output_spread.py output_spread` gives around R x their mean, and R more answers
drawn as the actual. Prints a markdown row per case: the share of actuals above and below the
interval, inside, and the interval's mean half-width as a share of the estimate.

`--fixed N`: the finite-population check. One job of N lengths per case (drawn once), each trial's
n measured answers a sample of its rows without replacement and the actual the sum of its other
N - n rows, as a pilot of the job's own rows (R = N - n): the coverage for that one job.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from batchor.plan.output_spread import Z90, output_spread  # noqa: E402
from batchor.state.length_stats import OutputStats  # noqa: E402

Draw = Callable[[random.Random], float]
KINDS: dict[str, Draw] = {
    "log-normal 0.35": lambda r: 120 * r.lognormvariate(0, 0.35),
    "log-normal 0.6": lambda r: 120 * r.lognormvariate(0, 0.6),
    "log-normal 0.8": lambda r: 120 * r.lognormvariate(0, 0.8),
    "symmetric (uniform 50-150)": lambda r: r.uniform(50, 150),
    "gamma k=2": lambda r: r.gammavariate(2.0, 50.0),
    "two modes (5 / 300)": lambda r: r.uniform(3, 8) if r.random() < 0.5 else r.uniform(250, 350),
    "short structured (42 +- 3)": lambda r: max(1.0, round(r.gauss(42, 3))),
}


def stats_of(lengths: list[float]) -> OutputStats:
    """The statistics the ledger query returns for these accepted answers (log sums where the
    OutputStats of this checkout has them: the script runs on older commits too)."""
    n, total = len(lengths), sum(lengths)
    fields = {
        "answers": n,
        "attempts": n,
        "answer_tokens": round(total),
        "attempt_tokens": round(total),
        "answer_tokens_sq": sum(v * v for v in lengths),
        "answer_tokens_cu": sum(v**3 for v in lengths),
        "max_tokens": round(max(lengths)),
        "requests": n,
    }
    if hasattr(OutputStats(), "answer_logs"):
        logs = [math.log(v) for v in lengths]
        fields.update(
            answer_logs=sum(logs), answer_logs_sq=sum(v * v for v in logs), answer_logs_cu=sum(v**3 for v in logs)
        )
    return OutputStats(**fields)  # type: ignore[arg-type]


def interval(measured: OutputStats, requests: int) -> tuple[float, float, float]:
    """(estimate, low, high) of the sum of `requests` answers, as the plan computes it."""
    expected = requests * measured.mean
    variance, shift = output_spread(measured, requests, measured.stdev)
    half = Z90 * math.sqrt(variance)
    return expected, expected - half + shift, expected + half + shift


def misses(draw: Draw, answers: int, rest: int, trials: int, seed: int, fixed: int = 0) -> tuple[float, float, float]:
    """Shares of trials whose actual lies above / below the interval, and its mean half-width
    (as a share of the estimate). `fixed`: the pilot and the rest split one set of that many rows."""
    rng = random.Random(seed)
    population = [draw(rng) for _ in range(fixed)]
    above = below = 0
    width = 0.0
    for _ in range(trials):
        if fixed:
            rng.shuffle(population)
            sample, actual = population[:answers], sum(population[answers:])
            requests = fixed - answers
        else:
            sample, actual = [draw(rng) for _ in range(answers)], sum(draw(rng) for _ in range(rest))
            requests = rest
        expected, low, high = interval(stats_of(sample), requests)
        above += actual > high
        below += actual < low
        width += (high - low) / 2 / expected
    return above / trials, below / trials, width / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fixed", type=int, default=0, help="rows of one fixed job the pilot is drawn from")
    parser.add_argument("--only", action="append", choices=list(KINDS))
    args = parser.parse_args()
    print("| lengths | answers | requests to come | above | below | inside | mean half-width |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in args.only or list(KINDS):
        for answers in (15, 30, 50):
            for rest in (args.fixed - answers,) if args.fixed else (100, 400):
                above, below, width = misses(KINDS[name], answers, rest, args.trials, args.seed, args.fixed)
                print(
                    f"| {name} | {answers} | {rest} | {above:.1%} | {below:.1%} | {1 - above - below:.1%} "
                    f"| {width:.1%} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
