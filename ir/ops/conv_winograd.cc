// conv_nhwc's 3x3 stride-1 convolutions by Winograd's minimal filtering F(4x4, 3x3) (Lavin and
// Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): each 4x4 block of outputs
// of one channel pair is A^T [(G g G^T) . (B^T d B)] A for the 6x6 input tile d under it and the
// 3x3 filter g, so the product over input channels takes 36 multiply-adds per 16 outputs where
// the direct form takes 144. In kiln's loop IR that is three nests around one batched matmul:
//
//   U[e, c, m]            = (G w[., ., c, m] G^T)[xi, nu]        e = 6 xi + nu (the weights)
//   V[n, g, e, t, c]      = (B^T d(n, ty, tx, c) B)[xi, nu]      (ty, tx): a 4x4 output tile
//   M[n, g, e, t, m]      = sum over c of V[n, g, e, t, c] * U[e, c, m]     (TileLoops' GEMM)
//   y[n, 4 ty + a, 4 tx + b, m] = bias[m] + (A^T M[n, g, ., t, m] A)[a, b]
//
// where g is a group of rows of tiles (ty = g R + r) and t = r tiles_x + tx a tile within it.
// V, M and y are indexed by the group (n, g) first, so FuseLoops runs their nests one group at a
// time inside one parallel loop: V and M shrink to a group (36 x tiles x channels), which stays
// in L2, where whole-image buffers streamed megabytes through L3 (the 112 x 112 conv of 32 -> 64
// channels: 3.3 - 5.2 ms unfused, 1.4 fused, 2.3 direct). A group is one row (R = 1) unless U
// is large and rows have few tiles (GroupRows): the product reads all of U once per group. Every
// nest runs along channels innermost (NHWC: contiguous, whole vectors); the product reads U in
// place. Each transform is written as sums of sums with constant coefficients, zeros dropped; the
// inner sums shared by several outputs are identical expressions, which the code generator computes
// once.
//
// Where it applies (LowerWinogradNhwc says): f32, a 3x3 window with stride and dilation 1, one
// group, at least kMinChannels input and output channels (fewer, and the transforms cost more
// than the 4x fewer multiplies save), and the tile counts and U sizes below for a constant image
// size (WinogradFits), or U given and small for any size (WinogradFitsAnySize: the generic
// tier's kernels). Outputs that are not multiples of 4 take whole tiles over a padded copy
// extended with zeros (WinogradInputSpan), and the result is cropped. The sums run in another order
// than the direct form's: the result differs from it by a few f32 roundings of the transforms'
// magnitudes (see the tests' bound).
#include <optional>
#include <vector>

#include "ir/ops/conv_winograd.h"
#include "ir/ops/op_util.h"
#include "ir/ops/window.h"

