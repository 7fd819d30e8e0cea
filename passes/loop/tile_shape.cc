// TileLoops' choice of block, and the pass itself: which tile width and how many rows a row
// block takes (the Tiler), from the target's vector width (TileShape) and what the product
// reads; the config keys. The rewrite that builds the tiles is in tile.cc, the order of row
// blocks and column tiles in tile_rows.cc, packed panels and K blocks in tile_panels.cc; see
// tile.cc for what the pass does.
#include <algorithm>
#include <optional>

#include "ir/error.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop/tile_internal.h"
#include "passes/loop_pass.h"

namespace kiln {
namespace {

constexpr char kTileJKey[] = "tile.j";
constexpr char kTileIKey[] = "tile.i";
constexpr char kTilePackKey[] = "tile.pack";
constexpr char kTileKKey[] = "tile.k";

// Pre-packed panels on AVX-512 (TileShape::PanelColumns): 8 rows of 3 vectors, 24 of the 32
// registers, each weight vector loaded feeding 8 FMAs where 64 x 4 fed 4; and its K blocks
// go 128 deep in 24 KiB where 64 columns went 96. The MLP at 32 x 784, 1 thread: 308 -> 291
// us, at 256 x 784 2247 -> 2158 us (min of 6 alternating runs, AVX-512 Xeon).
constexpr int64_t kNarrowPanelColumns = 48;
constexpr int64_t kNarrowPanelRows = 8;

// Pre-packed panels of 2 vectors where 48 columns would leave a tail of one vector and 32
// divide the columns (the encoder layer's 256-wide products, and its 1024-wide one from 128 rows
// up): 12 rows, 24 accumulators. Where 64 x 4 loaded 4 weight vectors for 16 FMAs, 32 x 12
// loads 2 for 24, and a K block of the panel is half the bytes. Encoder layer at 1 x 16, 1
// thread, kernel minima: QKV products 16.5 -> 13.5-14.3 us, FFN down 65.7 -> 56.5-59; 8 rows:
// 14.5-14.9 and 59.6-60.7. The layer, min of 3 alternating runs: 1 x 16 208 -> 188 us at 1
// thread (2 threads 121 -> 122), 1 x 128 at 2 threads 861 -> 808, 8 x 128 12524 -> 12374 and
// 6285 -> 6025 us (AVX-512 Xeon).
constexpr int64_t kHalfPanelColumns = 32;
constexpr int64_t kHalfPanelRows = 12;

// A product narrower than one tile (conv_nhwc's output channels, 16 to 48 on AVX-512) takes
// more rows, up to 16 accumulators (12 with AVX2's 16 registers): with tile.i's 4 rows, 32 channels
// were 8 accumulators, too few to hide the FMA latency. dynamic_conv channels-last at 224 x 224, 1
// thread, kernel minima: 3x3 conv 16 -> 32 at 112 x 112 802 -> 712 us, stride-2 32 -> 32 500 -> 456
// us, 3 -> 16 148 -> 128 us (cap 8: 779 / 504 / 137; 24 accumulators: 792 / 587, spills). MLP and
// encoder unchanged within noise.
constexpr int64_t kNarrowProductAccumulators = 16;
constexpr int64_t kNarrowProductAccumulatorsAvx2 = 12;  // of 16 registers
constexpr int64_t kNarrowProductRows = 12;

// The row block of a tile whose column operand is read off vector boundaries (Tiler's
// UnalignedTile): rows x vectors accumulators, 24 of AVX-512's 32 registers.
constexpr int64_t kUnalignedTileRows = 8;
constexpr int64_t kUnalignedTileVectors = 3;

// The row block of a 4-vector AVX-512 tile over at least kWideTileMinRows rows (FullTileBlock).
constexpr int64_t kWideTileRows = 6;
constexpr int64_t kWideTileMinRows = 24;
constexpr int64_t kWideTileMinTailRows = 4;

}  // namespace

namespace tile_internal {

// Top down, so that an i loop sees its j loop before it is tiled.
class Tiler : public loop::Mutator {
 public:
  // `lanes` (0: unknown) lets a row block widen its tile to divide the columns evenly.
  Tiler(const TileShape& shape, bool tile_set, bool pack, bool pack_set, int64_t lanes,
        int64_t k_block, int64_t threads)
      : tile_(shape.columns),
        rows_(shape.rows),
        narrow_columns_(shape.narrow_columns),
        narrow_rows_(shape.narrow_rows),
        half_columns_(shape.half_columns),
        half_rows_(shape.half_rows),
        tile_set_(tile_set),
        pack_(pack),
        pack_set_(pack_set),
        single_row_(shape.single_row_columns),
        lanes_(lanes),
        k_block_(k_block),
        threads_(threads) {}

