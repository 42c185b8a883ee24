// Tensor creation, dtypes, views that share storage, element access and the generator.
// Values built from small integers and powers of two are exact in float32, so those checks
// use equality; statistical checks state their tolerance next to the assertion.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "autograd/autograd.h"

using ag::DType;
using ag::Shape;
using ag::Tensor;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

using Values = std::vector<double>;

// Sample mean and (population) standard deviation, accumulated in double.
std::pair<double, double> mean_std(const Values& v) {
  double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double sq = 0;
  for (double x : v) sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sq / static_cast<double>(v.size()))};
}

}  // namespace

// ------------------------------------------------------------------ creation
TEST_CASE("zeros and ones and full fill every element with the requested value",
          "[tensor][creation]") {
  SECTION("zeros defaults to float32") {
    Tensor z = ag::zeros({2, 3});
    CHECK(z.shape() == Shape{2, 3});
    CHECK(z.dtype() == DType::Float32);
    CHECK(z.to_vector() == Values(6, 0.0));
  }
  SECTION("ones in every dtype") {
    auto dt = GENERATE(DType::Float32, DType::Float64, DType::Int64, DType::Bool);
    CAPTURE(ag::dtype_name(dt));
    Tensor o = ag::ones({3}, dt);
    CHECK(o.dtype() == dt);
    CHECK(o.to_vector() == Values{1, 1, 1});
  }
  SECTION("full") {
    Tensor f = ag::full({2, 2}, -2.5, DType::Float64);
    CHECK(f.dtype() == DType::Float64);
    CHECK(f.to_vector() == Values{-2.5, -2.5, -2.5, -2.5});
  }
  SECTION("a 0-dim tensor has one element") {
    Tensor s = ag::full({}, 7.0);
    CHECK(s.dim() == 0);
    CHECK(s.numel() == 1);
    CHECK(s.item() == 7.0);
  }
  SECTION("zeros_like and ones_like copy shape and dtype") {
    Tensor base = ag::full({4, 1}, 3.0, DType::Int64);
    Tensor z = ag::zeros_like(base), o = ag::ones_like(base);
    CHECK(z.shape() == Shape{4, 1});
    CHECK(z.dtype() == DType::Int64);
    CHECK(z.to_vector() == Values(4, 0.0));
    CHECK(o.to_vector() == Values(4, 1.0));
  }
}

TEST_CASE("arange counts from start towards end excluding end", "[tensor][creation]") {
  SECTION("arange(end) is int64 from 0") {
    Tensor a = ag::arange(5);
    CHECK(a.dtype() == DType::Int64);
    CHECK(a.to_vector() == Values{0, 1, 2, 3, 4});
  }
  SECTION("a fractional float step") {
    Tensor a = ag::arange(0, 1, 0.25, DType::Float32);
    CHECK(a.dtype() == DType::Float32);
    CHECK(a.to_vector() == Values{0, 0.25, 0.5, 0.75});
  }
  SECTION("a step that does not divide the span rounds the count up") {
    // ceil((2 - 0) / 0.75) = 3 elements: 0, 0.75, 1.5
    CHECK(ag::arange(0, 2, 0.75, DType::Float64).to_vector() == Values{0, 0.75, 1.5});
  }
  SECTION("a negative step counts down") {
    CHECK(ag::arange(5, 0, -1.5, DType::Float64).to_vector() == Values{5, 3.5, 2, 0.5});
    CHECK(ag::arange(3, -3, -2).to_vector() == Values{3, 1, -1});
  }
  SECTION("an empty range") {
    CHECK(ag::arange(3, 3).numel() == 0);
    CHECK(ag::arange(3, 0).numel() == 0);  // positive step away from end
  }
}

