// The worked numbers of the attention chapter (the values quoted below), reproduced with
// attograd's ops in float32 as the chapter computes them. Printed values have four
// decimals, so the tolerance is 6e-5 (half a unit in the last place plus float error).
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/autograd.h"
#include "nn/attention_maps.h"
#include "nn/chapter/attention.h"
#include "support.h"

using ag::DType;
using ag::Tensor;
using Catch::Matchers::WithinAbs;

namespace {

constexpr double kPrinted = 6e-5;

Tensor chapter_inputs() {
  return ag::tensor({{0.43, 0.15, 0.89},    // Your     (x^1)
                     {0.55, 0.87, 0.66},    // journey  (x^2)
                     {0.57, 0.85, 0.64},    // starts   (x^3)
                     {0.22, 0.58, 0.33},    // with     (x^4)
                     {0.77, 0.25, 0.10},    // one      (x^5)
                     {0.05, 0.80, 0.55}});  // step     (x^6)
}

void require_printed(const Tensor& t, const std::vector<double>& expected) {
  ag_test::require_values(t, expected, kPrinted);
}

// torch.manual_seed(123); torch.rand(3, 2) three times (W_query, W_key, W_value), values
// printed by PyTorch 1.13 so the chapter's section 3.4 can be reproduced exactly.
Tensor seed123_weight(int which) {
  static const double w[3][6] = {{0.29611194133758545, 0.516562283039093, 0.2516707181930542,
                                  0.6885567903518677, 0.07397246360778809, 0.866521954536438},
                                 {0.13657987117767334, 0.10247904062271118, 0.18405646085739136,
                                  0.7264467477798462, 0.3152539134025574, 0.6871066689491272},
                                 {0.07563531398773193, 0.19663816690444946, 0.31641197204589844,
                                  0.4017401337623596, 0.1185683012008667, 0.8273953795433044}};
  return ag::from_vector(std::vector<double>(w[which], w[which] + 6), {3, 2});
}

// torch.manual_seed(789); three nn.Linear(3, 2, bias=False): weights stored [out, in].
Tensor seed789_linear_weight(int which) {
  static const double w[3][6] = {{0.31605908274650574, 0.45680856704711914, 0.5118348598480225,
                                  -0.16828539967536926, -0.3378770351409912, -0.0917738676071167},
                                 {0.4058058261871338, -0.4704205393791199, 0.23680520057678223,
                                  0.2133607417345047, -0.2600506544113159, -0.5105429887771606},
                                 {0.25256988406181335, -0.1414782702922821, -0.19618134200572968,
                                  0.5191074013710022, -0.08516757935285568, -0.2043270468711853}};
  return ag::from_vector(std::vector<double>(w[which], w[which] + 6), {2, 3});
}

}  // namespace

TEST_CASE("chapter 3.3.1: attention scores of the query 'journey' are dot products", "[chapter]") {
  Tensor inputs = chapter_inputs();
  Tensor query = inputs.select(0, 1);
  Tensor scores = ag::matmul(inputs, query);
  require_printed(scores, {0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865});
  REQUIRE_THAT(ag::sum(scores).item(), WithinAbs(6.5617, kPrinted));
  require_printed(scores / ag::sum(scores), {0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656});
}

TEST_CASE("chapter 3.3.1: naive softmax equals the stable softmax on moderate scores",
          "[chapter][softmax]") {
  Tensor scores = ag::matmul(chapter_inputs(), chapter_inputs().select(0, 1));
  Tensor naive = ag::exp(scores) / ag::sum(ag::exp(scores));
  Tensor stable = ag::softmax(scores, 0);
  const std::vector<double> printed{0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581};
  require_printed(naive, printed);
  require_printed(stable, printed);
  REQUIRE_THAT(ag::sum(stable).item(), WithinAbs(1.0, 1e-6));
}

TEST_CASE("naive softmax overflows where the max-subtracted softmax does not",
          "[chapter][softmax]") {
  Tensor big = ag::tensor({1000.0, 1001.0, 1002.0});
  Tensor naive = ag::exp(big) / ag::sum(ag::exp(big));
  REQUIRE(std::isnan(naive.at({0})));  // inf / inf
  ag_test::require_values(ag::softmax(big, 0), {0.09003057, 0.24472847, 0.66524096}, 1e-6);
}

TEST_CASE("chapter 3.3.1: context vector z(2) weights every input", "[chapter]") {
  Tensor inputs = chapter_inputs();
  Tensor weights = ag::softmax(ag::matmul(inputs, inputs.select(0, 1)), 0);
  require_printed(ag::matmul(weights, inputs), {0.4419, 0.6515, 0.5683});
}

