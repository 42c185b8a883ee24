#include "optim/optimizer.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/parallel.h"
#include "autograd/profile.h"

namespace optim {

std::vector<ParamGroup> decay_groups(const nn::StateDict& named, double weight_decay) {
  ParamGroup decayed{{}, weight_decay}, plain{{}, 0.0};
  for (const auto& [name, p] : named) (p.dim() >= 2 ? decayed : plain).params.emplace_back(name, p);
  return {decayed, plain};
}

namespace {

constexpr double kMaxSteps = 9007199254740992.0;  // 2^53: every count up to it is exact

// "" when every value of t is finite, else how many are not and where the first is.
std::string non_finite_problem(const ag::Tensor& t) {
  const ag::Tensor f = t.to(ag::DType::Float32).contiguous();
  const float* v = f.data<float>();
  int64_t nan = 0, inf = 0, first = -1;
  for (int64_t i = 0, n = f.numel(); i < n; ++i) {
    if (std::isfinite(v[i])) continue;
    if (first < 0) first = i;
    std::isnan(v[i]) ? ++nan : ++inf;
  }
  if (first < 0) return "";
  return fmt::format("holds {} NaN and {} infinite values (first at {})", nan, inf,
                     ag::index_str(f.shape(), first));
}

// Adam's and AdamW's second moments ("v/<parameter>") are running means of squared
// gradients: a negative one makes the update's square root NaN.
bool is_second_moment(const std::string& type, const std::string& name) {
  return (type == "adam" || type == "adamw") && name.rfind("v/", 0) == 0;
}

}  // namespace

std::string state_scalar_problem(const std::string& key, double value) {
  if (key == "step" && !(value >= 0 && value <= kMaxSteps && value == std::floor(value)))
    return fmt::format("the step count is {}; it must be a whole number from 0 to 2^53", value);
  if (key == "lr" && !(value >= 0 && std::isfinite(value)))
    return fmt::format("the lr is {}; it must be finite and >= 0", value);
  if (!std::isfinite(value)) return fmt::format("the setting '{}' is {}", key, value);
  return "";
}

std::string state_tensor_problem(const std::string& type, const std::string& name,
                                 const ag::Tensor& t) {
  if (!is_second_moment(type, name)) return "";
  const ag::Tensor f = t.to(ag::DType::Float32).contiguous();
  const float* v = f.data<float>();
  int64_t negative = 0, first = -1;
  for (int64_t i = 0, n = f.numel(); i < n; ++i)
    if (v[i] < 0 && negative++ == 0) first = i;
  if (negative == 0) return "";
  return fmt::format(
      "holds {} negative value{} (first at {}: {}); a second moment is a running mean of "
      "squared gradients, never negative",
      negative, negative == 1 ? "" : "s", ag::index_str(f.shape(), first), v[first]);
}

void check_state_values(const OptimizerState& st) {
  for (const auto& [key, value] : st.scalars)
    if (const std::string why = state_scalar_problem(key, value); !why.empty())
      throw std::invalid_argument(fmt::format("optimizer state: {}", why));
  for (const auto& [name, t] : st.tensors) {
    std::string why = non_finite_problem(t);
    if (why.empty()) why = state_tensor_problem(st.type, name, t);
    if (!why.empty())
      throw std::invalid_argument(fmt::format("optimizer state '{}' {}", name, why));
  }
}

namespace {

// a * b + c as the compiler contracts it where the CPU has FMA (one rounding), written out
// so that it stays so with a scaled gradient as c: g * scale + wd * p could otherwise be
// contracted either way, and only this one gives the bits of clip_grad_norm, then step().
template <typename T>
inline T multiply_add(T a, T b, T c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

}  // namespace

ElementwiseOptimizer::ElementwiseOptimizer(std::vector<ParamGroup> groups, double lr) : lr_(lr) {
  set_lr(lr);
  for (auto& g : groups) {
    if (!(g.weight_decay >= 0))
      throw std::invalid_argument(fmt::format("weight_decay must be >= 0, got {}", g.weight_decay));
    for (auto& [name, p] : g.params) slots_.push_back({name, p, g.weight_decay, {}});
  }
}

void ElementwiseOptimizer::set_lr(double lr) {
  if (!(lr >= 0) || !std::isfinite(lr))
    throw std::invalid_argument(fmt::format("learning rate must be finite and >= 0, got {}", lr));
  lr_ = lr;
}

// The rounding of each chunk follows its update on the same thread while the chunk is
// still in cache.
bool ElementwiseOptimizer::keep_bf16_copies(ag::Bf16WeightCopies* copies) {
  bf16_copies_ = copies;
  return true;
}

void ElementwiseOptimizer::zero_grad() {
  const ag::profile::Timer timer("zero_grad");
  for (auto& s : slots_) s.param.zero_grad();
}

// One pass over every parameter at once: the parameters are cut into chunks of at most
// kElementwiseGrain elements and the chunks shared out among the threads, so a model of
// many small tensors (biases, LayerNorms) keeps both cores busy too. Each element's update
// is independent of the others, so the split cannot change the bits.
void ElementwiseOptimizer::step(double grad_scale) {
  const ag::profile::Timer timer("optimizer step");
  ++steps_;
  ag::NoGradGuard no_grad;
  struct Chunk {
    Slot* slot;
    const ag::Tensor* grad;
    int64_t begin, end;
  };
  std::vector<ag::Tensor> grads;
  std::vector<Slot*> live;
  grads.reserve(slots_.size());
  for (auto& s : slots_) {
    ag::Tensor g = s.param.grad();
    if (!g.defined()) continue;
    if (s.buffers.empty())
      for (size_t b = 0; b < buffer_names().size(); ++b)
        s.buffers.push_back(ag::zeros_like(s.param));
    grads.push_back(g.contiguous());
    live.push_back(&s);
  }
  std::vector<Chunk> chunks;
  double elements = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    const int64_t n = live[i]->param.numel();
    elements += static_cast<double>(n);
    for (int64_t b = 0; b < n; b += ag::detail::kElementwiseGrain)
      chunks.push_back({live[i], &grads[i], b, std::min(n, b + ag::detail::kElementwiseGrain)});
  }
  // chunks differ in size (a bias is one short chunk): handed out one at a time; each
  // element's update is the same on any thread. An update reads and writes several arrays
  // (AdamW: p, g, m and v), so an element counts as four for team_pays.
  const int64_t n = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1 && ag::detail::team_pays(4 * elements))
  for (int64_t c = 0; c < n; ++c) {
    update(*chunks[c].slot, *chunks[c].grad, grad_scale, chunks[c].begin, chunks[c].end);
    if (bf16_copies_) bf16_copies_->refresh(chunks[c].slot->param, chunks[c].begin, chunks[c].end);
  }
}