TEST_CASE("from_vector lays values out row-major in the given shape", "[tensor][creation]") {
  SECTION("double values with an explicit dtype") {
    Tensor t = ag::from_vector(Values{1, 2, 3, 4, 5, 6}, {2, 3}, DType::Float64);
    CHECK(t.dtype() == DType::Float64);
    CHECK(t.at({0, 2}) == 3.0);
    CHECK(t.at({1, 0}) == 4.0);
    CHECK(t.strides() == Shape{3, 1});
  }
  SECTION("float values give float32") {
    Tensor t = ag::from_vector(std::vector<float>{0.5f, -1.5f}, {2, 1});
    CHECK(t.dtype() == DType::Float32);
    CHECK(t.at({1, 0}) == -1.5);
  }
  SECTION("int64 values give int64, exactly beyond 2^53") {
    const int64_t big = (int64_t{1} << 53) + 1;  // not representable as a double
    Tensor t = ag::from_vector(std::vector<int64_t>{big, -7}, {2});
    CHECK(t.dtype() == DType::Int64);
    CHECK(t.data<int64_t>()[0] == big);
    CHECK(t.at({1}) == -7.0);
  }
  SECTION("converting to bool maps nonzero to true") {
    CHECK(ag::from_vector(Values{0, 2, -0.5}, {3}, DType::Bool).to_vector() == Values{0, 1, 1});
  }
}

TEST_CASE("tensor() builds 1-D and 2-D tensors from braces", "[tensor][creation]") {
  Tensor v = ag::tensor({1.5, -2.0, 3.25});
  CHECK(v.shape() == Shape{3});
  CHECK(v.dtype() == DType::Float32);
  CHECK(v.to_vector() == Values{1.5, -2.0, 3.25});

  Tensor m = ag::tensor({{1, 2, 3}, {4, 5, 6}}, DType::Int64);
  CHECK(m.shape() == Shape{2, 3});
  CHECK(m.dtype() == DType::Int64);
  CHECK(m.at({1, 2}) == 6.0);
  CHECK(m.at({0, 1}) == 2.0);
}

// ------------------------------------------------------------------ random
TEST_CASE("random creation is reproducible from a seed", "[tensor][random]") {
  using Make = Tensor (*)(ag::Generator&);
  auto make =
      GENERATE(Make([](ag::Generator& g) { return ag::rand({64}, g); }),
               Make([](ag::Generator& g) { return ag::randn({64}, g, DType::Float64); }),
               Make([](ag::Generator& g) { return ag::uniform({64}, -3, 5, g); }),
               Make([](ag::Generator& g) { return ag::normal({64}, 10, 0.5, g, DType::Float64); }));
  ag::Generator g1(42), g2(42), g3(43);
  Values a = make(g1).to_vector(), b = make(g2).to_vector(), c = make(g3).to_vector();
  CHECK(a == b);
  CHECK(a != c);
  // every element differs between seeds, not just one
  size_t equal = 0;
  for (size_t i = 0; i < a.size(); ++i) equal += a[i] == c[i];
  CHECK(equal == 0);
  // the generator advances: a second draw from the same generator is new
  CHECK(make(g1).to_vector() != a);
}

TEST_CASE("rand draws lie in the unit interval and are spread uniformly", "[tensor][random]") {
  ag::Generator gen(7);
  Values v = ag::rand({100000}, gen, DType::Float64).to_vector();
  CHECK(*std::min_element(v.begin(), v.end()) >= 0.0);
  CHECK(*std::max_element(v.begin(), v.end()) < 1.0);
  auto [mean, sd] = mean_std(v);
  // U[0,1): mean 1/2, std 1/sqrt(12); standard errors ~0.0009 and ~0.0006 over 1e5 draws
  CHECK_THAT(mean, WithinAbs(0.5, 0.005));
  CHECK_THAT(sd, WithinAbs(1.0 / std::sqrt(12.0), 0.005));
}

TEST_CASE("uniform draws lie between low and high", "[tensor][random]") {
  ag::Generator gen(8);
  Values v = ag::uniform({100000}, -2.0, 6.0, gen, DType::Float64).to_vector();
  CHECK(*std::min_element(v.begin(), v.end()) >= -2.0);
  CHECK(*std::max_element(v.begin(), v.end()) < 6.0);
  // mean 2, standard error 8/sqrt(12)/sqrt(1e5) ~ 0.007
  CHECK_THAT(mean_std(v).first, WithinAbs(2.0, 0.04));
}