 protected:
  Stmt MutateFor(const loop::ForNode* n, const Stmt& self) override {
    // A j loop with no row loop around it: one row (a matrix-vector product), whose few
    // accumulators could not hide the FMA latency; it takes a wider row.
    // A pre-packed operand fixes the tile width to its panels'.
    if (std::optional<ReductionBody> body = TileablePattern(n))
      return TileJ(n, *body, body->prepacked > 0 ? body->prepacked : single_row_, nullptr);
    if (rows_ >= 2) {
      const loop::ForNode* j = loop::AsFor(n->body);
      if (std::optional<ReductionBody> body = TileablePattern(j))
        if (RowBlockable(n, j, *body)) {
          int64_t tile = body->prepacked > 0 ? body->prepacked : EvenTile(j);
          int64_t rows = rows_;
          if (body->prepacked > 0 && body->prepacked == narrow_columns_) {
            rows = narrow_rows_;
          } else if (body->prepacked > 0 && body->prepacked == half_columns_) {
            rows = half_rows_;
          } else if (body->prepacked == 0 && UnalignedTile(n, j, *body)) {
            tile = kUnalignedTileVectors * lanes_;
            rows = kUnalignedTileRows;
          } else if (body->prepacked == 0 && HalfTileFitsL1(n, j, *body, tile)) {
            tile /= 2;
            rows *= 2;
          } else if (int64_t narrow = NarrowRows(j, *body); narrow > rows) {
            rows = narrow;
          } else {
            FullTileBlock(n, j, *body, &tile, &rows);
          }
          return TileRows(n, j, *body, tile, rows, pack_, pack_set_, KBlock(tile), false, threads_);
        }
    }
    return loop::Mutator::MutateFor(n, self);
  }

 private:
  int64_t tile_;
  int64_t rows_;
  int64_t narrow_columns_;  // TileShape's block for pre-packed panels that wide (0: none)
  int64_t narrow_rows_;
  int64_t half_columns_;  // likewise for half_rows_
  int64_t half_rows_;
  bool tile_set_;  // tile.i or tile.j given explicitly: no heuristic changes the block
  bool pack_;
  bool pack_set_;  // tile.pack given explicitly: no heuristic overrides it
  int64_t single_row_;
  int64_t lanes_;
  int64_t k_block_;  // tile.k: 0 sizes K blocks to the panel budget, 1 turns them off
  int64_t threads_;  // target.threads (0: unknown)

  // Rows for a product narrower than one tile (N < tile.j: a conv_nhwc's output channels):
  // enough to keep kNarrowProductAccumulators accumulators, at most kNarrowProductRows.
  int64_t NarrowRows(const loop::ForNode* j, const ReductionBody& body) const {
    int64_t columns = 0;
    if (lanes_ < 1 || tile_set_ || !loop::IsConstInt(j->extent, &columns) || columns >= tile_)
      return 0;
    // lanes_ counts f32 lanes: an f64 product's vectors hold half as many.
    int64_t lanes = lanes_;
    for (const Buffer& acc : body.accumulators)
      lanes = std::min<int64_t>(lanes, lanes_ * 4 / std::max<int64_t>(1, DTypeSize(acc->dtype)));
    const int64_t vectors = (columns + lanes - 1) / std::max<int64_t>(lanes, 1);
    // AVX-512's 32 registers hold 16 accumulators and the operands; AVX2's 16 hold 12.
    const int64_t accumulators =
        lanes_ >= 16 ? kNarrowProductAccumulators : kNarrowProductAccumulatorsAvx2;
    return std::min<int64_t>(kNarrowProductRows, accumulators / vectors);
  }

