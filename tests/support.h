#pragma once
// Small helpers shared by the test files.
#include <catch2/catch.hpp>
#include <vector>

#include "autograd/autograd.h"
#include "nn/gpt.h"

namespace ag_test {

// Every element of t (in logical order) within tol of expected.
inline void require_values(const ag::Tensor& t, const std::vector<double>& expected, double tol) {
  auto got = t.to_vector();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << " of " << t);
    REQUIRE_THAT(got[i], Catch::Matchers::WithinAbs(expected[i], tol));
  }
}

// Same shape and the same values, element for element.
inline bool bit_equal(const ag::Tensor& a, const ag::Tensor& b) {
  return a.shape() == b.shape() && a.to_vector() == b.to_vector();
}

// A GPT config for tests: sizes given, everything else the spec's default.
inline nn::GPTConfig gpt_config(int64_t vocab, int64_t context, int64_t d_model, int64_t heads,
                                int64_t layers, double dropout) {
  nn::GPTConfig c;
  c.vocab_size = vocab;
  c.context_length = context;
  c.d_model = d_model;
  c.n_heads = heads;
  c.n_layers = layers;
  c.dropout = dropout;
  return c;
}

}  // namespace ag_test