TEST_CASE("normal's sample mean and std match the requested ones", "[tensor][random]") {
  ag::Generator gen(9);
  SECTION("normal(mean 2, std 3)") {
    auto [mean, sd] = mean_std(ag::normal({100000}, 2.0, 3.0, gen, DType::Float64).to_vector());
    // standard errors: 3/sqrt(1e5) ~ 0.0095 for the mean, 3/sqrt(2e5) ~ 0.0067 for the std
    CHECK_THAT(mean, WithinAbs(2.0, 0.05));
    CHECK_THAT(sd, WithinAbs(3.0, 0.035));
  }
  SECTION("randn is standard normal") {
    auto [mean, sd] = mean_std(ag::randn({100000}, gen).to_vector());
    CHECK_THAT(mean, WithinAbs(0.0, 0.016));
    CHECK_THAT(sd, WithinAbs(1.0, 0.012));
  }
}

TEST_CASE("Generator state() and set_state() reproduce a stream", "[tensor][random]") {
  ag::Generator gen(123);
  (void)ag::randn({5}, gen);  // move away from the freshly seeded state
  const ag::Generator::State saved = gen.state();
  Values first = ag::randn({10}, gen).to_vector();
  Values second = ag::randn({10}, gen).to_vector();
  REQUIRE(first != second);

  SECTION("restoring the same generator replays the stream") {
    gen.set_state(saved);
    CHECK(ag::randn({10}, gen).to_vector() == first);
    CHECK(ag::randn({10}, gen).to_vector() == second);
  }
  SECTION("a different generator given the state continues identically") {
    ag::Generator other(999);
    other.set_state(saved);
    CHECK(other.state() == saved);
    CHECK(ag::randn({10}, other).to_vector() == first);
  }
  SECTION("manual_seed restarts the seeded stream") {
    ag::Generator fresh(123);
    gen.manual_seed(123);
    CHECK(gen.state() == fresh.state());
    CHECK(gen.next_u64() == fresh.next_u64());
  }
}

TEST_CASE("Generator::step on vector lanes advances each lane as next_u64 does",
          "[tensor][random]") {
  typedef uint64_t u64x4 __attribute__((vector_size(32)));
  ag::Generator scalar[4] = {ag::Generator(1), ag::Generator(2), ag::Generator(3),
                             ag::Generator(4)};
  u64x4 w0, w1, w2, w3;
  for (int l = 0; l < 4; ++l) {
    const auto st = scalar[l].state();
    w0[l] = st[0], w1[l] = st[1], w2[l] = st[2], w3[l] = st[3];
  }
  for (int i = 0; i < 100; ++i) {
    const u64x4 u = ag::Generator::step(w0, w1, w2, w3);
    for (int l = 0; l < 4; ++l) REQUIRE(u[l] == scalar[l].next_u64());
  }
}

TEST_CASE("uniform_cutoff turns uniform() < p into an exact integer test", "[tensor][random]") {
  // the draws whose 53 bits sit right at p 2^53 are where a rounding of the cutoff shows
  const double p = GENERATE(0.0, 0.1, 0.3, 0.5, 1.0 / 3.0, 0.999, 1.0);
  CAPTURE(p);
  const uint64_t cutoff = ag::Generator::uniform_cutoff(p);
  const auto at = static_cast<uint64_t>(std::ldexp(p, 53));
  for (uint64_t n = at > 2 ? at - 2 : 0; n <= at + 2 && n < (uint64_t{1} << 53); ++n) {
    const double u = static_cast<double>(n) * 0x1.0p-53;  // what uniform() makes of n
    REQUIRE((n < cutoff) == (u < p));
  }
}