  // The block of a full 4-vector AVX-512 tile that nothing above reshaped and that is not a
  // pre-packed panel, by its constant row count; `tile` and `rows` stay where neither applies.
  //  - 24 rows or more (a conv's output pixels or channels, not a pre-packed weight's few rows
  //    of activations): kWideTileRows rows, 24 accumulators where tile.i's 4 gave 16, each
  //    vector of the column operand feeding 6 FMAs. dynamic_conv's 3x3 conv 32 -> 64 at 56 x 56
  //    (NHWC, 1 thread, kernel minima): 567 -> 533 us (7 rows 537, 8 spill: 802); the whole
  //    model 1482 -> 1450 us (min of 4 alternating runs, AVX-512 Xeon). The encoder's 16-row
  //    products with 64-column panels ran 7 % slower with 6 rows (16 = 6 + 6 + 4), so
  //    pre-packed panels keep tile.i.
  //  - Fewer rows where the columns are whole tiles and the rows split into blocks of
  //    kWideTileRows with no tail or one of kWideTileMinTailRows rows or more (16 = 6 + 6 + 4,
  //    a 16-pixel output row): kWideTileRows rows too, each block reading an input pixel's
  //    broadcast once for all 64 channels where 48 + 16 read it twice and ran the 16 as 8 rows
  //    of 1 vector (8 accumulators). The small CNN at batch 32, 1 thread, its 3x3 conv 32 -> 64
  //    at 16 x 16 (kernel minima of 4 alternating runs): 1897 -> 1782 us, 1844 -> 1677 in
  //    another; the model 4336 -> 4148 us (ORT 4256); the encoder's attention-times-V product
  //    (16 rows of 64) 1.2 -> 0.9 us.
  //  - Otherwise 8 or 16 rows (a channels-last conv's output row at 8 x 8): 8 rows of 3 vectors (24
  //    accumulators, as UnalignedTile), where 6 rows would leave a tail of 2 and 4 rows of 4
  //    vectors feed each operand vector to 4 FMAs. A 3x3 conv 128 -> 128 at 8 x 8 x 32,
  //    channels-last, 1 thread: 3273 -> 3032 us (kernel minima of 4 alternating runs).
  void FullTileBlock(const loop::ForNode* i, const loop::ForNode* j, const ReductionBody& body,
                     int64_t* tile, int64_t* rows) const {
    int64_t row_count = 0;
    int64_t columns = 0;
    if (lanes_ != 16 || tile_set_ || body.prepacked != 0 || *tile != 4 * lanes_ ||
        !loop::IsConstInt(i->extent, &row_count))
      return;
    const bool whole_tiles = loop::IsConstInt(j->extent, &columns) && columns % *tile == 0;
    if (row_count >= kWideTileMinRows ||
        (whole_tiles &&
         (row_count % kWideTileRows == 0 || row_count % kWideTileRows >= kWideTileMinTailRows))) {
      *rows = std::max(*rows, kWideTileRows);
    } else if (row_count % kUnalignedTileRows == 0) {
      *tile = kUnalignedTileVectors * lanes_;
      *rows = kUnalignedTileRows;
    }
  }

  // Whether a column tile of the operand read in place along j overflows L1 (kL1Bytes) while
  // one half as wide fits in two thirds of it, with the tile at least 4 vectors wide and its
  // width not set by tile.j: then the tile is halved and its rows doubled (as many
  // accumulators), so every row block of a column tile reads it from L1, not L2. A 3x3
  // stride-2 conv 32 -> 32 at 112 x 112 (phase-split input: 50 KiB per 64 columns, 25 per 32):
  // 678 -> 578 us (min of 9 alternating runs, AVX-512 Xeon, 48 KiB L1). Stride-1 convs (23 KiB
  // per tile at 32 channels, 46 at 64) and tiles that would not fit even halved (64 channels at
  // stride 2) stay: there 32 x 8 measured no better.
  bool HalfTileFitsL1(const loop::ForNode* i, const loop::ForNode* j, const ReductionBody& body,
                      int64_t tile) const {
    constexpr int64_t kL1Bytes = 48 << 10;
    if (lanes_ < 1 || tile / lanes_ < 4 || tile % 2 != 0 || (tile / 2) % lanes_ != 0) return false;
    std::optional<ColumnStarts> starts = ColumnTileStarts(body, i->var.get(), j->var.get());
    return starts && ColumnTileBytes(*starts, tile) * 4 > kL1Bytes * 3 &&
           ColumnTileBytes(*starts, tile / 2) * 3 <= kL1Bytes * 2;
  }

