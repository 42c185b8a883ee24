// Printing matches PyTorch character for character. Every expected string below was
// produced by PyTorch 1.13 (str(t) with the default torch.set_printoptions: precision 4,
// threshold 1000, edgeitems 3, linewidth 80) on the same values, and is hard-coded here.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include "autograd/autograd.h"

using ag::DType;
using ag::Tensor;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

namespace {

const double kNan = std::nan("");
const double kInf = std::numeric_limits<double>::infinity();

Tensor arange_f(int64_t n, DType dtype = DType::Float32) {
  return ag::arange(0, static_cast<double>(n), 1, dtype);
}

}  // namespace

TEST_CASE("a softmax row prints with four decimals as in PyTorch", "[print]") {
  Tensor row = ag::tensor({0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581});
  CHECK(row.str() == "tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])");
  // values with more digits round to four decimals
  CHECK(ag::tensor({0.123456, 0.5}).str() == "tensor([0.1235, 0.5000])");
}

TEST_CASE("operator<< prints the same string as str()", "[print]") {
  Tensor t = ag::tensor({{1.5, 2.0}});
  std::ostringstream os;
  os << t;
  CHECK(os.str() == "tensor([[1.5000, 2.0000]])");
}

TEST_CASE("a 2-D float32 tensor aligns its columns", "[print]") {
  CHECK(ag::tensor({{1.5, -2.25, 3.0}, {0.125, 10.5, -7.75}}).str() ==
        "tensor([[ 1.5000, -2.2500,  3.0000],\n"
        "        [ 0.1250, 10.5000, -7.7500]])");
}

TEST_CASE("negative values are right-aligned to the widest entry", "[print]") {
  CHECK(ag::tensor({{-1.5, 2.25}, {3.125, -40.0}}).str() ==
        "tensor([[ -1.5000,   2.2500],\n"
        "        [  3.1250, -40.0000]])");
  CHECK(ag::tensor({-1., 2., -300.}).str() == "tensor([  -1.,    2., -300.])");
  CHECK(ag::tensor({-1e-5, 2e-5}).str() == "tensor([-1.0000e-05,  2.0000e-05])");
}

TEST_CASE("a 3-D tensor separates its 2-D blocks with a blank line", "[print]") {
  Tensor t = arange_f(12).reshape({2, 2, 3}) / 4.0;
  CHECK(t.str() ==
        "tensor([[[0.0000, 0.2500, 0.5000],\n"
        "         [0.7500, 1.0000, 1.2500]],\n"
        "\n"
        "        [[1.5000, 1.7500, 2.0000],\n"
        "         [2.2500, 2.5000, 2.7500]]])");
}

TEST_CASE("integer-valued floats print with a trailing point", "[print]") {
  CHECK(ag::tensor({1., 2., 3.}).str() == "tensor([1., 2., 3.])");
  CHECK(ag::zeros({2, 2}).str() ==
        "tensor([[0., 0.],\n"
        "        [0., 0.]])");
  // 1e9 exceeds 1e8, so even integers go scientific
  CHECK(ag::tensor({1e9, 3.}).str() == "tensor([1.0000e+09, 3.0000e+00])");
}

TEST_CASE("fractional values spanning more than 1e3 print in scientific notation", "[print]") {
  SECTION("a wide span") {
    CHECK(ag::tensor({1.5, 2500.0, 0.25}).str() == "tensor([1.5000e+00, 2.5000e+03, 2.5000e-01])");
  }
  SECTION("a value above 1e8") {
    CHECK(ag::tensor({1.5e9, 2.5}).str() == "tensor([1.5000e+09, 2.5000e+00])");
  }
  SECTION("tiny values below 1e-4") {
    CHECK(ag::tensor({1e-5, 2e-5}).str() == "tensor([1.0000e-05, 2.0000e-05])");
  }
}

