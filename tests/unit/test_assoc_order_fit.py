"""The leading-order error's log-log slopes on tables where the window matters.

The tables are not one power law from step 1: before a weight's first non-zero step the
error is undefined (NaN), at that step the leading order is exact (error ~ 0), the
smallest eta follows another law against steps than the other etas, and only the last step
has the eta law quoted. So a fit that takes the wrong eta, the wrong step, the first non-zero
step, or pools layers gives another number than the closed form."""

from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd
import pytest
from refusals import refuses

from emergence.studies.assoc.compare import order_slopes
from emergence.studies.assoc.theory import first_nonzero_step, leading_coefficient

ETAS = (0.2, 0.1, 0.05)
LAST = 9


def table(laws: dict[tuple[int, str], tuple[float, float]], noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """(layer, weight) -> (eta exponent at the last step, step exponent at the smallest eta).
    Elsewhere: step exponent 3 (other etas)."""
    rng = np.random.default_rng(seed)
    rows = []
    for (layer, weight), (a, b) in laws.items():
        first = first_nonzero_step(weight)
        for eta in ETAS:
            for s in range(0, LAST + 1):
                if s < first:
                    err = float("nan")
                elif s == first:
                    err = 1e-12  # exact at the first non-zero step: log of it is far off any law
                else:
                    k = b if eta == min(ETAS) else 3.0
                    err = 5 * eta**a * (s / LAST) ** k * np.exp(noise * rng.standard_normal())
                rows.append(dict(layer=layer, weight=weight, eta=eta, step=s, rel_error=err))
    return pd.DataFrame(rows).sample(frac=1.0, random_state=seed)  # order must not matter


def least_squares_slope(x, y) -> float:
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    return float(((lx - lx.mean()) * (ly - ly.mean())).sum() / ((lx - lx.mean()) ** 2).sum())


def test_first_nonzero_step_is_where_the_coefficient_leaves_zero():
    for weight in ("W_O", "V", "W", "P"):
        nonzero = [s for s in range(10) if leading_coefficient(weight, s, 0.5) != 0]
        assert first_nonzero_step(weight) == nonzero[0], weight


@pytest.mark.parametrize("s", [0, 1, 2, 3, 4, 7])
def test_leading_coefficient_is_the_sum_over_steps(s):
    # W_O gains eta per step; V gains (W_O coefficient at step k) * eta; W and P gain
    # (W_O coeff)(V coeff) * eta per step: sums written out, not the closed forms.
    eta = 0.3
    wo = [k * eta for k in range(s + 1)]
    v = [sum(wo[j] * eta for j in range(k)) for k in range(s + 1)]
    w = sum(wo[k] * v[k] * eta for k in range(s))
    assert leading_coefficient("W_O", s, eta) == pytest.approx(wo[s])
    assert leading_coefficient("V", s, eta) == pytest.approx(v[s])
    assert leading_coefficient("W", s, eta) == pytest.approx(w) and leading_coefficient("P", s, eta) == pytest.approx(w)
    assert leading_coefficient("W", s, eta) == pytest.approx(sum(k * comb(k, 2) for k in range(s)) * eta**4)


def test_leading_coefficient_of_an_unknown_weight_names_the_known_ones():
    with refuses("'Q'", "W, V, W_O, P", error=ValueError):
        leading_coefficient("Q", 3, 0.1)


def test_slopes_read_last_step_smallest_eta_and_skip_the_first_nonzero_step():
    laws = {(-1, "W_O"): (0.7, 1.5), (0, "V"): (1.3, 0.8), (1, "V"): (0.9, 2.2), (0, "W"): (2.0, 1.1)}
    slopes = order_slopes(table(laws)).set_index(["layer", "weight"])
    assert sorted(slopes.index) == sorted(laws)
    for key, (a, b) in laws.items():
        assert slopes.loc[key, "slope_vs_eta"] == pytest.approx(a, abs=1e-9), key
        assert slopes.loc[key, "slope_vs_steps"] == pytest.approx(b, abs=1e-9), key


def test_slopes_on_noisy_errors_equal_a_hand_least_squares():
    laws = {(0, "V"): (1.0, 1.0), (-1, "W_O"): (1.2, 0.9)}
    t = table(laws, noise=0.3, seed=4)
    slopes = order_slopes(t).set_index(["layer", "weight"])
    for layer, weight in laws:
        g = t[(t["layer"] == layer) & (t["weight"] == weight)]
        last = g[g["step"] == LAST]
        fit = g[(g["eta"] == min(ETAS)) & (g["step"] > first_nonzero_step(weight))]
        assert len(fit) == LAST - first_nonzero_step(weight)
        assert slopes.loc[(layer, weight), "slope_vs_eta"] == pytest.approx(
            least_squares_slope(last["eta"], last["rel_error"])
        )
        assert slopes.loc[(layer, weight), "slope_vs_steps"] == pytest.approx(
            least_squares_slope(fit["step"], fit["rel_error"])
        )


def test_one_point_gives_no_slope():
    # W (first non-zero step 3) logged up to step 4 only: one step in the window, one eta.
    errors = [np.nan, np.nan, np.nan, 1e-12, 0.5]
    rows = [dict(layer=0, weight="W", eta=0.1, step=s, rel_error=e) for s, e in enumerate(errors)]
    slopes = order_slopes(pd.DataFrame(rows))
    assert np.isnan(slopes.loc[0, "slope_vs_eta"]) and np.isnan(slopes.loc[0, "slope_vs_steps"])