// ------------------------------------------------------------------ dtypes
TEST_CASE("each dtype has its element size and name", "[tensor][dtype]") {
  CHECK(ag::dtype_size(DType::Float32) == 4);
  CHECK(ag::dtype_size(DType::Float64) == 8);
  CHECK(ag::dtype_size(DType::Int64) == 8);
  CHECK(ag::dtype_size(DType::Bool) == 1);
  CHECK(std::string(ag::dtype_name(DType::Float32)) == "float32");
  CHECK(std::string(ag::dtype_name(DType::Float64)) == "float64");
  CHECK(std::string(ag::dtype_name(DType::Int64)) == "int64");
  CHECK(std::string(ag::dtype_name(DType::Bool)) == "bool");
  CHECK(ag::is_floating(DType::Float32));
  CHECK(ag::is_floating(DType::Float64));
  CHECK_FALSE(ag::is_floating(DType::Int64));
  CHECK_FALSE(ag::is_floating(DType::Bool));
  // consecutive elements sit dtype_size bytes apart
  Tensor t = ag::zeros({2}, DType::Float64);
  CHECK(static_cast<char*>(t.select(0, 1).raw_data()) - static_cast<char*>(t.raw_data()) == 8);
}

TEST_CASE("to() converts between dtypes with C++ cast semantics", "[tensor][dtype]") {
  Tensor f = ag::tensor({2.7, -2.7, 0.0, 0.5});
  SECTION("float to int64 truncates toward zero") {
    Tensor i = f.to(DType::Int64);
    CHECK(i.dtype() == DType::Int64);
    CHECK(i.to_vector() == Values{2, -2, 0, 0});
  }
  SECTION("float to bool is nonzero") {
    CHECK(f.to(DType::Bool).to_vector() == Values{1, 1, 0, 1});
  }
  SECTION("bool and int64 to float") {
    Tensor b = ag::tensor({1, 0, 1}, DType::Bool);
    CHECK(b.to(DType::Float32).to_vector() == Values{1, 0, 1});
    CHECK(ag::tensor({-3, 4}, DType::Int64).to(DType::Float64).to_vector() == Values{-3, 4});
  }
  SECTION("float32 to float64 keeps the float32 value") {
    Tensor src = ag::tensor({0.1});
    Tensor d = src.to(DType::Float64);
    CHECK(d.dtype() == DType::Float64);
    CHECK(d.item() == static_cast<double>(0.1f));
    CHECK_FALSE(d.shares_storage_with(src));
  }
  SECTION("float64 to float32 rounds to nearest") {
    CHECK(ag::tensor({0.1}, DType::Float64).to(DType::Float32).item() == static_cast<double>(0.1f));
  }
  SECTION("to the same dtype returns the tensor itself") {
    CHECK(f.to(DType::Float32).shares_storage_with(f));
  }
  SECTION("a non-contiguous source converts in logical order") {
    Tensor m = ag::tensor({{1, 2}, {3, 4}}).t();
    CHECK(m.to(DType::Int64).to_vector() == Values{1, 3, 2, 4});
  }
}

// ------------------------------------------------------------------ views
TEST_CASE("view shares storage and reinterprets the shape", "[tensor][view]") {
  Tensor base = ag::arange(0, 6, 1, DType::Float32);
  Tensor v = base.view({2, 3});
  CHECK(v.shape() == Shape{2, 3});
  CHECK(v.strides() == Shape{3, 1});
  CHECK(v.shares_storage_with(base));
  CHECK(v.at({1, 0}) == 3.0);
  v.set({1, 0}, 30.0);
  CHECK(base.at({3}) == 30.0);  // writes go to the shared storage

  SECTION("-1 infers the remaining size") {
    CHECK(v.view({-1}).shape() == Shape{6});
    CHECK(v.view({3, -1}).shape() == Shape{3, 2});
    CHECK(v.view({-1, 1, 2}).shape() == Shape{3, 1, 2});
    CHECK(base.view({-1, 6}).shape() == Shape{1, 6});
  }
  SECTION("reshape of a contiguous tensor is a view") {
    Tensor r = v.reshape({3, -1});
    CHECK(r.shape() == Shape{3, 2});
    CHECK(r.shares_storage_with(base));
  }
  SECTION("a view of a narrowed tensor keeps the offset") {
    Tensor tail = base.narrow(0, 2, 4).view({2, 2});
    CHECK(tail.offset() == 2);
    CHECK(tail.to_vector() == Values{2, 30, 4, 5});
  }
}