// attograd prints "tensor([    1., 10000.])": its integer mode switches to scientific only
// above 1e8, while PyTorch also does when max/min of the nonzero magnitudes exceeds 1e3.
TEST_CASE("integer-valued floats spanning more than 1e3 print in scientific notation", "[print]") {
  CHECK(ag::tensor({1., 10000.}).str() == "tensor([1.0000e+00, 1.0000e+04])");
}

TEST_CASE("nan and inf print as PyTorch's", "[print]") {
  CHECK(ag::tensor({kNan, kInf, -kInf, 1.5}).str() == "tensor([   nan,    inf,   -inf, 1.5000])");
  CHECK(ag::tensor({kNan, 0.5}).str() == "tensor([   nan, 0.5000])");
  CHECK(ag::tensor({kNan, kNan}).str() == "tensor([nan, nan])");
  CHECK(ag::tensor({kInf, 2.5}, DType::Float64).str() ==
        "tensor([   inf, 2.5000], dtype=torch.float64)");
}

// PyTorch sizes columns from the nonzero finite values only; attograd also counts "inf",
// "-inf", "nan" and zeros, so it pads the other entries: "tensor([  1., -inf])",
// "tensor([ 0., nan])", "tensor([ inf, -inf])", "tensor([-0.,  1.])",
// "tensor([-0.0000,  1.5000])".
TEST_CASE("non-finite values and zeros do not widen the columns", "[print]") {
  CHECK(ag::tensor({1., -kInf}).str() == "tensor([1., -inf])");
  CHECK(ag::tensor({0., kNan}).str() == "tensor([0., nan])");
  CHECK(ag::tensor({kInf, -kInf}).str() == "tensor([inf, -inf])");
  CHECK(ag::tensor({-0.0, 1.0}).str() == "tensor([-0., 1.])");
  CHECK(ag::tensor({-0.0, 1.5}).str() == "tensor([-0.0000, 1.5000])");
}

TEST_CASE("float64 tensors end with dtype=torch.float64", "[print]") {
  CHECK(ag::tensor({0.5, 1.25}, DType::Float64).str() ==
        "tensor([0.5000, 1.2500], dtype=torch.float64)");
  CHECK(ag::full({}, 2.0, DType::Float64).str() == "tensor(2., dtype=torch.float64)");
}

TEST_CASE("int64 and bool tensors print their values without a dtype suffix", "[print]") {
  CHECK(ag::tensor({{1, -20, 300}, {4, 5, 6}}, DType::Int64).str() ==
        "tensor([[  1, -20, 300],\n"
        "        [  4,   5,   6]])");
  CHECK(ag::tensor({1, 0, 1}, DType::Bool).str() == "tensor([ True, False,  True])");
  CHECK(ag::tensor({{1, 0}, {0, 1}}, DType::Bool).str() ==
        "tensor([[ True, False],\n"
        "        [False,  True]])");
}

TEST_CASE("a 0-dim tensor prints its single value without brackets", "[print]") {
  CHECK(ag::full({}, 3.5).str() == "tensor(3.5000)");
  CHECK(ag::full({}, 7, DType::Int64).str() == "tensor(7)");
  CHECK(ag::full({}, 1.5).requires_grad_().str() == "tensor(1.5000, requires_grad=True)");
}

TEST_CASE("an empty tensor prints empty brackets and its size when it is not 1-D", "[print]") {
  CHECK(ag::zeros({0}).str() == "tensor([])");
  CHECK(ag::zeros({2, 0}).str() == "tensor([], size=(2, 0))");
  CHECK(ag::zeros({0}, DType::Float64).str() == "tensor([], dtype=torch.float64)");
  CHECK(ag::zeros({0}).requires_grad_().str() == "tensor([], requires_grad=True)");
}

