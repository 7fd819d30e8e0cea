; LLVM 19.1's SLP vectorizer miscompiles this for -mcpu=znver4 and znver5 (jit/llvm_target.h).
; Reduced by hand from kiln's conv kernel (f64, x [1, 4, 9], w [6, 2, 2], group=2, strides=[3]),
; whose loops unroll to these products; the same four outputs come out wrong.
;
; The IR is valid: every access is in bounds, the noalias arguments do not overlap, and nothing
; is poison. With gathers cheap in the znver4 cost model, SLP vectorizes out[10..17] as one
; <8 x double> multiply whose operand mixes lanes extracted from a masked gather with scalar
; loads (%xe, %xf). The final shufflevector that assembles that operand has poison in lanes 3,
; 4, 6 and 7, where %xe and %xf belong; the shuffle that would supply them is left unused. So
; out[13], out[14], out[16] and out[17] get whatever the backend leaves there.
;
;   B=/usr/lib/llvm-19/bin
;   $B/opt -mtriple=x86_64-pc-linux-gnu -mcpu=znver4 -passes=slp-vectorizer \
;     tests/jit/data/zen4_slp_gather_shuffle.ll -S | grep 'i32 poison, i32 poison, i32 1'
;
; With -mcpu=znver3, skylake-avx512 or sapphirerapids it is left scalar (or vectorized right).
; Called as f(x, w, out) with x[i] = i + 1 and w[i] = 100 + i, out[13] must be 3000, out[14]
; 3100, out[16] 3000 and out[17] 3100; the znver4 code gives 10300 for all four.
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

define void @f(ptr noalias %x, ptr noalias %w, ptr noalias %out) {
entry:
  %xa.p = getelementptr i8, ptr %x, i64 80
  %xa = load double, ptr %xa.p, align 8
  %xb.p = getelementptr i8, ptr %x, i64 104
  %xb = load double, ptr %xb.p, align 8
  %xc.p = getelementptr i8, ptr %x, i64 128
  %xc = load double, ptr %xc.p, align 8
  %xd.p = getelementptr i8, ptr %x, i64 224
  %xd = load double, ptr %xd.p, align 8
  %xe.p = getelementptr i8, ptr %x, i64 232
  %xe = load double, ptr %xe.p, align 8
  %xf.p = getelementptr i8, ptr %x, i64 240
  %xf = load double, ptr %xf.p, align 8
  %w3.p = getelementptr i8, ptr %w, i64 24
  %w3 = load double, ptr %w3.p, align 8
  %w7.p = getelementptr i8, ptr %w, i64 56
  %w7 = load double, ptr %w7.p, align 8
  %w11.p = getelementptr i8, ptr %w, i64 88
  %w11 = load double, ptr %w11.p, align 8
  %w15.p = getelementptr i8, ptr %w, i64 120
  %w15 = load double, ptr %w15.p, align 8
  %w0 = load double, ptr %w, align 8
  %w0b = load double, ptr %w, align 8
  %m2 = fmul double %xc, %w3
  %s2 = fadd double %m2, 0.000000e+00
  %o2 = getelementptr i8, ptr %out, i64 16
  store double %s2, ptr %o2, align 8
  %m3 = fmul double %xa, %w7
  %s3 = fadd double %m3, 0.000000e+00
  %o3 = getelementptr i8, ptr %out, i64 24
  store double %s3, ptr %o3, align 8
  %m4 = fmul double %xb, %w7
  %s4 = fadd double %m4, 0.000000e+00
  %o4 = getelementptr i8, ptr %out, i64 32
  store double %s4, ptr %o4, align 8
  %m5 = fmul double %xc, %w7
  %s5 = fadd double %m5, 0.000000e+00
  %o5 = getelementptr i8, ptr %out, i64 40
  store double %s5, ptr %o5, align 8
  %m6 = fmul double %xa, %w11
  %s6 = fadd double %m6, 0.000000e+00
  %o6 = getelementptr i8, ptr %out, i64 48
  store double %s6, ptr %o6, align 8
  %m7 = fmul double %xb, %w11
  %s7 = fadd double %m7, 0.000000e+00
  %o7 = getelementptr i8, ptr %out, i64 56
  store double %s7, ptr %o7, align 8
  %m8 = fmul double %xc, %w11
  %s8 = fadd double %m8, 0.000000e+00
  %o8 = getelementptr i8, ptr %out, i64 64
  store double %s8, ptr %o8, align 8
  %m9 = fmul double %xd, %w15
  %s9 = fadd double %m9, 0.000000e+00
  %o9 = getelementptr i8, ptr %out, i64 72
  store double %s9, ptr %o9, align 8
  %m10 = fmul double %xe, %w15
  %s10 = fadd double %m10, 0.000000e+00
  %o10 = getelementptr i8, ptr %out, i64 80
  store double %s10, ptr %o10, align 8
  %m11 = fmul double %xf, %w15
  %s11 = fadd double %m11, 0.000000e+00
  %o11 = getelementptr i8, ptr %out, i64 88
  store double %s11, ptr %o11, align 8
  %m12 = fmul double %xd, %w0
  %s12 = fadd double %m12, 0.000000e+00
  %o12 = getelementptr i8, ptr %out, i64 96
  store double %s12, ptr %o12, align 8
  %m13 = fmul double %xe, %w0
  %s13 = fadd double %m13, 0.000000e+00
  %o13 = getelementptr i8, ptr %out, i64 104
  store double %s13, ptr %o13, align 8
  %m14 = fmul double %xf, %w0
  %s14 = fadd double %m14, 0.000000e+00
  %o14 = getelementptr i8, ptr %out, i64 112
  store double %s14, ptr %o14, align 8
  %m15 = fmul double %xd, %w0b
  %s15 = fadd double %m15, 0.000000e+00
  %o15 = getelementptr i8, ptr %out, i64 120
  store double %s15, ptr %o15, align 8
  %m16 = fmul double %xe, %w0b
  %s16 = fadd double %m16, 0.000000e+00
  %o16 = getelementptr i8, ptr %out, i64 128
  store double %s16, ptr %o16, align 8
  %m17 = fmul double %xf, %w0b
  %s17 = fadd double %m17, 0.000000e+00
  %o17 = getelementptr i8, ptr %out, i64 136
  store double %s17, ptr %o17, align 8
  ret void
}
