// ONNX TfIdfVectorizer onto kiln's tfidf_vectorizer (ir/ops/ngram.cc), whose attributes are
// ONNX's own; the op's relation checks the pool. The op has one version, TfIdfVectorizer-9, so
// the converter serves opsets 9 to 17.
//
// kiln has no string tensors, so a pool of strings (pool_strings) is refused as unsupported;
// string inputs never reach the converter (the importer has no kiln dtype for them).
#include "api/onnx/op_table.h"

namespace kiln::onnx_import {
namespace {

using Outs = std::vector<Expr>;

Outs TfIdfVectorizer(const NodeContext& c) {
  if (!c.Strings("pool_strings", std::vector<std::string>{}).empty())
    c.Unsupported("pool_strings (kiln has no string tensors; pool_int64s is supported)");
  Attrs attrs{{"mode", c.String("mode")},
              {"min_gram_length", c.Int("min_gram_length")},
              {"max_gram_length", c.Int("max_gram_length")},
              {"max_skip_count", c.Int("max_skip_count")},
              {"ngram_counts", c.Ints("ngram_counts")},
              {"ngram_indexes", c.Ints("ngram_indexes")},
              {"pool_int64s", c.Ints("pool_int64s", std::vector<int64_t>{})}};
  if (c.HasAttr("weights")) attrs.Set("weights", c.Floats("weights"));
  return {c.Call("tfidf_vectorizer", {c.In(0)}, attrs)};
}

}  // namespace

const std::map<std::string, Converter>& NgramConverters() {
  static const std::map<std::string, Converter> table = {
      {"TfIdfVectorizer", TfIdfVectorizer},
  };
  return table;
}

}  // namespace kiln::onnx_import