// An empty tensor shows no values to infer an integer dtype from, so PyTorch names every
// non-default dtype; attograd prints "tensor([])" and "tensor([], size=(2, 0, 3))".
TEST_CASE("empty int64 and bool tensors name their dtype", "[print]") {
  CHECK(ag::zeros({0}, DType::Int64).str() == "tensor([], dtype=torch.int64)");
  CHECK(ag::zeros({0}, DType::Bool).str() == "tensor([], dtype=torch.bool)");
  CHECK(ag::zeros({2, 0, 3}, DType::Int64).str() ==
        "tensor([], size=(2, 0, 3), dtype=torch.int64)");
}

TEST_CASE("a long 1-D tensor wraps at 80 columns", "[print]") {
  SECTION("30 float values, nine per line") {
    CHECK((arange_f(30) / 8.0).str() ==
          "tensor([0.0000, 0.1250, 0.2500, 0.3750, 0.5000, 0.6250, 0.7500, 0.8750, 1.0000,\n"
          "        1.1250, 1.2500, 1.3750, 1.5000, 1.6250, 1.7500, 1.8750, 2.0000, 2.1250,\n"
          "        2.2500, 2.3750, 2.5000, 2.6250, 2.7500, 2.8750, 3.0000, 3.1250, 3.2500,\n"
          "        3.3750, 3.5000, 3.6250])");
  }
  SECTION("40 int64 values, eighteen per line") {
    CHECK(ag::arange(40).str() ==
          "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
          "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n"
          "        36, 37, 38, 39])");
  }
  SECTION("bools") {
    std::vector<double> v;
    for (int i = 0; i < 10; ++i) v.insert(v.end(), {1, 0});
    CHECK(ag::from_vector(v, {20}, DType::Bool).str() ==
          "tensor([ True, False,  True, False,  True, False,  True, False,  True, False,\n"
          "         True, False,  True, False,  True, False,  True, False,  True, False])");
  }
  SECTION("rows of a 2-D tensor wrap one column further in") {
    CHECK((arange_f(24).reshape({2, 12}) * 1.5 + 0.25).str() ==
          "tensor([[ 0.2500,  1.7500,  3.2500,  4.7500,  6.2500,  7.7500,  9.2500, 10.7500,\n"
          "         12.2500, 13.7500, 15.2500, 16.7500],\n"
          "        [18.2500, 19.7500, 21.2500, 22.7500, 24.2500, 25.7500, 27.2500, 28.7500,\n"
          "         30.2500, 31.7500, 33.2500, 34.7500]])");
  }
}

TEST_CASE("a view prints its logical elements and not its storage order", "[print]") {
  Tensor m = ag::tensor({{1., 2., 3.}, {4., 5., 6.}});
  CHECK(m.t().str() ==
        "tensor([[1., 4.],\n"
        "        [2., 5.],\n"
        "        [3., 6.]])");
  CHECK(ag::tensor({{0.5, -1.25}}).expand({3, 2}).str() ==
        "tensor([[ 0.5000, -1.2500],\n"
        "        [ 0.5000, -1.2500],\n"
        "        [ 0.5000, -1.2500]])");
}

TEST_CASE("more than 1000 elements are summarised with their three edge items", "[print]") {
  SECTION("1-D") {
    std::string s = ag::arange(2000).str();
    CHECK_THAT(s, StartsWith("tensor([   0,    1,    2,"));
    CHECK_THAT(s, Contains("..."));
    CHECK_THAT(s, EndsWith("1997, 1998, 1999])"));
    CHECK(s.find(" 3,") == std::string::npos);  // only the edges are shown
    CHECK(s.size() < 60);
  }
  SECTION("2-D: whole rows are elided too") {
    std::string s = (arange_f(1200).reshape({40, 30}) / 2.0).str();
    CHECK(std::count(s.begin(), s.end(), '[') == 7);  // outer + 3 + 3 rows
    CHECK_THAT(s, Contains("        ...,\n"));
    CHECK_THAT(s, Contains("5.9950e+02]])"));
  }
  SECTION("exactly 1000 elements are printed in full") {
    std::string s = ag::arange(1000).str();
    CHECK(s.find("...") == std::string::npos);
    // PyTorch 1.13 prints arange(1000) on 72 lines
    CHECK(std::count(s.begin(), s.end(), '\n') == 71);
    CHECK_THAT(s, EndsWith("997, 998, 999])"));
  }
}