  // Whether a row block reads its column operand in place at offsets off a multiple of the
  // vector (UnalignedColumnReads), on a 512-bit target whose every such load straddles two
  // cache lines, with tile.i and tile.j unset and whole blocks of kUnalignedTileRows rows: then
  // the block takes kUnalignedTileRows rows of kUnalignedTileVectors vectors (24
  // accumulators), each load feeding 8 FMAs where 64 x 4 fed 4. On an AVX-512 Xeon, a kernel
  // whose operand sits in L1 ran 4 x 64 at 0.69 of peak with loads one float off a line, 8 x 48
  // at 0.99 (at 1.0 both when aligned); dynamic_conv's 3x3 convs (alternating runs in one
  // process, kiln run --versus): 32 -> 64 at 56 x 56 0.90 of the time, stride-2 32 -> 32 at
  // 112 x 112 0.90 (it had 32-column tiles of 8 rows, HalfTileFitsL1), 16 -> 32 at 112 x 112
  // 0.86-1.0; the whole model 0.89-0.96, MobileNet-like 0.96, the small CNN at batch 32 0.99.
  bool UnalignedTile(const loop::ForNode* i, const loop::ForNode* j,
                     const ReductionBody& body) const {
    int64_t row_count = 0;
    return lanes_ == 16 && !tile_set_ && loop::IsConstInt(i->extent, &row_count) &&
           row_count % kUnalignedTileRows == 0 &&
           UnalignedColumnReads(body, i->var.get(), j->var.get(), lanes_, tile_);
  }

  // The K block for panels `tile` columns wide: tile.k when set, else as deep as a 24 KiB
  // panel allows (L1 is 32 KiB or more on every x86-64 with AVX2; the rest is for the rows of
  // the other operand and the accumulators' traffic), at least 16.
  int64_t KBlock(int64_t tile) const {
    if (k_block_ == 1) return 0;
    if (k_block_ > 1) return k_block_;
    return std::max<int64_t>(16, (24 << 10) / (4 * std::max<int64_t>(tile, 1)));
  }

