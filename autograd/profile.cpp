#include "autograd/profile.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <utility>

namespace ag::profile {

struct Breakdown::State {
  std::map<std::pair<std::string, std::string>, Row> rows;  // by name and kernel
  Timer* innermost = nullptr;
};

namespace {

thread_local Breakdown::State* t_active = nullptr;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Breakdown::Breakdown() : state_(new State) {
  if (t_active) {
    delete state_;
    throw std::logic_error("profile::Breakdown: one is already timing this thread");
  }
  t_active = state_;
}

Breakdown::~Breakdown() {
  t_active = nullptr;
  delete state_;
}

std::vector<Row> Breakdown::rows() const {
  std::vector<Row> out;
  for (const auto& [key, row] : state_->rows) out.push_back(row);
  std::stable_sort(out.begin(), out.end(),
                   [](const Row& a, const Row& b) { return a.seconds > b.seconds; });
  return out;
}

double Breakdown::seconds() const {
  double sum = 0;
  for (const auto& [key, row] : state_->rows) sum += row.seconds;
  return sum;
}

Timer::Timer(const char* name)
    : state_(t_active && !omp_in_parallel() ? t_active : nullptr),
      parent_(nullptr),
      start_ns_(0),
      name_(name) {
  if (!state_) return;
  parent_ = state_->innermost;
  state_->innermost = this;
  start_ns_ = now_ns();
}

void Timer::describe(std::string name, std::string kernel, double flops) {
  described_ = std::move(name);
  kernel_ = std::move(kernel);
  flops_ = flops;
}

Timer::~Timer() {
  if (!state_) return;
  const int64_t elapsed = now_ns() - start_ns_;
  state_->innermost = parent_;
  if (parent_) parent_->inner_ns_ += elapsed;
  std::string name = described_.empty() ? std::string(name_) : std::move(described_);
  auto key = std::make_pair(std::move(name), kernel_);
  Row& row = state_->rows[key];
  if (row.calls == 0) row.name = key.first, row.kernel = kernel_;
  row.calls += 1;
  row.seconds += static_cast<double>(elapsed - inner_ns_) * 1e-9;
  row.flops += flops_;
}

}  // namespace ag::profile