TEST_CASE("reshape of a transposed tensor copies while view of it throws", "[tensor][view]") {
  Tensor base = ag::arange(0, 6, 1, DType::Float32).view({2, 3});
  Tensor tr = base.t();  // [3, 2] with strides [1, 3]
  REQUIRE_FALSE(tr.is_contiguous());

  Tensor r = tr.reshape({6});
  CHECK_FALSE(r.shares_storage_with(base));
  CHECK(r.is_contiguous());
  CHECK(r.to_vector() == Values{0, 3, 1, 4, 2, 5});

  REQUIRE_THROWS_AS(tr.view({6}), std::invalid_argument);
  REQUIRE_THROWS_WITH(tr.view({6}), Contains("not compatible") && Contains("[1, 3]") &&
                                        Contains("[3, 2]") && Contains("reshape()"));

  SECTION("splitting a dim of a transposed tensor is still a view") {
    // [3, 2] strides [1, 3] -> [3, 2, 1]: only a size-1 dim is added
    Tensor v = tr.view({3, 2, 1});
    CHECK(v.shares_storage_with(base));
    CHECK(v.at({2, 1, 0}) == 5.0);
  }
}

TEST_CASE("transpose and permute and t swap strides without copying", "[tensor][view]") {
  Tensor x = ag::arange(0, 24, 1, DType::Float64).view({2, 3, 4});
  REQUIRE(x.strides() == Shape{12, 4, 1});

  SECTION("permute reorders shape and strides") {
    Tensor p = x.permute({2, 0, 1});
    CHECK(p.shape() == Shape{4, 2, 3});
    CHECK(p.strides() == Shape{1, 12, 4});
    CHECK(p.shares_storage_with(x));
    CHECK_FALSE(p.is_contiguous());
    CHECK(p.at({3, 1, 2}) == x.at({1, 2, 3}));
    CHECK(p.at({3, 1, 2}) == 23.0);
  }
  SECTION("negative dims count from the end") {
    Tensor p = x.permute({-1, -3, -2});
    CHECK(p.shape() == Shape{4, 2, 3});
  }
  SECTION("transpose swaps two dims") {
    Tensor t = x.transpose(0, 2);
    CHECK(t.shape() == Shape{4, 3, 2});
    CHECK(t.strides() == Shape{1, 4, 12});
    CHECK(t.at({1, 2, 1}) == x.at({1, 2, 1}));
    CHECK(t.at({3, 0, 1}) == 15.0);
    CHECK(x.transpose(-1, 0).shape() == Shape{4, 3, 2});
  }
  SECTION("t() transposes a matrix and writes reach the base") {
    Tensor m = x.select(0, 0);  // [3, 4]
    Tensor mt = m.t();
    CHECK(mt.shape() == Shape{4, 3});
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) CHECK(mt.at({j, i}) == m.at({i, j}));
    mt.set({3, 2}, -1.0);
    CHECK(x.at({0, 2, 3}) == -1.0);
  }
}

TEST_CASE("narrow and select are views into their base", "[tensor][view]") {
  Tensor x = ag::arange(0, 12, 1, DType::Float32).view({3, 4});

  SECTION("narrow keeps the dim and moves the offset") {
    Tensor n = x.narrow(1, 1, 2);
    CHECK(n.shape() == Shape{3, 2});
    CHECK(n.strides() == Shape{4, 1});
    CHECK(n.offset() == 1);
    CHECK(n.shares_storage_with(x));
    CHECK(n.to_vector() == Values{1, 2, 5, 6, 9, 10});
    n.set({2, 1}, 100.0);
    CHECK(x.at({2, 2}) == 100.0);
  }
  SECTION("a negative start counts from the end") {
    CHECK(x.narrow(0, -1, 1).to_vector() == Values{8, 9, 10, 11});
  }
  SECTION("a zero-length narrow is empty") {
    CHECK(x.narrow(1, 4, 0).shape() == Shape{3, 0});
  }
  SECTION("select drops the dim") {
    Tensor row = x.select(0, 1);
    CHECK(row.shape() == Shape{4});
    CHECK(row.offset() == 4);
    CHECK(row.to_vector() == Values{4, 5, 6, 7});
    Tensor col = x.select(1, -1);
    CHECK(col.shape() == Shape{3});
    CHECK(col.strides() == Shape{4});
    CHECK(col.to_vector() == Values{3, 7, 11});
    col.set({0}, -3.0);
    CHECK(x.at({0, 3}) == -3.0);
  }
}