int64_t ElementwiseOptimizer::state_bytes_per_parameter() const {
  return static_cast<int64_t>(buffer_names().size() * sizeof(float));
}

OptimizerState ElementwiseOptimizer::state() const {
  OptimizerState st;
  st.type = type();
  st.scalars = hyperparameters();
  st.scalars.emplace_back("lr", lr_);
  st.scalars.emplace_back("step", static_cast<double>(steps_));
  const auto names = buffer_names();
  for (size_t b = 0; b < names.size(); ++b)
    for (const auto& s : slots_)
      st.tensors.emplace_back(names[b] + "/" + s.name,
                              s.buffers.empty() ? ag::zeros_like(s.param) : s.buffers[b]);
  return st;
}

void ElementwiseOptimizer::load_state(const OptimizerState& st) {
  if (st.type != type())
    throw std::invalid_argument(
        fmt::format("optimizer state is '{}', this optimizer is '{}'", st.type, type()));
  auto find = [&](const std::string& name) -> const ag::Tensor* {
    for (const auto& [n, t] : st.tensors)
      if (n == name) return &t;
    return nullptr;
  };
  const auto names = buffer_names();
  for (const auto& s : slots_)
    for (const auto& b : names) {
      const ag::Tensor* t = find(b + "/" + s.name);
      if (!t) throw std::invalid_argument(fmt::format("optimizer state lacks '{}/{}'", b, s.name));
      if (t->shape() != s.param.shape())
        throw std::invalid_argument(
            fmt::format("optimizer state '{}/{}' has shape {}, the parameter {}", b, s.name,
                        ag::shape_str(t->shape()), ag::shape_str(s.param.shape())));
    }
  const auto step = std::find_if(st.scalars.begin(), st.scalars.end(),
                                 [](const auto& kv) { return kv.first == "step"; });
  if (step == st.scalars.end()) throw std::invalid_argument("optimizer state lacks its step count");
  check_state_values(st);
  for (auto& s : slots_) {
    s.buffers.clear();
    for (const auto& b : names) {
      ag::Tensor buf = ag::empty(s.param.shape(), s.param.dtype());
      ag::copy_(buf, *find(b + "/" + s.name));
      s.buffers.push_back(buf);
    }
  }
  steps_ = static_cast<int64_t>(step->second);
  for (const auto& [k, v] : st.scalars)
    if (k == "lr") lr_ = v;
}

