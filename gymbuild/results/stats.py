"""The statistics `gymbuild compare` uses, clustered by task, on numpy and scipy.stats. Pure: no I/O.

The unit of evidence is the task. A task's repeats share the question, so they are not independent
(counting every repeat as a pair understates the uncertainty, up to 3x: Miller 2024); each task gives
one number, the mean over its paired repeats of candidate - baseline, and everything below is
computed on those per-task deltas:

- `Evidence` of one metric: the estimate (the mean of the task deltas), a t interval on them
  (Student's t with n - 1 degrees of freedom, honest at 3 tasks as at 3000), the paired t-test
  p-value, the Wilcoxon signed-rank p-value (for deltas far from normal: many ties at 0, a few large
  moves), McNemar's exact test only where every task has one repeat (then it is the sign test of the
  task deltas), a task bootstrap beside the t interval from `BOOTSTRAP_MIN_TASKS` tasks on, and the
  minimum detectable effect at 80% power.
- `welch`: NeMo Gym 0.7.0's interval (Welch over per-repeat means, as `gym eval compare` prints it),
  kept so the two tools can be checked against each other on the same files.

numpy and scipy are the `compare` extra (pyproject.toml), imported here when a comparison is made:
`submit` and every other verb never load them, and without them `compare` says how to install them in
one line (`Missing`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float64]

CONFIDENCE = 0.95
POWER = 0.80
BOOTSTRAP_MIN_TASKS = 30  # below it a percentile bootstrap is over-confident (76% coverage at 5 tasks)
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101
INSTALL_HINT = "pip install 'gymbuild[compare]'"
MANY_TASKS = 1e9  # more tasks than any benchmark has: "no number of tasks is sure to settle it"


class Missing(ImportError):
    """numpy or scipy is not installed: compare needs them (the `compare` extra)."""


def scipy_stats() -> Any:
    """scipy.stats, or Missing with the one line that installs it."""
    try:
        from scipy import stats  # late: heavy (about 0.3 s), and only compare needs it (an extra)
    except ImportError as err:
        raise Missing(
            f"compare needs numpy and scipy ({err.name} is not installed): {INSTALL_HINT}"
        ) from None
    return stats


def warm() -> None:
    """Import scipy.stats (and numpy) now, in a thread while the rollouts travel; a missing extra is
    said later, by the first use."""
    with contextlib.suppress(Missing):
        scipy_stats()


def numpy() -> Any:
    try:
        import numpy  # late: only compare needs it (an extra)
    except ImportError as err:
        raise Missing(f"compare needs numpy and scipy (numpy is not installed): {INSTALL_HINT}") from err
    return numpy


@dataclass(frozen=True)
class Evidence:
    """What the task deltas of one metric say. `interval` is the t interval, widened to the task
    bootstrap's where that is wider (from BOOTSTRAP_MIN_TASKS tasks); None with fewer than 2 tasks."""

    tasks: int
    estimate: float
    interval: tuple[float, float] | None
    spread: float  # the standard deviation of the task deltas (0 with one task)
    p_value: float | None  # paired t-test of "no change" (None: fewer than 2 tasks)
    p_robust: float | None  # Wilcoxon signed-rank (None: fewer than 2 tasks, or every delta 0)
    normal: bool  # the deltas look normal enough for the t-test to lead (else p_robust leads)
    detectable: float | None  # the smallest |change| found 80% of the time at this many tasks
    t_interval: tuple[float, float] | None = None
    boot_interval: tuple[float, float] | None = None


def _t(q: float, df: float) -> float:
    return float(scipy_stats().t.ppf(q, df))


def zero_spread_bound(n: int) -> float:
    """The half-width used when every task delta is the same (spread 0, where a t interval has zero
    width and would claim certainty from, say, 3 identical pass/fail tasks): the one-sided 97.5%
    Clopper-Pearson bound on the share of tasks that would move, had none moved in n (the "rule of
    three" made exact). For a metric in [0, 1] no task moving in n bounds the mean change by it."""
    return 1 - ((1 - CONFIDENCE) / 2) ** (1 / n)


def detectable(spread: float, n: int) -> float | None:
    """The minimum detectable effect of a two-sided paired t-test at CONFIDENCE and POWER with n tasks
    of this spread: (t_{1-a/2} + t_{power}) * s / sqrt(n), both at n - 1 degrees of freedom."""
    if n < 2:
        return None
    df = n - 1
    return (_t(1 - (1 - CONFIDENCE) / 2, df) + _t(POWER, df)) * spread / math.sqrt(n)


def tasks_to_settle(spread: float, distance: float, n: int) -> int | None:
    """Roughly how many tasks would put the interval clear of a margin `distance` away from the
    estimate, with 80% power if the estimate is the truth: ((z_{1-a/2} + z_power) * s / d)^2, with t
    quantiles at the resulting size (two passes). None: the estimate sits on the margin (or no spread
    is known), and no number of tasks is sure to settle it."""
    if distance <= 0 or not math.isfinite(distance) or spread <= 0:
        return None
    st = scipy_stats()
    needed = float(n)
    for _ in range(2):
        df = max(needed - 1, 1)
        k = float(st.t.ppf(1 - (1 - CONFIDENCE) / 2, df) + st.t.ppf(POWER, df))
        ratio = k * spread / distance
        if not ratio < MANY_TASKS**0.5:  # an estimate a hair from the margin (or inf): no number will do
            return None
        needed = ratio**2
    return max(math.ceil(needed), 2)