// PyTorch joins " ..." as an element of its own, so two spaces precede it ("2,  ...,") and
// it counts towards the elements per line. attograd writes "2, ...," and does not count
// it, so it never wraps a summarised row of six wide entries: it prints
// "tensor([   0,    1,    2, ..., 1997, 1998, 1999])" and, for the float cases, one
// 86-column line per row ("[0.0000e+00, 2.5000e-01, 5.0000e-01, ..., 3.7475e+02]").
TEST_CASE("summarised tensors match PyTorch exactly", "[print]") {
  CHECK(ag::arange(2000).str() == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  CHECK(ag::arange(1001).str() == "tensor([   0,    1,    2,  ...,  998,  999, 1000])");
  CHECK((arange_f(1500) / 4.0).str() ==
        "tensor([0.0000e+00, 2.5000e-01, 5.0000e-01,  ..., 3.7425e+02, 3.7450e+02,\n"
        "        3.7475e+02])");
  CHECK((arange_f(1200).reshape({40, 30}) / 2.0).str() ==
        "tensor([[0.0000e+00, 5.0000e-01, 1.0000e+00,  ..., 1.3500e+01, 1.4000e+01,\n"
        "         1.4500e+01],\n"
        "        [1.5000e+01, 1.5500e+01, 1.6000e+01,  ..., 2.8500e+01, 2.9000e+01,\n"
        "         2.9500e+01],\n"
        "        [3.0000e+01, 3.0500e+01, 3.1000e+01,  ..., 4.3500e+01, 4.4000e+01,\n"
        "         4.4500e+01],\n"
        "        ...,\n"
        "        [5.5500e+02, 5.5550e+02, 5.5600e+02,  ..., 5.6850e+02, 5.6900e+02,\n"
        "         5.6950e+02],\n"
        "        [5.7000e+02, 5.7050e+02, 5.7100e+02,  ..., 5.8350e+02, 5.8400e+02,\n"
        "         5.8450e+02],\n"
        "        [5.8500e+02, 5.8550e+02, 5.8600e+02,  ..., 5.9850e+02, 5.9900e+02,\n"
        "         5.9950e+02]])");
}

TEST_CASE("a leaf that requires grad ends with requires_grad=True", "[print][autograd]") {
  CHECK(ag::tensor({1.0, 2.0}).requires_grad_().str() == "tensor([1., 2.], requires_grad=True)");
  // the dtype comes before requires_grad
  CHECK(ag::tensor({1.5, 2.5}, DType::Float64).requires_grad_().str() ==
        "tensor([1.5000, 2.5000], dtype=torch.float64, requires_grad=True)");
}

TEST_CASE("a non-leaf ends with its grad_fn instead of requires_grad", "[print][autograd]") {
  // PyTorch 1.13: "tensor([2., 4.], grad_fn=<MulBackward0>)"; attograd's node names differ
  // from PyTorch's, so only the suffix's start is compared
  Tensor x = ag::tensor({1.0, 2.0}).requires_grad_();
  std::string s = (x * 2.0).str();
  CHECK_THAT(s, StartsWith("tensor([2., 4.], grad_fn=<"));
  CHECK_THAT(s, EndsWith(">)"));
  CHECK_THAT(s, !Contains("requires_grad"));

  // PyTorch 1.13: "tensor(-0.7500, grad_fn=<SumBackward0>)"
  Tensor w = ag::tensor({0.5, -1.25}).requires_grad_();
  CHECK_THAT(ag::sum(w).str(), StartsWith("tensor(-0.7500, grad_fn=<"));
  // a detached copy prints as a plain tensor
  CHECK(ag::sum(w).detach().str() == "tensor(-0.7500)");
}
