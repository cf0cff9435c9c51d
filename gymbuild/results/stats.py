"""The statistics `gymbuild compare` uses, in plain Python (gymbuild depends on no numpy or scipy).

- `paired_bootstrap`: the interval of a paired difference, resampling whole tasks (a task's repeats
  are not independent of each other, so they travel together), with a fixed seed so the same files
  give the same interval on every machine and every call.
- `mcnemar`: the exact McNemar test for pass/fail pairs: only the pairs that flipped carry evidence,
  and under "no change" each flip goes either way with probability 1/2.
- `welch`: the Welch t interval over per-repeat means, which is NeMo Gym 0.7.0's `gym eval compare`
  method (scipy's `ttest_ind(equal_var=False).confidence_interval`); kept so the two tools can be
  checked against each other on the same files. Student's t quantile is found by bisection on its
  CDF (the regularized incomplete beta function, by Lentz's continued fraction).
Pure: no I/O.
"""

from __future__ import annotations

import math
import operator
import random
from collections.abc import Sequence

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated linearly (numpy's default method)."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def paired_bootstrap(
    tasks: Sequence[Sequence[Sequence[float]]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> list[tuple[float, float]]:
    """Per metric, the 95% percentile interval of the mean paired difference.

    `tasks[t][m]` holds task t's differences (candidate - baseline, one per paired repeat) for
    metric m. Every metric is resampled with the same draws of tasks, so the intervals of one
    benchmark describe one and the same set of bootstrap worlds. The statistic of a draw is the mean
    over its pairs (a task of 3 paired repeats weighs 3), the same weighting as the point estimate.
    """
    if not tasks:
        return []
    metrics = len(tasks[0])
    # Per metric, the tasks' sums and pair counts as flat lists, so a draw is summed by C loops
    # (itemgetter, fsum): 2000 draws of 2000 tasks x 4 metrics take a second, not half a minute.
    sums = [[math.fsum(task[m]) for task in tasks] for m in range(metrics)]
    counts = [[len(task[m]) for task in tasks] for m in range(metrics)]
    rng = random.Random(seed)
    draws: list[list[float]] = [[] for _ in range(metrics)]
    population = range(len(tasks))
    for _ in range(resamples):
        chosen = rng.choices(population, k=len(tasks))
        # itemgetter of one index gives the item, not a tuple of it: the one-task case by hand.
        pick = operator.itemgetter(*chosen) if len(chosen) > 1 else lambda seq, i=chosen[0]: (seq[i],)
        for m in range(metrics):
            n = sum(pick(counts[m]))
            if n:
                draws[m].append(math.fsum(pick(sums[m])) / n)
    tail = (1 - CONFIDENCE) / 2
    out = []
    for m in range(metrics):
        ordered = sorted(draws[m])
        out.append(
            (quantile(ordered, tail), quantile(ordered, 1 - tail)) if ordered else (math.nan, math.nan)
        )
    return out


def mcnemar(pass_to_fail: int, fail_to_pass: int) -> float:
    """The exact two-sided McNemar p-value: twice the binomial(n, 1/2) tail of the rarer direction."""
    n = pass_to_fail + fail_to_pass
    if n == 0:
        return 1.0
    k = min(pass_to_fail, fail_to_pass)
    # In integers to the last step: 2**n overflows a float from n = 1024 (a benchmark of 500 tasks x 4
    # repeats has that many flips), and int / int is rounded once, correctly.
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-16
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def t_cdf(t: float, df: float) -> float:
    tail = 0.5 * betainc(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t >= 0 else tail


def t_ppf(q: float, df: float) -> float:
    """Student's t quantile for q in (0.5, 1), by bisection to the last bit."""
    low, high = 0.0, 1.0
    while t_cdf(high, df) < q:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        low, high = (mid, high) if t_cdf(mid, df) < q else (low, mid)
    return (low + high) / 2


def welch(candidate: Sequence[float], baseline: Sequence[float]) -> tuple[float, float] | None:
    """The 95% Welch interval of mean(candidate) - mean(baseline); None with fewer than two values
    a side. With no variance on either side the interval is the difference itself, as scipy says."""
    if len(candidate) < 2 or len(baseline) < 2:
        return None
    nc, nb = len(candidate), len(baseline)
    vc = math.fsum((v - mean(candidate)) ** 2 for v in candidate) / (nc - 1) / nc
    vb = math.fsum((v - mean(baseline)) ** 2 for v in baseline) / (nb - 1) / nb
    se = math.sqrt(vc + vb)
    diff = mean(candidate) - mean(baseline)
    if se == 0:
        return diff, diff
    df = (vc + vb) ** 2 / (vc**2 / (nc - 1) + vb**2 / (nb - 1))
    half = t_ppf(1 - (1 - CONFIDENCE) / 2, df) * se
    return diff - half, diff + half