// ------------------------------------------------------------------ SGD
SGD::SGD(std::vector<ParamGroup> groups, double lr, double momentum, bool nesterov)
    : ElementwiseOptimizer(std::move(groups), lr), momentum_(momentum), nesterov_(nesterov) {
  if (!(momentum >= 0))
    throw std::invalid_argument(fmt::format("momentum must be >= 0, got {}", momentum));
  if (nesterov && momentum == 0)
    throw std::invalid_argument("Nesterov momentum needs momentum > 0");
}

std::vector<std::string> SGD::buffer_names() const {
  return momentum_ > 0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{};
}

std::vector<std::pair<std::string, double>> SGD::hyperparameters() const {
  return {{"momentum", momentum_}, {"nesterov", nesterov_ ? 1.0 : 0.0}};
}

// d = g + wd p;  b = mu b + d (b = d at the first step);  p -= lr (nesterov ? d + mu b : b)
void SGD::update(Slot& s, const ag::Tensor& grad, double grad_scale, int64_t begin, int64_t end) {
  AG_DISPATCH_FLOAT(s.param.dtype(), "SGD", [&] {
    scalar_t* p = s.param.data<scalar_t>();
    const scalar_t* g = grad.data<scalar_t>();
    scalar_t* b = momentum_ > 0 ? s.buffers[0].data<scalar_t>() : nullptr;
    const scalar_t lr = lr_, wd = s.weight_decay, mu = momentum_;
    const scalar_t gs = static_cast<scalar_t>(grad_scale);
    const bool first = steps_ == 1;
    for (int64_t i = begin; i < end; ++i) {
      scalar_t d = multiply_add(wd, p[i], g[i] * gs);
      if (b) {
        b[i] = first ? d : mu * b[i] + d;
        d = nesterov_ ? d + mu * b[i] : b[i];
      }
      p[i] -= lr * d;
    }
  });
}

// ------------------------------------------------------------------ Adam / AdamW
Adam::Adam(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps)
    : Adam(std::move(groups), lr, beta1, beta2, eps, false) {}

Adam::Adam(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps,
           bool decoupled)
    : ElementwiseOptimizer(std::move(groups), lr),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      decoupled_(decoupled) {
  if (!(beta1 >= 0 && beta1 < 1))
    throw std::invalid_argument(fmt::format("beta1 must be in [0, 1), got {}", beta1));
  if (!(beta2 >= 0 && beta2 < 1))
    throw std::invalid_argument(fmt::format("beta2 must be in [0, 1), got {}", beta2));
  if (!(eps > 0)) throw std::invalid_argument(fmt::format("eps must be positive, got {}", eps));
}

std::vector<std::pair<std::string, double>> Adam::hyperparameters() const {
  return {{"beta1", beta1_}, {"beta2", beta2_}, {"eps", eps_}};
}

