// tfidf_vectorizer (ONNX TfIdfVectorizer): counts, per row of an integer input, the occurrences
// of a fixed pool of n-grams, and writes each count (or a weight derived from it) to the
// output column the pool assigns to that n-gram.
//
// The pool is an attribute. pool_int64s holds the n-grams' tokens grouped by length:
// ngram_counts[i] is where the (i+1)-grams start, and the group runs to the next start (or the
// pool's end). Numbering the n-grams through the pool in order, ngram_indexes[g] is the output
// column of n-gram g; only lengths in [min_gram_length, max_gram_length] are counted, the
// others keep their numbers (and columns) but never match.
//
// An n-gram of length n with skip distance d = skip + 1 occurs at start s of a row x when
// x[s + k * d] == token[k] for every k < n (all inside the row). Every skip in
// [0, max_skip_count] counts for n >= 2; a unigram is counted once per position, whatever the
// skips (d = 1 only), as in ONNX's reference and onnxruntime.
//
// Weighting (`mode`): TF writes the count; IDF writes weights[c] where the count is > 0, else 0;
// TFIDF writes count * weights[c]. Without weights every weight is 1. The weight is read per
// output column c, as ONNX's reference and onnxruntime do (the spec's text says "per pooled
// n-gram"; the two agree whenever ngram_indexes is the identity), so weights must cover every
// column. Weighting is done in f64 and rounded to f32 once, which gives the same f32 as the
// f32 product of an f32 weight and an exact count.
//
// Refused (onnxruntime refuses them too): lengths outside [1, ngram_counts.size()], groups that
// are not whole n-grams, ngram_indexes whose length differs from the pool's n-gram count, and
// an n-gram that occurs twice among the counted lengths (ONNX's reference would silently keep
// the last one's column).
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/loop/loop.h"
#include "ir/ops/op_util.h"