TEST_CASE("expand repeats size-1 dims with stride 0", "[tensor][view]") {
  Tensor base = ag::from_vector(Values{1, 2, 3}, {3, 1});
  Tensor e = base.expand({3, 4});
  CHECK(e.shape() == Shape{3, 4});
  CHECK(e.strides() == Shape{1, 0});
  CHECK(e.shares_storage_with(base));
  CHECK_FALSE(e.is_contiguous());
  CHECK(e.to_vector() == Values{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});

  SECTION("a write through one expanded element is seen by the base and every copy") {
    e.set({1, 2}, 9.0);
    CHECK(base.at({1, 0}) == 9.0);
    CHECK(e.at({1, 0}) == 9.0);
    CHECK(e.at({1, 3}) == 9.0);
  }
  SECTION("new leading dims and -1") {
    Tensor e2 = base.expand({2, -1, 5});
    CHECK(e2.shape() == Shape{2, 3, 5});
    CHECK(e2.strides() == Shape{0, 1, 0});
    CHECK(e2.at({1, 2, 4}) == 3.0);
  }
  SECTION("contiguous() materialises the repeats") {
    Tensor c = e.contiguous();
    CHECK_FALSE(c.shares_storage_with(base));
    CHECK(c.strides() == Shape{4, 1});
    CHECK(c.to_vector() == e.to_vector());
  }
}

TEST_CASE("unsqueeze and squeeze add and remove size-1 dims", "[tensor][view]") {
  Tensor x = ag::tensor({{1, 2, 3}, {4, 5, 6}});
  CHECK(x.unsqueeze(0).shape() == Shape{1, 2, 3});
  CHECK(x.unsqueeze(1).shape() == Shape{2, 1, 3});
  CHECK(x.unsqueeze(-1).shape() == Shape{2, 3, 1});
  CHECK(x.unsqueeze(2).shape() == Shape{2, 3, 1});
  CHECK(x.unsqueeze(1).shares_storage_with(x));
  CHECK(x.unsqueeze(1).at({1, 0, 2}) == 6.0);

  Tensor u = x.unsqueeze(1);
  CHECK(u.squeeze(1).shape() == Shape{2, 3});
  CHECK(u.squeeze(-2).shape() == Shape{2, 3});
  // squeezing a dim whose size is not 1 leaves the tensor as it is
  CHECK(u.squeeze(0).shape() == Shape{2, 1, 3});
  CHECK(ag::full({}, 2.0).unsqueeze(0).shape() == Shape{1});
}

TEST_CASE("contiguous() returns the same storage when already contiguous", "[tensor][view]") {
  Tensor x = ag::arange(0, 6, 1, DType::Float32).view({2, 3});
  Tensor c = x.contiguous();
  CHECK(c.shares_storage_with(x));
  CHECK(c.impl() == x.impl());

  Tensor t = x.t();
  Tensor tc = t.contiguous();
  CHECK_FALSE(tc.shares_storage_with(x));
  CHECK(tc.is_contiguous());
  CHECK(tc.strides() == Shape{2, 1});
  CHECK(tc.to_vector() == Values{0, 3, 1, 4, 2, 5});
  tc.set({0, 1}, 50.0);
  CHECK(x.at({1, 0}) == 3.0);  // the copy is independent
}