def _normal_enough(deltas: Floats) -> bool:
    """Whether the t-test may lead: few distinct values (pass/fail tasks of one repeat: -1, 0, 1) or
    heavy tails make it leaky at small n; the skewness and excess kurtosis are checked against what
    the central limit theorem forgives at this n (|skew| < 4/sqrt(n) * 2, |kurt| < 10/sqrt(n) * 2)."""
    st = scipy_stats()
    n = len(deltas)
    if n < 3 or float(deltas.std()) == 0:
        return n >= 2
    skew = abs(float(st.skew(deltas)))
    kurt = abs(float(st.kurtosis(deltas)))
    return skew < 8 / math.sqrt(n) and kurt < 20 / math.sqrt(n)


def bootstrap_interval(
    deltas: Floats, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """The 95% percentile interval of the mean task delta over tasks resampled whole, with a fixed seed
    (the same files give the same interval on every call and machine). Drawn in chunks of about 4
    million indices: 2000 draws of 12,000 tasks take about 0.1 s."""
    np_ = numpy()
    rng = np_.random.default_rng(seed)
    n = len(deltas)
    means = np_.empty(resamples)
    chunk = max(1, 4_000_000 // max(n, 1))
    for start in range(0, resamples, chunk):
        k = min(chunk, resamples - start)
        means[start : start + k] = deltas[rng.integers(0, n, size=(k, n))].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2
    low, high = np_.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def evidence(deltas: Sequence[float] | Floats, *, bounded: bool, bootstrap: bool = False) -> Evidence:
    """The Evidence of one metric from its per-task deltas. `bounded`: the metric lies in [0, 1]
    (so zero spread is bounded by zero_spread_bound); `bootstrap`: add the task bootstrap from
    BOOTSTRAP_MIN_TASKS tasks (costly: only for the metric that is gated)."""
    np_, st = numpy(), scipy_stats()
    d = np_.asarray(deltas, dtype=float)
    n = len(d)
    estimate = float(d.mean()) if n else math.nan
    if n < 2:
        return Evidence(n, estimate, None, 0.0, None, None, False, None)
    spread = float(d.std(ddof=1))
    if spread == 0:
        half = zero_spread_bound(n) if bounded else 0.0
        t_int = (estimate - half, estimate + half)
        if bounded:  # a difference of two [0, 1] scores lies in [-1, 1]
            t_int = (max(t_int[0], -1.0), min(t_int[1], 1.0))
        # No spread, no t statistic: the sign test of n deltas all on one side (exact, 2 / 2^n).
        p = 1.0 if estimate == 0 else min(1.0, 2 * 0.5**n)
        mde = half if bounded else 0.0
        return Evidence(n, estimate, t_int, 0.0, p, None, True, mde, t_int)
    se = spread / math.sqrt(n)
    half = _t(1 - (1 - CONFIDENCE) / 2, n - 1) * se
    t_int = (estimate - half, estimate + half)
    p = float(2 * st.t.sf(abs(estimate) / se, n - 1))
    nonzero = d[d != 0]
    p_robust = float(st.wilcoxon(nonzero).pvalue) if len(nonzero) else None
    interval = t_int
    boot = None
    if bootstrap and n >= BOOTSTRAP_MIN_TASKS:
        boot = bootstrap_interval(d)
        interval = (min(t_int[0], boot[0]), max(t_int[1], boot[1]))
    return Evidence(
        n, estimate, interval, spread, p, p_robust, _normal_enough(d), detectable(spread, n), t_int, boot
    )


def mcnemar(pass_to_fail: int, fail_to_pass: int) -> float:
    """The exact two-sided McNemar p-value: the binomial(n, 1/2) test of the rarer direction's count,
    in O(1) by scipy's binomial CDF (the sum over every count was O(flips^2): 451 s at 60,000)."""
    n = pass_to_fail + fail_to_pass
    if n == 0:
        return 1.0
    k = min(pass_to_fail, fail_to_pass)
    return float(min(1.0, 2 * scipy_stats().binom.cdf(k, n, 0.5)))


def welch(candidate: Sequence[float], baseline: Sequence[float]) -> tuple[float, float] | None:
    """The 95% Welch interval of mean(candidate) - mean(baseline), as scipy's
    `ttest_ind(equal_var=False).confidence_interval` gives it (NeMo Gym 0.7.0's method); None with
    fewer than two values a side. With no variance on either side it is the difference itself."""
    if len(candidate) < 2 or len(baseline) < 2:
        return None
    np_ = numpy()
    c, b = np_.asarray(candidate, dtype=float), np_.asarray(baseline, dtype=float)
    vc, vb = c.var(ddof=1) / len(c), b.var(ddof=1) / len(b)
    diff = float(c.mean() - b.mean())
    se = math.sqrt(vc + vb)
    if se == 0:
        return diff, diff
    df = (vc + vb) ** 2 / (vc**2 / (len(c) - 1) + vb**2 / (len(b) - 1))
    half = _t(1 - (1 - CONFIDENCE) / 2, df) * se
    return diff - half, diff + half