namespace kiln {
namespace {

enum class Weighting { kTF, kIDF, kTFIDF };

std::string CheckMode(const AttrValue& v) {
  const std::string& s = std::get<std::string>(v);
  if (s == "TF" || s == "IDF" || s == "TFIDF") return "";
  return StrCat("must be \"TF\", \"IDF\" or \"TFIDF\", got \"", s, "\"");
}

// One counted n-gram of the pool.
struct PoolNgram {
  std::vector<int64_t> tokens;  // n of them
  int64_t column;               // its output column
};

// The attributes, checked and unpacked; shared by the relation, the reference kernel and the
// lowering so that all three read the pool the same way.
struct Pool {
  Weighting weighting = Weighting::kTF;
  int64_t max_skip = 0;
  std::vector<PoolNgram> ngrams;  // the counted lengths only
  int64_t width = 0;              // output columns: max(ngram_indexes) + 1
  std::vector<double> weights;    // per output column; empty: all 1
};

// Unpacks the attributes into `pool`; returns the error message, or "" when they are valid.
// Messages start with the attribute at fault.
std::string ReadPool(const Attrs& attrs, Pool* pool) {
  const std::string& mode = attrs.GetString("mode");
  pool->weighting = mode == "TF"    ? Weighting::kTF
                    : mode == "IDF" ? Weighting::kIDF
                                    : Weighting::kTFIDF;
  const int64_t min_n = attrs.GetInt("min_gram_length");
  const int64_t max_n = attrs.GetInt("max_gram_length");
  pool->max_skip = attrs.GetInt("max_skip_count");
  const std::vector<int64_t>& counts = attrs.GetInts("ngram_counts");
  const std::vector<int64_t>& indexes = attrs.GetInts("ngram_indexes");
  const std::vector<int64_t>& tokens = attrs.GetInts("pool_int64s");
  const std::vector<double>& weights = attrs.GetFloats("weights");
  const int64_t pool_size = static_cast<int64_t>(tokens.size());

  if (min_n < 1) return StrCat("min_gram_length must be >= 1, got ", min_n);
  if (max_n < min_n)
    return StrCat("max_gram_length ", max_n, " is less than min_gram_length ", min_n);
  if (pool->max_skip < 0) return StrCat("max_skip_count must be >= 0, got ", pool->max_skip);
  if (counts.empty()) return "ngram_counts must not be empty";
  if (max_n > static_cast<int64_t>(counts.size()))
    return StrCat("max_gram_length ", max_n, " is longer than the ", counts.size(),
                  " n-gram lengths that ngram_counts ", IntsToString(counts), " describes");
  if (indexes.empty()) return "ngram_indexes must not be empty";

  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0 || counts[i] > pool_size)
      return StrCat("ngram_counts ", IntsToString(counts), ": start ", counts[i], " of the ", i + 1,
                    "-grams is outside pool_int64s (", pool_size, " values)");
    if (i > 0 && counts[i] < counts[i - 1])
      return StrCat("ngram_counts ", IntsToString(counts), " must not decrease (", i,
                    "-grams start at ", counts[i - 1], ", the next group at ", counts[i], ")");
  }
  // Walk the groups, numbering the n-grams as ONNX does (uncounted lengths too).
  int64_t number = 0;
  std::map<std::vector<int64_t>, int64_t> seen;  // counted n-gram -> its number
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) + 1;
    const int64_t start = counts[i];
    const int64_t end = i + 1 < counts.size() ? counts[i + 1] : pool_size;
    if ((end - start) % n != 0)
      return StrCat("ngram_counts ", IntsToString(counts), ": the ", end - start, " values of the ",
                    n, "-grams are not whole ", n, "-grams");
    for (int64_t p = start; p < end; p += n, ++number) {
      if (n < min_n || n > max_n) continue;
      std::vector<int64_t> ngram(tokens.begin() + p, tokens.begin() + p + n);
      auto [it, fresh] = seen.emplace(ngram, number);
      if (!fresh)
        return StrCat("pool_int64s holds the ", n, "-gram ", IntsToString(ngram),
                      " twice (n-grams ", it->second, " and ", number, ")");
      if (number < static_cast<int64_t>(indexes.size()))
        pool->ngrams.push_back(PoolNgram{std::move(ngram), indexes[number]});
    }
  }
  if (number != static_cast<int64_t>(indexes.size()))
    return StrCat("ngram_indexes has ", indexes.size(), " entries but pool_int64s holds ", number,
                  " n-grams (ngram_counts ", IntsToString(counts), ")");
  // Non-negative by the attribute's own check.
  pool->width = *std::max_element(indexes.begin(), indexes.end()) + 1;
  if (!weights.empty()) {
    if (weights.size() != indexes.size())
      return StrCat("weights has ", weights.size(), " values but ngram_indexes has ",
                    indexes.size());
    if (static_cast<int64_t>(weights.size()) < pool->width)
      return StrCat("weights has ", weights.size(),
                    " values but is read per output column, and there are ", pool->width,
                    " (max(ngram_indexes) + 1)");
    pool->weights.assign(weights.begin(), weights.begin() + pool->width);
  }
  return "";
}

Pool CheckedPool(const Attrs& attrs) {
  Pool pool;
  std::string error = ReadPool(attrs, &pool);
  KILN_CHECK(error.empty(), "tfidf_vectorizer attributes passed the type relation: ", error);
  return pool;
}

Type TfIdfRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.dtype != DType::kInt32 && x.dtype != DType::kInt64)
    ctx.Fail(StrCat("input must be i32 or i64, got ", DTypeName(x.dtype)));
  if (x.ndim() != 1 && x.ndim() != 2)
    ctx.Fail(StrCat("input must have rank 1 ([C]) or 2 ([N, C]), got ", ShapeToString(x.shape)));
  Pool pool;
  std::string error = ReadPool(ctx.attrs(), &pool);
  if (!error.empty()) ctx.Fail(error);
  Shape out = x.shape;
  out.back() = Dim(pool.width);
  return TensorType(std::move(out), DType::kFloat32);
}

