#pragma once
// Small helpers shared by the test files.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "nn/gpt.h"
#include "train/config.h"
#include "train/training_run.h"

namespace ag_test {

// Under AddressSanitizer, freed memory waits in a quarantine (256 MB) and shadow memory
// doubles what is touched: resident-memory bounds measured there mean nothing.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// A fresh folder per use, removed afterwards (remove_all never follows links planted in it).
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int made = 0;
    path = std::filesystem::temp_directory_path() /
           fmt::format("attograd-test-{}-{}", ::getpid(), made++);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
  // Writes content to name (folders made as needed) and returns its path.
  std::string write(const std::string& name, const std::string& content) const {
    const auto p = path / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
};

// Every element of t (in logical order) within tol of expected.
inline void require_values(const ag::Tensor& t, const std::vector<double>& expected, double tol) {
  auto got = t.to_vector();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << " of " << t);
    REQUIRE_THAT(got[i], Catch::Matchers::WithinAbs(expected[i], tol));
  }
}

// The largest |a - b| over the elements (in logical order) of two tensors of one size.
inline double max_abs_diff(const ag::Tensor& a, const ag::Tensor& b) {
  auto x = a.to_vector(), y = b.to_vector();
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

// Same shape and the same values, element for element.
inline bool bit_equal(const ag::Tensor& a, const ag::Tensor& b) {
  return a.shape() == b.shape() && a.to_vector() == b.to_vector();
}

// Two state dicts hold the same names and the same bits, in the same order.
inline bool same_bits(const nn::StateDict& a, const nn::StateDict& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || a[i].second.to_vector() != b[i].second.to_vector())
      return false;
  return true;
}

// A GPT config for tests: sizes given, everything else docs/model.md's default.
// Token ids drawn uniformly from [0, vocab), int64, of the given shape
inline ag::Tensor random_ids(ag::Generator& gen, int64_t vocab, const ag::Shape& shape) {
  std::vector<int64_t> ids(static_cast<size_t>(ag::shape_numel(shape)));
  for (auto& id : ids) id = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(vocab));
  return ag::from_vector(ids, shape);
}

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

// A training run of a tiny model on the built-in corpus, seconds long, writing into dir.
inline train::RunConfig tiny_run(const TempDir& dir, int64_t layers = 1) {
  train::RunConfig cfg;
  cfg.model.context_length = 8;
  cfg.model.d_model = 16;
  cfg.model.n_heads = 2;
  cfg.model.n_layers = layers;
  cfg.batch_size = 2;
  cfg.steps = 6;
  cfg.threads = 1;
  cfg.sample_tokens = 0;
  cfg.eval_windows = 2;
  cfg.log_interval = 100;
  cfg.out = dir.file("run.h5");
  return cfg;
}

// Runs cfg (from resumed, when given) until it ends or reaches its --stop-at, then its
// finish, required to succeed; returns the last step.
inline int64_t run_to_end(const train::RunConfig& cfg, const io::Checkpoint* resumed = nullptr) {
  train::TrainingRun run(cfg, resumed);
  while (run.wants_another_step()) {
    run.after_step(run.train_step());
    if (run.stop_at_reached()) break;
  }
  REQUIRE(run.finish() == 0);
  return run.step();
}

// rows x columns floats of wildly mixed magnitudes (normal times 10^U(-4, 4)), so that
// every grouping of a sum over the rows rounds differently: for tests of summation order.
inline std::vector<std::vector<float>> mixed_magnitudes(int64_t rows, int64_t columns,
                                                        unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> exponent(-4, 4);
  std::vector<std::vector<float>> v(rows, std::vector<float>(columns));
  for (auto& row : v)
    for (float& x : row) x = normal(rng) * std::pow(10.0f, exponent(rng));
  return v;
}

}  // namespace ag_test
