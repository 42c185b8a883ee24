// The distributed reduction's tree: any split of a step's micro-batches over ranks sums
// them with the same additions as one process accumulating them all.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <random>
#include <string>

#include "support.h"
#include "train/grad_accumulation.h"
#include "train/grad_reduction.h"

namespace {

using train::TreeNode;

// The canonical tree over g[begin, begin + size), as grad_accumulation.h defines it.
std::vector<float> reduction_tree_sum(const std::vector<std::vector<float>>& g, int64_t begin,
                                      int64_t size) {
  if (size == 1) return g[begin];
  const int64_t half = train::tree_split(size);
  std::vector<float> left = reduction_tree_sum(g, begin, half),
                     right = reduction_tree_sum(g, begin + half, size - half);
  for (size_t i = 0; i < left.size(); ++i) left[i] += right[i];
  return left;
}

}  // namespace

TEST_CASE("a rank's micro-batches split into the tree's maximal subtrees", "[reduction]") {
  using V = std::vector<TreeNode>;
  CHECK(train::tree_nodes_within(0, 6, 6) == V{{0, 6}});
  CHECK(train::tree_nodes_within(0, 3, 6) == V{{0, 2}, {2, 1}});
  CHECK(train::tree_nodes_within(3, 6, 6) == V{{3, 1}, {4, 2}});
  CHECK(train::tree_nodes_within(2, 4, 8) == V{{2, 2}});
  CHECK(train::tree_nodes_within(1, 7, 8) == V{{1, 1}, {2, 2}, {4, 2}, {6, 1}});
}

TEST_CASE("every split over ranks covers the step with subtrees in order", "[reduction]") {
  for (int64_t total = 1; total <= 24; ++total)
    for (int64_t ranks = 1; ranks <= total; ++ranks) {
      if (total % ranks) continue;
      const int64_t per = total / ranks;
      int64_t next = 0;
      for (int64_t r = 0; r < ranks; ++r)
        for (const TreeNode& node : train::tree_nodes_within(r * per, (r + 1) * per, total)) {
          INFO("total " << total << ", ranks " << ranks << ", rank " << r);
          REQUIRE(node.begin == next);
          REQUIRE(node.size >= 1);
          next += node.size;
        }
      REQUIRE(next == total);
    }
}

TEST_CASE("combining the ranks' subtree sums gives the single process's bits", "[reduction]") {
  const int64_t n = 5;
  std::vector<std::vector<float>> scratch;
  int64_t groupings_that_differ = 0;
  for (int64_t total : {2, 3, 4, 6, 8, 12}) {
    const auto g = ag_test::mixed_magnitudes(total, n, static_cast<unsigned>(total));
    const std::vector<float> expected = reduction_tree_sum(g, 0, total);
    for (int64_t ranks = 1; ranks <= total; ++ranks) {
      if (total % ranks) continue;
      const int64_t per = total / ranks;
      std::vector<TreeNode> leaves;
      std::vector<std::vector<float>> sums;  // what each rank's accumulator computes
      for (int64_t r = 0; r < ranks; ++r)
        for (const TreeNode& node : train::tree_nodes_within(r * per, (r + 1) * per, total)) {
          leaves.push_back(node);
          sums.push_back(reduction_tree_sum(g, node.begin, node.size));
        }
      std::vector<const float*> values;
      for (const auto& s : sums) values.push_back(s.data());
      std::vector<float> out(n);
      train::tree_combine(leaves, values, total, n, out.data(), scratch);
      INFO("total " << total << ", ranks " << ranks);
      REQUIRE(out == expected);  // bit for bit
      // a sum of the ranks' partial sums in rank order would not do
      std::vector<float> naive = sums[0];
      for (size_t k = 1; k < sums.size(); ++k)
        for (int64_t i = 0; i < n; ++i) naive[i] += sums[k][i];
      groupings_that_differ += naive != expected;
    }
  }
  REQUIRE(groupings_that_differ > 0);  // the test tells the tree from a running sum
}

TEST_CASE("leaves that do not cover the tree are refused", "[reduction]") {
  std::vector<std::vector<float>> scratch;
  float a = 1, b = 2, out = 0;
  REQUIRE_THROWS_AS(train::tree_combine({{0, 1}, {1, 1}}, {&a, &b}, 3, 1, &out, scratch),
                    std::logic_error);
  REQUIRE_THROWS_AS(train::tree_combine({{0, 1}, {2, 1}}, {&a, &b}, 3, 1, &out, scratch),
                    std::logic_error);
}

TEST_CASE("launch detection reads the MPI launchers' variables", "[reduction]") {
  static std::map<std::string, std::string> env;
  auto getenv = [](const char* key) -> const char* {
    auto it = env.find(key);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  env = {};
  CHECK_FALSE(train::detect_launch(getenv).under_mpi);
  env = {{"OMPI_COMM_WORLD_SIZE", "4"}};
  CHECK(train::detect_launch(getenv).under_mpi);
  CHECK(train::detect_launch(getenv).size == 4);
  env = {{"PMI_SIZE", "2"}};
  CHECK(train::detect_launch(getenv).size == 2);
  env = {{"PMIX_RANK", "0"}};
  CHECK(train::detect_launch(getenv).under_mpi);
}