// The count of each column, then the weighting. The loops follow the definition above
// directly: every n-gram, every skip distance, every start that keeps the n-gram in the row.
void TfIdfKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const Pool pool = CheckedPool(attrs);
  const int64_t len = x.shape().back();
  const int64_t rows = x.ndim() == 2 ? x.shape()[0] : 1;
  auto token = [&x](int64_t i) -> int64_t {
    return x.dtype() == DType::kInt64 ? x.data<int64_t>()[i] : x.data<int32_t>()[i];
  };
  float* y = out[0].data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> count(pool.width, 0);
    for (const PoolNgram& g : pool.ngrams) {
      const int64_t n = static_cast<int64_t>(g.tokens.size());
      const int64_t max_distance = n == 1 ? 1 : pool.max_skip + 1;
      // Past (n - 1) * d >= len no start keeps the n-gram in the row.
      for (int64_t d = 1; d <= max_distance && (n == 1 || (n - 1) * d < len); ++d) {
        for (int64_t s = 0; s + (n - 1) * d < len; ++s) {
          bool match = true;
          for (int64_t k = 0; k < n && match; ++k)
            match = token(r * len + s + k * d) == g.tokens[k];
          if (match) ++count[g.column];
        }
      }
    }
    for (int64_t c = 0; c < pool.width; ++c) {
      const double w = pool.weights.empty() ? 1.0 : pool.weights[c];
      double v = static_cast<double>(count[c]);
      if (pool.weighting == Weighting::kIDF) v = count[c] > 0 ? w : 0.0;
      if (pool.weighting == Weighting::kTFIDF) v *= w;
      y[r * pool.width + c] = static_cast<float>(v);
    }
  }
}

// ---- Lowering ----
//
// The pool is known when compiling, so each output column c has fixed n-grams. They are
// grouped into "slots": slot (n, i) of column c is the i-th counted n-gram of length n that
// maps to c (one slot per length when ngram_indexes is one-to-one, the usual case). Each slot
// becomes per-column tables over c, one per token position plus whether the column has that
// slot, and
//
//   count[b, c] = sum over slots (n, i) with has[c] of
//                 sum over d in [1, D_n], s in [0, C - (n - 1) d) of
//                     (x[b, s + k d] == token_k[c] for every k < n)
//
// as a Reduce over d whose source is a Reduce over s (D_1 = 1; for n >= 2, D_n is
// max_skip_count + 1 capped at the largest d that fits the row, (C - 1) / (n - 1)), so every
// read is in bounds and a large max_skip_count costs nothing beyond the row.
//
// Cost: a table is a balanced tree of selects over c (depth log2(width); runs of equal values
// collapse), materialized once per kernel run: O(width^2) time in the worst case, since a
// select evaluates both arms; a table that is the same for every column is a constant. Each
// output element then costs sum over slots of about D_n * C * n compares: the kernel is
// O(rows * width * C * D * n), against a hash lookup's O(rows * C * D * n). That is fine for
// small vocabularies (the ONNX tests, tens to hundreds of n-grams); a vocabulary of tens of
// thousands would want constant buffers in loop IR or a hashed pool, which kiln lacks.

using loop::Expr;

// values[c] for c in [lo, hi) as a balanced tree of selects on `c`.
template <typename V, typename Imm>
Expr TableTree(const std::vector<V>& values, int64_t lo, int64_t hi, const Expr& c, Imm imm) {
  if (hi - lo == 1 || std::all_of(values.begin() + lo, values.begin() + hi,
                                  [&](const V& v) { return v == values[lo]; }))
    return imm(values[lo]);
  const int64_t mid = lo + (hi - lo) / 2;
  return loop::Select(loop::MakeBinary(loop::BinaryOp::kLT, c, loop::IntImm(mid)),
                      TableTree(values, lo, mid, c, imm), TableTree(values, mid, hi, c, imm));
}