TEST_CASE("chapter 3.3.2: all scores and weights and context vectors by matmul", "[chapter]") {
  Tensor inputs = chapter_inputs();
  Tensor scores = ag::matmul(inputs, inputs.t());
  require_printed(scores, {0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310, 0.9544, 1.4950, 1.4754,
                           0.8434, 0.7070, 1.0865, 0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605,
                           0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565, 0.4576, 0.7070, 0.7154,
                           0.3474, 0.6654, 0.2935, 0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450});
  Tensor weights = ag::softmax(scores, -1);
  require_printed(weights,
                  {0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452, 0.1385, 0.2379, 0.2333,
                   0.1240, 0.1082, 0.1581, 0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565,
                   0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720, 0.1526, 0.1958, 0.1975,
                   0.1367, 0.1879, 0.1295, 0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896});
  ag_test::require_values(ag::sum(weights, {-1}), std::vector<double>(6, 1.0), 1e-6);
  REQUIRE_THAT(ag::sum(weights.narrow(1, 0, 1), {0}).item(), WithinAbs(0.9220, kPrinted));
  require_printed(ag::matmul(weights, inputs),
                  {0.4421, 0.5931, 0.5790, 0.4419, 0.6515, 0.5683, 0.4431, 0.6496, 0.5671, 0.4304,
                   0.6298, 0.5510, 0.4671, 0.5910, 0.5266, 0.4177, 0.6503, 0.5645});
}

TEST_CASE("chapter 3.4.1: query and key and value projections with trainable weights",
          "[chapter]") {
  Tensor inputs = chapter_inputs();
  Tensor W_query = seed123_weight(0), W_key = seed123_weight(1), W_value = seed123_weight(2);
  Tensor x_2 = inputs.select(0, 1);
  Tensor query_2 = ag::matmul(x_2, W_query);
  require_printed(query_2, {0.4306, 1.4551});
  Tensor keys = ag::matmul(inputs, W_key), values = ag::matmul(inputs, W_value);
  REQUIRE(keys.shape() == ag::Shape{6, 2});
  REQUIRE_THAT(ag::matmul(query_2, keys.select(0, 1)).item(), WithinAbs(1.8524, kPrinted));
  Tensor scores_2 = ag::matmul(query_2, keys.t());
  require_printed(scores_2, {1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440});
  Tensor weights_2 = ag::softmax(scores_2 / std::sqrt(2.0), -1);
  require_printed(weights_2, {0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820});
  require_printed(ag::matmul(weights_2, values), {0.3061, 0.8210});
}

TEST_CASE("chapter 3.4.2: SelfAttention_v1 gives the printed context vectors", "[chapter]") {
  Tensor x = chapter_inputs();
  Tensor queries = ag::matmul(x, seed123_weight(0)), keys = ag::matmul(x, seed123_weight(1)),
         values = ag::matmul(x, seed123_weight(2));
  Tensor w = ag::softmax(ag::matmul(queries, keys.t()) / std::sqrt(2.0), -1);
  require_printed(ag::matmul(w, values), {0.2996, 0.8053, 0.3061, 0.8210, 0.3058, 0.8203, 0.2948,
                                          0.7939, 0.2927, 0.7891, 0.2990, 0.8040});
}

TEST_CASE("chapter 3.4.2: SelfAttention_v2 with Linear weights stored out by in", "[chapter]") {
  Tensor x = chapter_inputs();
  // nn.Linear computes x @ W^T: the transpose is a view handed to BLAS as a flag
  Tensor queries = ag::matmul(x, seed789_linear_weight(0).t());
  Tensor keys = ag::matmul(x, seed789_linear_weight(1).t());
  Tensor values = ag::matmul(x, seed789_linear_weight(2).t());
  Tensor w = ag::softmax(ag::matmul(queries, keys.t()) / std::sqrt(2.0), -1);
  require_printed(ag::matmul(w, values), {-0.0739, 0.0713, -0.0748, 0.0703, -0.0749, 0.0702,
                                          -0.0760, 0.0685, -0.0763, 0.0679, -0.0754, 0.0693});
}