namespace kiln::ops {
namespace {

using loop::Expr;
using loop::Stmt;

constexpr int64_t kTile = 4;  // outputs per tile side
constexpr int64_t kIn = 6;    // input tile side: kTile + 3 - 1
constexpr int64_t kMinChannels = 16;
// U computed in the kernel runs on one thread before the rows run in parallel: with fewer tiles
// than this in the whole batch it costs more than it saves (the small CNN's 32 -> 64 conv at
// 16 x 16, batch 1, 16 tiles, at 2 threads: 27 -> 106 us). A precomputed U has no such cost.
constexpr int64_t kMinTiles = 64;
// The product reads all of U for each row of tiles: with too few tiles in a row, streaming U
// costs more than the multiplies saved. TileLoops blocks 4 rows (tiles), so a row needs 4 tiles,
// and 8 where U is transformed in the kernel and larger than kSmallTransformedWeightBytes (the
// small CNN's 64 -> 128 conv at 8 x 8, two tiles a row, U 1.1 MiB: 48 -> 144 us; its 32 -> 64 conv
// at 16 x 16, four tiles a row, U 288 KiB: 48 -> 49 us at batch 1, and at batch 32 the network
// ran 3.7 -> 2.0 ms).
constexpr int64_t kMinTilesPerRow = 4;
constexpr int64_t kMinTilesPerRowLargeU = 8;
constexpr int64_t kSmallTransformedWeightBytes = 512 * 1024;
// U is 36 / 9 = 4 times the weights. Transformed in the kernel, it is kept to what stays in a
// core's L2 across the rows (1 MiB on Zen 5; pool_cnn's 64 -> 128 conv, U 1.1 MiB, ran 2.2 ->
// 1.0 ms).
constexpr int64_t kMaxTransformedWeightBytes = 1280 * 1024;
// Given (a constant weight WinogradConvs transformed), U streamed from L3 or memory once per row
// of tiles still costs far less than the multiplies saved, from four tiles a row (kernels_bench,
// 1 thread, Zen 5, direct -> Winograd with U given: 128 -> 128 channels (U 2.3 MiB) at 16 x 16
// 345 -> 138 us, at 28 x 28 1045 -> 397, at 56 x 56 4288 -> 1659; 256 -> 256 (9 MiB) at 14 x 14
// 1890 -> 635, at 56 x 56 21.4 -> 6.0 ms; 512 -> 512 (36 MiB) at 14 x 14 6.2 -> 3.8 ms). The
// bound keeps U's size sane (and its product from overflowing).
constexpr int64_t kMaxGivenTransformedWeightBytes = int64_t{64} << 20;
// Past this U no longer stays in a core's L2 across rows of tiles, and rows of few tiles run in
// groups of at least kMinTilesPerGroup (GroupRows).
constexpr int64_t kGroupedWeightBytes = 1 << 20;

// A given U past kGroupedWeightBytes pays only over this many output pixels an image. In a whole
// net U does not stay in cache from run to run (ResNet-18's layout: 3 x 9.4 MiB for its 256-channel
// stage alone), and a run reads it from memory once per image, against multiplies saved in
// proportion to the pixels (about HW / 16 flops saved per byte of U). The ResNet-style net at 224 x
// 224, 1 thread, Intel Xeon (AVX-512): its three 256 -> 256 convs at 14 x 14 (196 pixels) ran
// 1.90-2.24 ms each by Winograd and 1.57-1.81 direct, the net 21.0 -> 20.3 ms (and 21.8 -> 20.8);
// its 128 -> 128 ones at 28 x 28 (784 pixels, U 2.3 MiB) keep the form, 0.70 against 1.23 ms.
// A lone 256-channel block, whose U does stay in cache, loses (0.97 -> 1.5 ms): the common case
// is the net.
constexpr int64_t kMinPixelsLargeGivenU = 256;
constexpr int64_t kMinTilesPerGroup = 16;

static_assert(kIn * kIn == kWinogradTileElems);

// F(4x4, 3x3)'s matrices, Lavin's choice of points (0, +-1, +-2, inf).
constexpr double kBt[kIn][kIn] = {
    {4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
    {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1},
};
constexpr double kG[kIn][3] = {
    {1.0 / 4, 0, 0},
    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
    {1.0 / 24, 1.0 / 12, 1.0 / 6},
    {1.0 / 24, -1.0 / 12, 1.0 / 6},
    {0, 0, 1},
};
// A left inverse of G (kGinv G = I): g0 = 4 u0, g2 = u5, g1 = -6 u1 - g0 - g2.
constexpr double kGinv[3][kIn] = {
    {4, 0, 0, 0, 0, 0},
    {-4, -6, 0, 0, 0, -1},
    {0, 0, 0, 0, 0, 1},
};
constexpr double kAt[kTile][kIn] = {
    {1, 1, 1, 1, 1, 0},
    {0, 1, -1, 2, -2, 0},
    {0, 1, 1, 4, 4, 0},
    {0, 1, -1, 8, -8, 1},
};

// sum over i of coeff[i] * term(i), the zero coefficients dropped and +-1 without a multiply.
template <typename Term>
Expr Combine(const double* coeff, int64_t count, DType t, const Term& term) {
  Expr sum;
  for (int64_t i = 0; i < count; ++i) {
    if (coeff[i] == 0) continue;
    Expr v = term(i);
    if (coeff[i] == -1 && sum) {
      sum = loop::Sub(sum, v);
      continue;
    }
    if (coeff[i] != 1) v = loop::Mul(lower::Const(coeff[i], t), v);
    sum = sum ? loop::Add(sum, v) : v;
  }
  return sum;
}

}  // namespace

namespace {

// The window F(4x4, 3x3) computes, and the channel counts where it pays.
bool WinogradWindow(int64_t channels, int64_t m, const std::vector<WindowDim>& dims) {
  if (dims.size() != 2 || channels < kMinChannels || m < kMinChannels) return false;
  for (const WindowDim& d : dims)
    if (d.kernel != 3 || d.stride != 1 || d.dilation != 1) return false;
  // (Past this, U alone is over kMaxGivenTransformedWeightBytes, and u_bytes cannot overflow.)
  return channels <= kMaxGivenTransformedWeightBytes && m <= kMaxGivenTransformedWeightBytes;
}

int64_t Tiles(int64_t out) {
  return (out + kTile - 1) / kTile;
}

// Rows of tiles per group (LowerWinogradNhwc): 1 unless U is past what stays in L2 across the
// rows (kGroupedWeightBytes), the image's tile counts are constants, and a row has fewer than
// kMinTilesPerGroup tiles; then the fewest rows, dividing the tile rows, that make a group of
// kMinTilesPerGroup tiles. Row by row, the product streamed all of U from L3 for each row of
// few tiles, and two threads streaming it ran no faster than one. kernels_bench, U given, Zen 5,
// 1 / 2 threads: 256 -> 256 at 14 x 14 (4 rows of 4 tiles, U 9 MiB, one group) 592 / 554 ->
// 441 / 230 us; 128 -> 128 at 28 x 28 (7 rows of 7, U 2.3 MiB, one group) 397 / - -> 345 / 182.
int64_t GroupRows(const Expr& tiles_y, const Expr& tiles_x, int64_t channels, int64_t m) {
  int64_t ty = 0, tx = 0;
  if (kIn * kIn * channels * m * 4 <= kGroupedWeightBytes || !loop::IsConstInt(tiles_y, &ty) ||
      !loop::IsConstInt(tiles_x, &tx) || tx >= kMinTilesPerGroup)
    return 1;
  for (int64_t rows = 1; rows < ty; ++rows)
    if (ty % rows == 0 && rows * tx >= kMinTilesPerGroup) return rows;
  return ty;
}

}  // namespace

bool WinogradFits(int64_t channels, int64_t m, int64_t images, const std::vector<WindowDim>& dims,
                  bool filter_transformed) {
  if (!WinogradWindow(channels, m, dims)) return false;
  const int64_t tiles_y = Tiles(dims[0].out), tiles_x = Tiles(dims[1].out);
  const int64_t u_bytes = kIn * kIn * channels * m * 4;
  if (tiles_x < kMinTilesPerRow) return false;
  if (filter_transformed)
    return u_bytes <= kMaxGivenTransformedWeightBytes &&
           (u_bytes <= kGroupedWeightBytes || dims[0].out * dims[1].out >= kMinPixelsLargeGivenU);
  return u_bytes <= kMaxTransformedWeightBytes &&
         (u_bytes <= kSmallTransformedWeightBytes || tiles_x >= kMinTilesPerRowLargeU) &&
         images * tiles_y * tiles_x >= kMinTiles;
}

bool WinogradFitsAnySize(int64_t channels, int64_t m, const std::vector<WindowDim>& dims,
                         bool filter_transformed) {
  return filter_transformed && WinogradWindow(channels, m, dims) &&
         kIn * kIn * channels * m * 4 <= kSmallTransformedWeightBytes;
}

int64_t WinogradInputSpan(int64_t out) {
  return Tiles(out) * kTile + 2;
}

Expr WinogradInputSpan(const Expr& out) {
  return loop::Add(
      loop::Mul(loop::FloorDiv(loop::Add(out, I64(kTile - 1)), I64(kTile)), I64(kTile)), I64(2));
}

Tensor WinogradFilter(const Tensor& w) {
  KILN_CHECK(w.dtype() == DType::kFloat32 && w.shape().size() == 4 && w.shape()[0] == 3 &&
                 w.shape()[1] == 3,
             "WinogradFilter of a weight that is not f32 [3, 3, C, M]");
  const int64_t cm = w.shape()[2] * w.shape()[3];
  Tensor u = Tensor::Empty(DType::kFloat32, {kIn * kIn, w.shape()[2], w.shape()[3]});
  const float* src = w.data<float>();
  float* dst = u.data<float>();
  for (int64_t xi = 0; xi < kIn; ++xi)
    for (int64_t nu = 0; nu < kIn; ++nu)
      for (int64_t i = 0; i < cm; ++i) {
        double sum = 0;
        for (int64_t ky = 0; ky < 3; ++ky)
          for (int64_t kx = 0; kx < 3; ++kx)
            sum += kG[xi][ky] * kG[nu][kx] * static_cast<double>(src[(ky * 3 + kx) * cm + i]);
        dst[(xi * kIn + nu) * cm + i] = static_cast<float>(sum);
      }
  return u;
}

Tensor WinogradFilterInverse(const Tensor& u) {
  KILN_CHECK(u.dtype() == DType::kFloat32 && u.shape().size() == 3 && u.shape()[0] == kIn * kIn,
             "WinogradFilterInverse of a filter that is not f32 [36, C, M]");
  const int64_t cm = u.shape()[1] * u.shape()[2];
  Tensor w = Tensor::Empty(DType::kFloat32, {3, 3, u.shape()[1], u.shape()[2]});
  const float* src = u.data<float>();
  float* dst = w.data<float>();
  for (int64_t ky = 0; ky < 3; ++ky)
    for (int64_t kx = 0; kx < 3; ++kx)
      for (int64_t i = 0; i < cm; ++i) {
        double sum = 0;
        for (int64_t xi = 0; xi < kIn; ++xi)
          for (int64_t nu = 0; nu < kIn; ++nu)
            sum +=
                kGinv[ky][xi] * kGinv[kx][nu] * static_cast<double>(src[(xi * kIn + nu) * cm + i]);
        dst[(ky * 3 + kx) * cm + i] = static_cast<float>(sum);
      }
  return w;
}

LTensor LowerWinogradFilterInverse(LowerContext& ctx, const LTensor& u) {
  int64_t channels = 0, m_count = 0;
  KILN_CHECK(loop::IsConstInt(u.shape[1], &channels) && loop::IsConstInt(u.shape[2], &m_count),
             "a transformed filter with symbolic channels");
  const DType t = u.dtype;
  return ctx.MaterializeFill(t, {I64(3), I64(3), I64(channels), I64(m_count)}, "conv_wino_w",
                             [&](const loop::Buffer& buf) {
                               loop::Var c = ctx.NewVar("c"), m = ctx.NewVar("m");
                               std::vector<Stmt> stores;
                               for (int64_t ky = 0; ky < 3; ++ky)
                                 for (int64_t kx = 0; kx < 3; ++kx) {
                                   Expr v = Combine(kGinv[ky], kIn, t, [&](int64_t xi) {
                                     return Combine(kGinv[kx], kIn, t, [&](int64_t nu) {
                                       return u.at({I64(xi * kIn + nu), c, m});
                                     });
                                   });
                                   stores.push_back(loop::Store(buf, {I64(ky), I64(kx), c, m}, v));
                                 }
                               return loop::For(
                                   c, I64(0), I64(channels), loop::ForKind::kSerial,
                                   loop::For(m, I64(0), I64(m_count), loop::ForKind::kSerial,
                                             loop::Seq(std::move(stores))));
                             });
}

LTensor LowerWinogradNhwc(LowerContext& ctx, const LTensor& p, const LTensor& w,
                          bool filter_transformed, const std::optional<LTensor>& bias,
                          int64_t channels, int64_t m_count, const std::vector<Expr>& out_shape) {
  const DType t = p.dtype;
  KILN_CHECK(t == DType::kFloat32, "Winograd's form of a conv of ", DTypeName(t));
  // Whole tiles: the last row and column of tiles may reach past the outputs (their inputs are
  // the padded copy's zeros); y keeps them and the result crops them.
  auto tiles = [](const Expr& out) {
    return loop::FloorDiv(loop::Add(out, I64(kTile - 1)), I64(kTile));
  };
  const Expr tiles_y = tiles(out_shape[1]), tiles_x = tiles(out_shape[2]);
  const Expr batch = p.shape[0];

  // U[e, c, m]: the filters transformed, given (WinogradConvs transforms constant weights once)
  // or here in the kernel (a C x M x 36 pass, small next to the product's C x M x 36 x tiles).
  LTensor u =
      filter_transformed
          ? w
          : ctx.MaterializeFill(
                t, {I64(kIn * kIn), I64(channels), I64(m_count)}, "conv_wino_u",
                [&](const loop::Buffer& buf) {
                  loop::Var c = ctx.NewVar("c"), m = ctx.NewVar("m");
                  std::vector<Stmt> stores;
                  for (int64_t xi = 0; xi < kIn; ++xi)
                    for (int64_t nu = 0; nu < kIn; ++nu) {
                      Expr v = Combine(kG[xi], 3, t, [&](int64_t ky) {
                        return Combine(kG[nu], 3, t, [&](int64_t kx) {
                          return w.at({I64(ky), I64(kx), c, m});
                        });
                      });
                      stores.push_back(loop::Store(buf, {I64(xi * kIn + nu), c, m}, v));
                    }
                  return loop::For(c, I64(0), I64(channels), loop::ForKind::kSerial,
                                   loop::For(m, I64(0), I64(m_count), loop::ForKind::kSerial,
                                             loop::Seq(std::move(stores))));
                });

  // Rows of tiles run in groups of `rows` (GroupRows): V, M and y are indexed by the group
  // (n, g) first and, within it, by the tile t = r * tiles_x + tx of its row r, so FuseLoops
  // runs their nests one group at a time and the product reads U once per group.
  const int64_t rows = GroupRows(tiles_y, tiles_x, channels, m_count);
  const Expr groups = loop::FloorDiv(tiles_y, I64(rows));
  const Expr group_tiles = loop::Mul(I64(rows), tiles_x);
  // A loop nest over (n, g, r, tx, `inner`) around `body`, and the tile's row and index.
  auto tile_nest = [&](const loop::Var& n, const loop::Var& g, const loop::Var& r,
                       const loop::Var& tx, const loop::Var& inner, int64_t inner_extent,
                       Stmt body) {
    body = loop::For(inner, I64(0), I64(inner_extent), loop::ForKind::kSerial, body);
    body = loop::For(tx, I64(0), tiles_x, loop::ForKind::kSerial, body);
    body = loop::For(r, I64(0), I64(rows), loop::ForKind::kSerial, body);
    body = loop::For(g, I64(0), groups, loop::ForKind::kSerial, body);
    return loop::For(n, I64(0), batch, loop::ForKind::kSerial, body);
  };
  auto tile_row = [rows](const Expr& g, const Expr& r) {
    return loop::Add(loop::Mul(g, I64(rows)), r);
  };
  auto tile_index = [tiles_x](const Expr& r, const Expr& tx) {
    return loop::Add(loop::Mul(r, tiles_x), tx);
  };

  // V[n, g, e, t, c]: each input tile transformed. p is the padded input (its row 4 ty + i is
  // the tile's row i), so no tap needs a bounds test.
  LTensor v = ctx.MaterializeFill(
      t, {batch, groups, I64(kIn * kIn), group_tiles, I64(channels)}, "conv_wino_v",
      [&](const loop::Buffer& buf) {
        loop::Var n = ctx.NewVar("n"), g = ctx.NewVar("ty"), r = ctx.NewVar("tr"),
                  tx = ctx.NewVar("tx"), c = ctx.NewVar("c");
        const Expr ty = tile_row(g, r);
        auto d = [&](int64_t i, int64_t j) {
          return p.at({n, loop::Add(loop::Mul(ty, I64(kTile)), I64(i)),
                       loop::Add(loop::Mul(tx, I64(kTile)), I64(j)), c});
        };
        std::vector<Stmt> stores;
        for (int64_t xi = 0; xi < kIn; ++xi)
          for (int64_t nu = 0; nu < kIn; ++nu) {
            Expr val = Combine(kBt[xi], kIn, t, [&](int64_t i) {
              return Combine(kBt[nu], kIn, t, [&](int64_t j) { return d(i, j); });
            });
            stores.push_back(
                loop::Store(buf, {n, g, I64(xi * kIn + nu), tile_index(r, tx), c}, val));
          }
        return tile_nest(n, g, r, tx, c, channels, loop::Seq(std::move(stores)));
      });

  // M[n, g, e, t, m]: 36 matrix products per group of tiles: tiles by input channels by output
  // channels.
  LTensor prod = ctx.Materialize(
      LTensor{t,
              {batch, groups, I64(kIn * kIn), group_tiles, I64(m_count)},
              [&ctx, u, v, channels](const std::vector<Expr>& idx) {
                loop::Var c = ctx.NewVar("kc");
                return loop::Reduce(
                    loop::ReduceKind::kSum,
                    loop::Mul(v.at({idx[0], idx[1], idx[2], idx[3], c}), u.at({idx[2], c, idx[4]})),
                    {{c, I64(channels)}});
              }},
      "conv_wino_m");

  // y: each tile's 4x4 outputs from its 36 products, and the bias.
  const std::vector<Expr> whole = {batch, loop::Mul(tiles_y, I64(kTile)),
                                   loop::Mul(tiles_x, I64(kTile)), I64(m_count)};
  LTensor y = ctx.MaterializeFill(t, whole, "conv_wino_y", [&](const loop::Buffer& buf) {
    loop::Var n = ctx.NewVar("n"), g = ctx.NewVar("ty"), r = ctx.NewVar("tr"),
              tx = ctx.NewVar("tx"), m = ctx.NewVar("m");
    const Expr b = bias ? bias->at({m}) : Expr();
    const Expr ty = tile_row(g, r), ti = tile_index(r, tx);
    std::vector<Stmt> stores;
    for (int64_t a = 0; a < kTile; ++a)
      for (int64_t bx = 0; bx < kTile; ++bx) {
        Expr val = Combine(kAt[a], kIn, t, [&](int64_t xi) {
          return Combine(kAt[bx], kIn, t, [&](int64_t nu) {
            return prod.at({n, g, I64(xi * kIn + nu), ti, m});
          });
        });
        if (b) val = loop::Add(val, b);
        stores.push_back(loop::Store(buf,
                                     {n, loop::Add(loop::Mul(ty, I64(kTile)), I64(a)),
                                      loop::Add(loop::Mul(tx, I64(kTile)), I64(bx)), m},
                                     val));
      }
    return tile_nest(n, g, r, tx, m, m_count, loop::Seq(std::move(stores)));
  });
  y.shape = out_shape;  // cropped: its loads index the whole tiles' buffer
  return y;
}

}  // namespace kiln::ops