  // A tile at most 1.5 x tile_ wide (whole vectors, at most 24 accumulators in a block, the
  // most that leave AVX-512's 32 registers room for the operands) that divides a constant
  // column count evenly: the tail tile of a short row (80 columns: 64 + 16) has too few
  // accumulators to hide the FMA latency and reads its operand unpacked. Otherwise tile_.
  int64_t EvenTile(const loop::ForNode* j) const {
    int64_t columns = 0;
    if (lanes_ < 1 || !loop::IsConstInt(j->extent, &columns) || columns % tile_ == 0) return tile_;
    for (int64_t w = tile_ + lanes_; w <= tile_ * 3 / 2; w += lanes_)
      if (w % lanes_ == 0 && columns % w == 0 && rows_ * (w / lanes_) <= 24) return w;
    return tile_;
  }
};

}  // namespace tile_internal

TileShape TileLoopsShape(const PassContext& ctx) {
  int64_t tile = ctx.GetConfigInt(kTileJKey);
  int64_t rows = ctx.GetConfigInt(kTileIKey);
  // A known target sizes what its keys leave unset (see the defaults below).
  if (ctx.GetConfigInt("target.vector_bits") >= 512) {
    if (!ctx.config().count(kTileJKey)) tile = 64;
    if (!ctx.config().count(kTileIKey)) rows = 4;
  }
  TileShape shape{tile, rows, tile};
  if (ctx.GetConfigInt("target.vector_bits") >= 512 && !ctx.config().count(kTileJKey) &&
      !ctx.config().count(kTileIKey)) {
    shape.narrow_columns = kNarrowPanelColumns;
    shape.narrow_rows = kNarrowPanelRows;
    shape.half_columns = kHalfPanelColumns;
    shape.half_rows = kHalfPanelRows;
  }
  for (auto [key, v] : {std::pair{kTileJKey, tile}, std::pair{kTileIKey, rows}})
    if (v < 0) Throw(ErrorCode::kInvalidArgument, key, " must not be negative, got ", v);
  // A single row takes as many accumulators as a block (see the defaults below).
  if (ctx.GetConfigInt("target.vector_bits") >= 128 && !ctx.config().count(kTileJKey))
    shape.single_row_columns = tile * std::max<int64_t>(1, rows);
  return shape;
}

// The any-tail rule, encoder layer at 1 x 16 (16 rows; 256 and 1024 columns, tails of 16), 1
// thread, kernel minima of 3 alternating runs: QKV products 15.3 -> 14.4 us, the FFN's 68.8 ->
// 62.7 and 59.8 -> 55.9 us; at 1 x 128 within 1 %, at 8 x 128 (1024 rows) 1-3 % slower, so
// many rows keep 64-column panels. With 2 threads the 256-column products lost more than that
// (6 panels of unequal width split 3 + 3: the layer 110 -> 124 us), so only wide products (16
// panels or more) take it: the layer at 1 x 16, min of 4 alternating runs, 198 -> 194 us at
// 1 thread, 108 at 2 both ways.
int64_t TileShape::PanelColumns(int64_t n, int64_t m) const {
  if (narrow_columns <= 0) return columns;
  const int64_t tail = n % narrow_columns;
  const bool few_rows =
      m <= kNarrowPanelAnyTailRows && n >= kNarrowPanelAnyTailPanels * narrow_columns;
  if (tail == 0 || tail * 3 >= narrow_columns * 2 || few_rows) return narrow_columns;
  return half_columns > 0 && n % half_columns == 0 ? half_columns : columns;
}

void RegisterTileLoopsPass(PassRegistry& r) {
  // 16 columns x 6 rows: twelve 8-lane accumulators, two vectors of b and one broadcast of a
  // fill 15 of AVX2's 16 vector registers, so the block stays in registers across k (64 x 4,
  // the old default, spilled: 1024^3 ran at 0.69 of Eigen, 16 x 6 at 0.9).
  RegisterPassConfig(kTileJKey, AttrKind::kInt, int64_t{16},
                     "columns per accumulator row in TileLoops (0 or 1: off)");
  RegisterPassConfig(kTileIKey, AttrKind::kInt, int64_t{6},
                     "rows per accumulator block in TileLoops (0 or 1: one row at a time)");
  RegisterPassConfig(kTileKKey, AttrKind::kInt, int64_t{0},
                     "reduction steps per packed panel in TileLoops (0: as many as a 24 KiB panel "
                     "holds; 1: no K blocks)");
  RegisterPassConfig(kTilePackKey, AttrKind::kBool, true,
                     "copy each column tile's panel of a row-blocked operand into a contiguous "
                     "buffer in TileLoops");
  // With target.vector_bits >= 512 (AVX-512: 32 registers of 16 floats) and the keys unset,
  // 64 columns x 4 rows: sixteen accumulators; at 32x784x512 this ran 1.3x faster than 16 x 6.
  // With a known target and tile.j unset, a single row (no row loop: a matrix-vector product)
  // takes tile.j * tile.i columns, as many accumulators as a block: a matrix-vector product
  // streams its weights, and wider rows read longer contiguous runs of each weight row (256
  // floats on AVX-512: 4096 x 1024 weights in 190 us, 266 us at 128 columns, ORT 177; the
  // batch-1 MLP 27.6 us, ORT 29.7; AVX2 code at 96 columns: 28.4 us, 36.9 at 48).
  r.Register(PassRegistration{
      .name = "TileLoops",
      .opt_level = 2,
      .required = {},
      .options = {},
      .doc = "turn column-wise reductions (matmul) into row-wise ones over an accumulator block",
      .create =
          [](const Attrs& o) {
            return CreateLoopFuncPass(
                PassInfo{"TileLoops", 2, {}},
                [](const loop::PrimFunc& f, const PassContext& ctx) {
                  const TileShape shape = TileLoopsShape(ctx);
                  const int64_t tile = shape.columns;
                  int64_t bits = ctx.GetConfigInt("target.vector_bits");
                  if (tile < 2) return f;
                  int64_t lanes = ctx.config().count(kTileJKey) || bits < 128 ? 0 : bits / 32;
                  int64_t k_block = ctx.GetConfigInt(kTileKKey);
                  if (k_block < 0)
                    Throw(ErrorCode::kInvalidArgument, kTileKKey, " must not be negative, got ",
                          k_block);
                  const bool tile_set =
                      ctx.config().count(kTileJKey) > 0 || ctx.config().count(kTileIKey) > 0;
                  tile_internal::Tiler tiler(shape, tile_set, ctx.GetConfigBool(kTilePackKey),
                                             ctx.config().count(kTilePackKey) > 0, lanes, k_block,
                                             ctx.GetConfigInt("target.threads"));
                  return loop::WithBody(f, tiler.MutateStmt(f->body));
                },
                o);
          },
  });
}

}  // namespace kiln