TEST_CASE(
    "chapter 3.5.1: causal weights renormalised after masking equal softmax of -inf-masked scores",
    "[chapter][causal]") {
  Tensor x = chapter_inputs();
  Tensor queries = ag::matmul(x, seed789_linear_weight(0).t());
  Tensor keys = ag::matmul(x, seed789_linear_weight(1).t());
  Tensor values = ag::matmul(x, seed789_linear_weight(2).t());
  Tensor scores = ag::matmul(queries, keys.t());
  Tensor weights = ag::softmax(scores / std::sqrt(2.0), -1);
  require_printed(weights,
                  {0.1921, 0.1646, 0.1652, 0.1550, 0.1721, 0.1510, 0.2041, 0.1659, 0.1662,
                   0.1496, 0.1665, 0.1477, 0.2036, 0.1659, 0.1662, 0.1498, 0.1664, 0.1480,
                   0.1869, 0.1667, 0.1668, 0.1571, 0.1661, 0.1564, 0.1830, 0.1669, 0.1670,
                   0.1588, 0.1658, 0.1585, 0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529});
  // route 1: zero the future, then renormalise each row
  Tensor masked_simple = ag::masked_fill(weights, ag::triu_mask(6, 6), 0.0);
  Tensor row_sums = ag::sum(masked_simple, {-1}, true);
  require_printed(row_sums, {0.1921, 0.3700, 0.5357, 0.6775, 0.8415, 1.0000});
  Tensor renormalised = masked_simple / row_sums;
  const std::vector<double> causal{
      1.0000, 0,      0,      0,      0,      0, 0.5517, 0.4483, 0,      0,      0,      0,
      0.3800, 0.3097, 0.3103, 0,      0,      0, 0.2758, 0.2460, 0.2462, 0.2319, 0,      0,
      0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0, 0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529};
  require_printed(renormalised, causal);
  // route 2: -inf above the diagonal, then one softmax
  Tensor masked = ag::masked_fill(scores, ag::triu_mask(6, 6), -ag::kInf);
  require_printed(masked.narrow(0, 5, 1), {0.3408, 0.1270, 0.1290, 0.0198, 0.1290, 0.0078});
  REQUIRE(masked.at({0, 1}) == -ag::kInf);
  Tensor causal_weights = ag::softmax(masked / std::sqrt(2.0), 1);
  require_printed(causal_weights, causal);
  ag_test::require_values(causal_weights, renormalised.to_vector(), 1e-6);  // the two routes agree
  require_printed(ag::matmul(causal_weights, values),
                  {-0.0872, 0.0286, -0.0991, 0.0501, -0.0999, 0.0633, -0.0983, 0.0489, -0.0514,
                   0.1098, -0.0754, 0.0693});
}

TEST_CASE("renormalising after masking equals masking with -inf exactly in float64",
          "[chapter][causal]") {
  ag::Generator gen(5);
  Tensor scores = ag::randn({3, 7, 7}, gen, DType::Float64);
  Tensor mask = ag::triu_mask(7, 7);
  Tensor renormalised = ag::masked_fill(ag::softmax(scores, -1), mask, 0.0);
  renormalised = renormalised / ag::sum(renormalised, {-1}, true);
  Tensor direct = ag::softmax(ag::masked_fill(scores, mask, -ag::kInf), -1);
  auto a = renormalised.to_vector(), b = direct.to_vector();
  for (size_t i = 0; i < a.size(); ++i) REQUIRE_THAT(a[i], WithinAbs(b[i], 1e-14));
}

TEST_CASE("chapter 3.5.1: nn::attention_weights prints the chapter's causal weights",
          "[chapter][causal][attention_maps]") {
  // the chapter's SelfAttention_v2 (torch.manual_seed(789)) as one head of MultiHeadAttention
  ag::Generator gen(0);
  nn::MultiHeadAttention one_head(/*d_in=*/3, /*d_out=*/2, /*context_length=*/6, /*dropout=*/0.0,
                                  /*num_heads=*/1, /*qkv_bias=*/false, gen, nullptr);
  {
    ag::NoGradGuard no_grad;
    ag::copy_(one_head.W_query->weight, seed789_linear_weight(0));
    ag::copy_(one_head.W_key->weight, seed789_linear_weight(1));
    ag::copy_(one_head.W_value->weight, seed789_linear_weight(2));
  }
  const Tensor batch = chapter_inputs().reshape({1, 6, 3});
  const Tensor weights = nn::attention_weights(one_head, batch).select(0, 0).select(0, 0);
  // printed by PyTorch in the chapter, less its grad_fn
  REQUIRE(weights.str() ==
          "tensor([[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],\n"
          "        [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],\n"
          "        [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],\n"
          "        [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],\n"
          "        [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],\n"
          "        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]])");
}
