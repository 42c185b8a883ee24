#include "autograd/ops/batched_matmul.h"

#include <dnnl.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/threading.h"

namespace ag::detail {

namespace {

struct Key {
  BatchedProduct p;
  bool accumulate;
  bool operator==(const Key& o) const {
    return p.batch == o.p.batch && p.m == o.p.m && p.n == o.p.n && p.k == o.p.k && p.ta == o.p.ta &&
           p.tb == o.p.tb && accumulate == o.accumulate;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 0;
    for (int64_t v : {k.p.batch, k.p.m, k.p.n, k.p.k,
                      int64_t(k.p.ta) | int64_t(k.p.tb) << 1 | int64_t(k.accumulate) << 2})
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

struct Primitive {
  dnnl::matmul matmul;
  dnnl::memory::desc a, b, c, scratchpad;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// [batch, rows, cols] dense, or stored as its transpose ([batch, cols, rows] dense)
dnnl::memory::desc dense(int64_t batch, int64_t rows, int64_t cols, bool trans,
                         dnnl::memory::data_type type) {
  const dnnl::memory::dims strides =
      trans ? dnnl::memory::dims{rows * cols, 1, rows} : dnnl::memory::dims{rows * cols, cols, 1};
  return dnnl::memory::desc({batch, rows, cols}, type, strides);
}

std::shared_ptr<const Primitive> make(const Key& key) {
  using dt = dnnl::memory::data_type;
  const BatchedProduct& p = key.p;
  auto a = dense(p.batch, p.m, p.k, p.ta, dt::bf16), b = dense(p.batch, p.k, p.n, p.tb, dt::bf16),
       c = dense(p.batch, p.m, p.n, false, dt::f32);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (key.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  try {
    OmpThreadsScope one_thread(1);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine());
    if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
    return std::make_shared<const Primitive>(
        Primitive{dnnl::matmul(pd), a, b, c, pd.scratchpad_desc()});
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

// Made once per shape and kept; a process meeting ever new shapes starts afresh past
// kMaxCached (callers hold what they use)
std::shared_ptr<const Primitive> cached(const Key& key) {
  static std::mutex mutex;
  static std::unordered_map<Key, std::shared_ptr<const Primitive>, KeyHash> cache;
  constexpr size_t kMaxCached = 1024;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= kMaxCached) cache.clear();
    it = cache.emplace(key, make(key)).first;
  }
  return it->second;
}

}  // namespace

bool onednn_batched_product(const BatchedProduct& p, const bfloat16* A, const bfloat16* B, float* C,
                            bool accumulate) {
  const std::shared_ptr<const Primitive> prim = cached({p, accumulate});
  if (!prim) return false;
  thread_local dnnl::stream stream(engine());
  thread_local std::vector<uint8_t> scratch;
  const size_t bytes = prim->scratchpad.get_size();
  if (scratch.size() < bytes) scratch.resize(bytes);
  auto& e = engine();
  const OmpThreadsScope one_thread(1);  // as gemm.cpp's run_matmul: never K split at run time
  prim->matmul.execute(stream,
                       {{DNNL_ARG_SRC, dnnl::memory(prim->a, e, const_cast<bfloat16*>(A))},
                        {DNNL_ARG_WEIGHTS, dnnl::memory(prim->b, e, const_cast<bfloat16*>(B))},
                        {DNNL_ARG_DST, dnnl::memory(prim->c, e, C)},
                        {DNNL_ARG_SCRATCHPAD, dnnl::memory(prim->scratchpad, e, scratch.data())}});
  stream.wait();
  return true;
}

void plain_batched_product(const BatchedProduct& p, const double* A, const double* B, double* C,
                           bool accumulate) {
  for (int64_t b = 0; b < p.batch; ++b) {
    const double* a = A + b * p.m * p.k;
    const double* bb = B + b * p.k * p.n;
    double* c = C + b * p.m * p.n;
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = accumulate ? c[i * p.n + j] : 0.0;
        for (int64_t x = 0; x < p.k; ++x)
          sum +=
              (p.ta ? a[x * p.m + i] : a[i * p.k + x]) * (p.tb ? bb[j * p.k + x] : bb[x * p.n + j]);
        c[i * p.n + j] = sum;
      }
  }
}

}  // namespace ag::detail
