#!/usr/bin/env python3
"""Makes the f64 erf coefficients of jit/llvm_vector_math.cc (kErfSmallF64, kErfBigF64).

    erf(x) = x + x * P(x^2)                              for |x| < 1
    erf(x) = 1 - exp(-x^2) * Q((1/x - 7/12) / (5/12))    for 1 <= |x| <= 6

P is erf's Taylor series, 2/sqrt(pi) * sum (-1)^n x^(2n) / (n! (2n + 1)), with 1 taken off its
first coefficient (the exact x carries the result) and 19 terms: the first omitted one is below
2^-59 at |x| = 1. Q is a degree-20 least-squares fit of exp(x^2) erfc(x) on 300 Chebyshev
nodes in 1/x, weighted by exp(-x^2), so what it minimizes is erfc's absolute error, the error
that reaches erf = 1 - erfc (near x = 1 that is erfc to ~2^-53 relative; by x = 4 a millionth
would do). Everything in 50-digit arithmetic, rounded to f64 at the end. Prints the
coefficients and the largest error of a plain f64 evaluation (Python floats, no FMA) on a grid
and random points, in ulps. Needs mpmath (pip install mpmath).
"""
import math
import random

import mpmath as mp

mp.mp.dps = 50
SMALL_TERMS = 19
BIG_DEGREE = 20
NODES = 300
LO, HI = mp.mpf(1) / 6, mp.mpf(1)
CENTER, HALF = (LO + HI) / 2, (HI - LO) / 2


def small_coefficients():
    c = [2 / mp.sqrt(mp.pi) * (-1) ** n / (mp.factorial(n) * (2 * n + 1))
         for n in range(SMALL_TERMS)]
    c[0] -= 1
    return [float(v) for v in c]


def big_coefficients():
    rows, rhs = [], []
    for i in range(NODES):
        v = mp.cos(mp.pi * (i + mp.mpf(0.5)) / NODES)
        x = 1 / (CENTER + HALF * v)
        w = mp.exp(-x * x)
        rows.append([w * v ** k for k in range(BIG_DEGREE + 1)])
        rhs.append(w * mp.erfc(x) * mp.exp(x * x))
    a, b = mp.matrix(rows), mp.matrix(rhs)
    c = mp.lu_solve(a.T * a, a.T * b)
    return [float(c[k]) for k in range(BIG_DEGREE + 1)]


def horner(c, t):
    p = 0.0
    for k in reversed(c):
        p = p * t + k
    return p


def main():
    small, big = small_coefficients(), big_coefficients()
    print("kErfSmallF64", small)
    print("kErfBigF64", big)
    center, half = float(CENTER), float(HALF)
    random.seed(1)
    xs = [6 * i / 30000 for i in range(1, 30001)] + [random.random() * 1.5 for _ in range(5000)]
    worst, where = 0.0, 0.0
    for x in xs:
        if x < 1:
            got = x + x * horner(small, x * x)
        else:
            got = 1 - math.exp(-x * x) * horner(big, (1 / x - center) / half)
        want = mp.erf(mp.mpf(x))
        err = abs(float(mp.mpf(got) - want)) / math.ulp(float(want))
        if err > worst:
            worst, where = err, x
    print("max error %.3f ulp at x = %r" % (worst, where))


if __name__ == "__main__":
    main()