// A per-column table as a function of the column index: a constant when every column holds
// the same value, else a tree of selects computed once into a kernel-local buffer.
template <typename V, typename Imm>
std::function<Expr(const Expr&)> ColumnTable(LowerContext& ctx, const std::vector<V>& values,
                                             DType dtype, const std::string& name, Imm imm) {
  const int64_t width = static_cast<int64_t>(values.size());
  if (std::all_of(values.begin(), values.end(), [&](const V& v) { return v == values[0]; })) {
    Expr same = imm(values[0]);
    return [same](const Expr&) { return same; };
  }
  LTensor table = ctx.Materialize(LTensor{dtype,
                                          {loop::IntImm(width)},
                                          [values, width, imm](const std::vector<Expr>& idx) {
                                            return TableTree(values, 0, width, idx[0], imm);
                                          }},
                                  name);
  return [table](const Expr& c) { return table.at({c}); };
}

struct Slot {
  int64_t n = 0;
  std::vector<std::function<Expr(const Expr&)>> token;  // per position k, a column table
  std::function<Expr(const Expr&)> has;                 // bool: the column has this slot
};

std::vector<LTensor> LowerTfIdf(LowerContext& ctx, const std::vector<LTensor>& in,
                                const Attrs& attrs, const std::vector<Type>& out_types) {
  const LTensor x = in[0];
  const Pool pool = CheckedPool(attrs);
  const int64_t width = pool.width;

  // Slots: the n-grams of each length, grouped by column.
  std::map<int64_t, std::vector<std::vector<const PoolNgram*>>> by_length;  // n -> column -> ..
  for (const PoolNgram& g : pool.ngrams) {
    auto& columns = by_length[static_cast<int64_t>(g.tokens.size())];
    columns.resize(width);
    columns[g.column].push_back(&g);
  }
  std::vector<Slot> slots;
  for (const auto& [n, columns] : by_length) {
    size_t depth = 0;
    for (const auto& c : columns) depth = std::max(depth, c.size());
    for (size_t i = 0; i < depth; ++i) {
      Slot slot;
      slot.n = n;
      std::vector<int64_t> has(width, 0);
      std::vector<std::vector<int64_t>> tokens(n, std::vector<int64_t>(width, 0));
      for (int64_t c = 0; c < width; ++c) {
        if (i >= columns[c].size()) continue;
        has[c] = 1;
        for (int64_t k = 0; k < n; ++k) tokens[k][c] = columns[c][i]->tokens[k];
      }
      const std::string name = StrCat("tfidf_", n, "gram", i);
      for (int64_t k = 0; k < n; ++k)
        slot.token.push_back(ColumnTable(ctx, tokens[k], DType::kInt64, StrCat(name, "_token", k),
                                         [](int64_t v) { return loop::IntImm(v); }));
      slot.has = ColumnTable(ctx, has, DType::kBool, StrCat(name, "_has"),
                             [](int64_t v) { return loop::BoolImm(v != 0); });
      slots.push_back(std::move(slot));
    }
  }
  std::function<Expr(const Expr&)> weight = ColumnTable(
      ctx, pool.weights.empty() ? std::vector<double>(width, 1.0) : pool.weights, DType::kFloat64,
      "tfidf_weight", [](double v) { return loop::FloatImm(v, DType::kFloat64); });

  const bool batched = x.ndim() == 2;
  const Expr len = x.shape.back();
  const int64_t max_distance = pool.max_skip + 1;
  const Weighting weighting = pool.weighting;
  auto at = [&ctx, x, slots, weight, batched, len, max_distance,
             weighting](const std::vector<Expr>& idx) {
    const Expr c = idx.back();
    auto token_at = [&](const Expr& pos) {
      return loop::Cast(DType::kInt64, batched ? x.at({idx[0], pos}) : x.at({pos}));
    };
    Expr count = loop::IntImm(0);
    for (const Slot& slot : slots) {
      const int64_t n = slot.n;
      loop::Var d = ctx.NewVar("d");  // the skip distance minus 1 (n >= 2)
      loop::Var s = ctx.NewVar("s");  // the start
      const Expr distance = n == 1 ? loop::IntImm(1) : loop::Add(d, loop::IntImm(1));
      Expr match;
      for (int64_t k = 0; k < n; ++k) {
        Expr eq = loop::MakeBinary(loop::BinaryOp::kEQ,
                                   token_at(loop::Add(s, loop::Mul(loop::IntImm(k), distance))),
                                   slot.token[k](c));
        match = match ? loop::MakeBinary(loop::BinaryOp::kAnd, match, eq) : eq;
      }
      const Expr starts = n == 1 ? len : loop::Sub(len, loop::Mul(loop::IntImm(n - 1), distance));
      Expr hits =
          loop::Reduce(loop::ReduceKind::kSum,
                       loop::Select(match, loop::IntImm(1), loop::IntImm(0)), {{s, starts}});
      if (n >= 2) {
        // Distances that fit the row: (n - 1) * (d + 1) <= C - 1; none when C is 0.
        const Expr distances = loop::Max(
            loop::IntImm(0),
            loop::Min(loop::IntImm(max_distance),
                      loop::FloorDiv(loop::Sub(len, loop::IntImm(1)), loop::IntImm(n - 1))));
        hits = loop::Reduce(loop::ReduceKind::kSum, hits, {{d, distances}});
      }
      count = loop::Add(count, loop::Select(slot.has(c), hits, loop::IntImm(0)));
    }
    const Expr counted = loop::Cast(DType::kFloat64, count);
    Expr v = counted;
    if (weighting == Weighting::kIDF)
      v = loop::Select(loop::MakeBinary(loop::BinaryOp::kGT, count, loop::IntImm(0)), weight(c),
                       loop::FloatImm(0, DType::kFloat64));
    if (weighting == Weighting::kTFIDF) v = loop::Mul(counted, weight(c));
    return loop::Cast(DType::kFloat32, v);
  };
  return {LTensor{DType::kFloat32, ctx.ShapeExpr(AsTensor(out_types[0])->shape), at}};
}

}  // namespace

void RegisterNgramOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "tfidf_vectorizer",
      .doc = "ONNX TfIdfVectorizer: per row of an i32/i64 input [C] or [N, C], counts the "
             "occurrences of the n-grams of pool_int64s (grouped by length at ngram_counts; "
             "lengths min_gram_length..max_gram_length, skips 0..max_skip_count, unigrams once "
             "per position) into the columns ngram_indexes gives them; mode TF (the count), IDF "
             "(weights[column] where counted) or TFIDF (count * weights[column]); f32 result "
             "[max(ngram_indexes) + 1] or [N, max(ngram_indexes) + 1].",
      .min_inputs = 1,
      .max_inputs = 1,
      .attrs = {AttrSpec{"mode", AttrKind::kString, std::nullopt, CheckMode},
                AttrSpec{"min_gram_length", AttrKind::kInt, std::nullopt},
                AttrSpec{"max_gram_length", AttrKind::kInt, std::nullopt},
                AttrSpec{"max_skip_count", AttrKind::kInt, std::nullopt},
                AttrSpec{"ngram_counts", AttrKind::kInts, std::nullopt},
                AttrSpec{"ngram_indexes", AttrKind::kInts, std::nullopt,
                         ops::CheckNonNegativeInts()},
                AttrSpec{"pool_int64s", AttrKind::kInts, AttrValue{std::vector<int64_t>{}}},
                AttrSpec{"weights", AttrKind::kFloats, AttrValue{std::vector<double>{}}}},
      // Each output element reads its whole input row, at offsets that depend on the pool.
      .pattern = OpPattern::kOpaque,
      .type_rel = TfIdfRel,
      .ref_kernel = TfIdfKernel,
      .lower = LowerTfIdf,
  });
}

}  // namespace kiln
