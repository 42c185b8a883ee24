// The breakdown of `attograd bench --breakdown` (autograd/profile.h): timers count their own
// time less the timers inside them, count nothing without a Breakdown, and cover nearly all
// of a training step, with every GEMM a row of its size class and floating-point operations.
#include <catch2/catch.hpp>
#include <chrono>
#include <numeric>

#include "autograd/profile.h"
#include "nn/nn.h"
#include "support.h"

namespace {

using Clock = std::chrono::steady_clock;

void spin_for(std::chrono::microseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

const ag::profile::Row* find_row(const std::vector<ag::profile::Row>& rows,
                                 const std::string& name) {
  for (const auto& row : rows)
    if (row.name == name) return &row;
  return nullptr;
}

}  // namespace

TEST_CASE("a timer counts its own time less the timers inside it", "[profile]") {
  ag::profile::Breakdown breakdown;
  const auto start = Clock::now();
  {
    const ag::profile::Timer outer("outer");
    spin_for(std::chrono::microseconds(3000));
    for (int i = 0; i < 2; ++i) {
      ag::profile::Timer inner("inner");
      REQUIRE(inner.on());
      spin_for(std::chrono::microseconds(4000));
    }
  }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const auto rows = breakdown.rows();
  REQUIRE(rows.size() == 2);
  const auto* inner = find_row(rows, "inner");
  const auto* outer = find_row(rows, "outer");
  REQUIRE((inner && outer));
  REQUIRE(inner->calls == 2);
  REQUIRE(outer->calls == 1);
  REQUIRE(rows.front().name == "inner");  // most time first
  REQUIRE(inner->seconds >= 0.008);
  REQUIRE(outer->seconds >= 0.003);
  REQUIRE(outer->seconds < 0.008);  // the inner timers' 8 ms are not counted twice
  REQUIRE(breakdown.seconds() <= wall);
  REQUIRE(breakdown.seconds() == Approx(inner->seconds + outer->seconds));
}

TEST_CASE("timers count nothing without a Breakdown", "[profile]") {
  const ag::profile::Timer timer("nothing");
  REQUIRE_FALSE(timer.on());
  ag::profile::Breakdown breakdown;
  REQUIRE(breakdown.rows().empty());
}

TEST_CASE("a training step's timers cover it, every GEMM a row with its operations", "[profile]") {
  nn::GPT model(ag_test::gpt_config(65, 32, 64, 4, 2, 0.0), 3);
  ag::Generator gen(5);
  const ag::Tensor ids = ag_test::random_ids(gen, 65, {4, 32});
  const ag::Tensor targets = ag_test::random_ids(gen, 65, {4, 32});
  model.forward(ids, targets).loss.backward();  // warm: the kernels chosen, the cache filled
  ag::profile::Breakdown breakdown;
  const auto start = Clock::now();
  model.forward(ids, targets).loss.backward();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const auto rows = breakdown.rows();
  double gemm_flops = 0;
  for (const auto& row : rows)
    if (row.name.starts_with("GEMM f32")) {
      REQUIRE_FALSE(row.kernel.empty());
      REQUIRE(row.flops > 0);
      gemm_flops += row.flops;
    }
  // the head's GEMM alone: 2 * B*T * d_model * vocab, forward; the blocks' are larger
  REQUIRE(gemm_flops > 3 * 2.0 * 128 * 64 * 65);
  REQUIRE(find_row(rows, "linear_cross_entropy") != nullptr);  // the head and loss fused
  REQUIRE(find_row(rows, "LayerNormBackward") != nullptr);
  REQUIRE(breakdown.seconds() <= wall);
  // what no timer holds is the graph's bookkeeping: a small part of the step
  REQUIRE(breakdown.seconds() >= 0.6 * wall);
}