TEST_CASE("is_contiguous reflects the memory layout", "[tensor][view]") {
  Tensor x = ag::zeros({3, 4});
  CHECK(x.is_contiguous());
  CHECK_FALSE(x.t().is_contiguous());
  CHECK(x.narrow(0, 1, 2).is_contiguous());        // whole rows
  CHECK_FALSE(x.narrow(1, 1, 2).is_contiguous());  // partial rows leave gaps
  CHECK_FALSE(x.select(1, 2).is_contiguous());
  CHECK(x.select(0, 2).is_contiguous());
  // size-1 dims have no effect on the layout, whatever their stride
  CHECK(ag::zeros({3, 1}).t().is_contiguous());
  CHECK_FALSE(ag::zeros({1, 4}).expand({2, 4}).is_contiguous());
  CHECK(ag::full({}, 1.0).is_contiguous());
}

// ------------------------------------------------------------------ element access
TEST_CASE("at and set and item and to_vector read and write single elements", "[tensor][access]") {
  Tensor x = ag::tensor({{1.5, 2.5, 3.5}, {4.5, 5.5, 6.5}});
  CHECK(x.at({0, 0}) == 1.5);
  CHECK(x.at({1, 2}) == 6.5);
  CHECK(x.at(std::vector<int64_t>{1, 1}) == 5.5);

  x.set({0, 1}, -8.25);
  CHECK(x.at({0, 1}) == -8.25);
  CHECK(x.to_vector() == Values{1.5, -8.25, 3.5, 4.5, 5.5, 6.5});

  SECTION("set converts to the element type") {
    Tensor i = ag::zeros({2}, DType::Int64);
    i.set({1}, 3.9);
    CHECK(i.at({1}) == 3.0);
    Tensor b = ag::zeros({2}, DType::Bool);
    b.set({0}, 2.0);
    CHECK(b.to_vector() == Values{1, 0});
  }
  SECTION("item reads a one-element tensor of any rank") {
    CHECK(ag::full({}, 4.25).item() == 4.25);
    CHECK(ag::full({1, 1, 1}, -1.0, DType::Float64).item() == -1.0);
    CHECK(x.select(0, 1).narrow(0, 2, 1).item() == 6.5);
  }
  SECTION("to_vector follows logical order for views") {
    CHECK(x.t().to_vector() == Values{1.5, 4.5, -8.25, 5.5, 3.5, 6.5});
    CHECK(x.select(1, 2).to_vector() == Values{3.5, 6.5});
  }
  SECTION("data<T>() points at element 0 of the view") {
    Tensor row = x.select(0, 1);
    CHECK(row.data<float>()[0] == 4.5f);
    CHECK(row.data<float>()[2] == 6.5f);
  }
}

TEST_CASE("clone makes an independent contiguous copy", "[tensor][access]") {
  Tensor x = ag::tensor({{1, 2}, {3, 4}}, DType::Float64);
  Tensor c = x.clone();
  CHECK_FALSE(c.shares_storage_with(x));
  CHECK(c.dtype() == DType::Float64);
  CHECK(c.to_vector() == x.to_vector());
  c.set({0, 0}, 10.0);
  x.set({1, 1}, 40.0);
  CHECK(x.at({0, 0}) == 1.0);
  CHECK(c.at({1, 1}) == 4.0);

  SECTION("cloning a view copies only the view, contiguously") {
    Tensor ct = x.t().clone();
    CHECK(ct.is_contiguous());
    CHECK(ct.to_vector() == Values{1, 3, 2, 40});
    CHECK(ct.offset() == 0);
  }
}

TEST_CASE("detach shares storage but drops the autograd history", "[tensor][access]") {
  Tensor w = ag::tensor({1, 2}).requires_grad_();
  Tensor y = w * 3.0;
  REQUIRE_FALSE(y.is_leaf());
  Tensor d = y.detach();
  CHECK(d.shares_storage_with(y));
  CHECK(d.is_leaf());
  CHECK_FALSE(d.requires_grad());
  CHECK(d.to_vector() == Values{3, 6});
}
