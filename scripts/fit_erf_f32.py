#!/usr/bin/env python3
"""Fits the f32 erf polynomials of jit/llvm_vector_math.cc (kErfSmall, kErfBig).

    erf(x) = x + x * P(x^2)                        for |x| < 1
    erf(x) = 1 - exp(-x^2) * Q(1/x - 1/2)           for 1 <= |x| <= 4

Least squares with relative weights on 6000 Chebyshev nodes, against Python's double erf and
erfc (accurate to about an ulp of f64, far below f32's), rounded to f32. Prints the coefficients
and the largest error of an f32 evaluation (numpy, without FMA) on a dense grid, in ulps.
Needs numpy (/usr/bin/python3 on Debian).
"""
import math

import numpy as np


def fit(xs, ys, degree):
    v = np.vander(xs, degree + 1, increasing=True) / ys[:, None]
    c, *_ = np.linalg.lstsq(v, np.ones_like(ys), rcond=None)
    return c


def main():
    n = 6000
    u = np.cos(np.pi * (np.arange(n) + 0.5) / n)
    x = 0.5 + 0.5 * u  # [0, 1]
    small = fit(x * x, np.array([math.erf(t) / t for t in x]), 6)
    small[0] -= 1  # erf(x) = x + x * P: the exact x carries the result
    x = 2.5 + 1.5 * u  # [1, 4]
    big = fit(1 / x - 0.5, np.array([math.erfc(t) * math.exp(t * t) for t in x]), 10)
    small32, big32 = small.astype(np.float32), big.astype(np.float32)
    print("kErfSmall", [float(c) for c in small32])
    print("kErfBig", [float(c) for c in big32])

    def horner(c, t):
        p = np.zeros_like(t)
        for k in c[::-1]:
            p = p * t + k
        return p

    xs = np.linspace(1e-4, 5, 400001).astype(np.float32)
    a = np.abs(xs)
    got_small = a + horner(small32, a * a) * a
    ac = np.clip(a, np.float32(1), np.float32(4))
    e = np.exp(-(ac * ac).astype(np.float64)).astype(np.float32)
    got_big = np.float32(1) - e * horner(big32, np.float32(1) / ac - np.float32(0.5))
    got = np.where(a < 1, got_small, got_big).astype(np.float64)
    ref = np.array([math.erf(float(t)) for t in xs])
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    err = np.abs(got - ref) / ulp
    print("max error %.3f ulp at x = %r" % (err.max(), float(xs[err.argmax()])))


if __name__ == "__main__":
    main()