// AdamW: p -= lr wd p.  Adam: g += wd p.  Then m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
// p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
void Adam::update(Slot& s, const ag::Tensor& grad, double grad_scale, int64_t begin, int64_t end) {
  const double c1 = 1 - std::pow(beta1_, static_cast<double>(steps_));
  const double c2 = 1 - std::pow(beta2_, static_cast<double>(steps_));
  AG_DISPATCH_FLOAT(s.param.dtype(), "Adam", [&] {
    scalar_t* p = s.param.data<scalar_t>();
    const scalar_t* g = grad.data<scalar_t>();
    scalar_t* m = s.buffers[0].data<scalar_t>();
    scalar_t* v = s.buffers[1].data<scalar_t>();
    const scalar_t lr = lr_, wd = s.weight_decay, b1 = beta1_, b2 = beta2_, eps = eps_;
    const scalar_t step_size = static_cast<scalar_t>(lr_ / c1);
    const scalar_t inv_sqrt_c2 = static_cast<scalar_t>(1.0 / std::sqrt(c2));
    const scalar_t decay = decoupled_ ? scalar_t(1) - lr * wd : scalar_t(1);
    const scalar_t l2 = decoupled_ ? scalar_t(0) : wd;
    const scalar_t gs = static_cast<scalar_t>(grad_scale);
    AG_SIMD
    for (int64_t i = begin; i < end; ++i) {
      const scalar_t gi = multiply_add(l2, p[i], g[i] * gs);
      m[i] = b1 * m[i] + (1 - b1) * gi;
      v[i] = b2 * v[i] + (1 - b2) * gi * gi;
      p[i] = p[i] * decay - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_c2 + eps);
    }
  });
}

// ------------------------------------------------------------------ clipping
namespace {

// Every gradient cut into chunks of kElementwiseGrain: squares are summed per chunk, all
// parameters' chunks in one parallel region; each parameter's chunk sums are added in
// order, then the parameters' sums in order: the same bits on any number of threads.
struct GradChunks {
  struct Chunk {
    size_t grad;
    int64_t begin, end;
  };
  std::vector<ag::Tensor> grads;
  std::vector<Chunk> chunks;
  double elements = 0;

  explicit GradChunks(const std::vector<ag::Tensor>& params) {
    for (const auto& p : params) {
      ag::Tensor g = p.grad();
      if (!g.defined()) continue;
      if (!g.is_contiguous()) p.set_grad(g = g.contiguous());  // (set_grad may give a view)
      grads.push_back(g);
      elements += static_cast<double>(g.numel());
      for (int64_t b = 0, n = g.numel(); b < n; b += ag::detail::kElementwiseGrain)
        chunks.push_back({grads.size() - 1, b, std::min(n, b + ag::detail::kElementwiseGrain)});
    }
  }

  // f(chunk index, chunk) over every chunk, shared out among the threads
  template <typename F>
  void for_each(F f) const {
    const double work = chunks.empty() ? 0 : elements / static_cast<double>(chunks.size());
    ag::detail::parallel_for_items(static_cast<int64_t>(chunks.size()), 1, work,
                                   [&](int64_t c0, int64_t c1) {
                                     for (int64_t c = c0; c < c1; ++c) f(c, chunks[c]);
                                   });
  }

  double norm() const {
    std::vector<double> parts(chunks.size());
    for_each([&](int64_t c, const Chunk& k) {
      AG_DISPATCH_FLOAT(grads[k.grad].dtype(), "clip_grad_norm", [&] {
        const scalar_t* x = grads[k.grad].data<scalar_t>();
        double part = 0;
        AG_SIMD_SUM(part)
        for (int64_t i = k.begin; i < k.end; ++i) part += static_cast<double>(x[i]) * x[i];
        parts[c] = part;
      });
    });
    double sq = 0, param_sq = 0;
    for (size_t c = 0; c < chunks.size(); ++c) {
      param_sq += parts[c];
      if (c + 1 == chunks.size() || chunks[c + 1].grad != chunks[c].grad)
        sq += param_sq, param_sq = 0;
    }
    return std::sqrt(sq);
  }

  void scale(double factor) const {
    for_each([&](int64_t, const Chunk& k) {
      AG_DISPATCH_FLOAT(grads[k.grad].dtype(), "clip_grad_norm", [&] {
        scalar_t* x = grads[k.grad].data<scalar_t>();
        const scalar_t s = static_cast<scalar_t>(factor);
        AG_SIMD
        for (int64_t i = k.begin; i < k.end; ++i) x[i] *= s;
      });
    });
  }
};

}  // namespace

double grad_norm(const std::vector<ag::Tensor>& params) {
  const ag::profile::Timer timer("gradient norm");
  return GradChunks(params).norm();
}

double clip_factor(double norm, double max_norm) {
  return std::isfinite(norm) && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
}

double clip_grad_norm(const std::vector<ag::Tensor>& params, double max_norm) {
  const GradChunks grads(params);
  const double norm = grads.norm();
  if (const double factor = clip_factor(norm, max_norm); factor != 1.0) grads.scale(factor);
  return norm;
}

}  // namespace optim
