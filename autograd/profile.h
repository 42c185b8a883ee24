#pragma once
// Where a step's time goes, by kernel class (`attograd bench --breakdown`): timers around the
// kernels themselves. Each GEMM is a row of its size class and the kernel that ran it, with
// its floating-point operations; the attention's forward and backward likewise; every op's
// forward is a row of its name ("gelu", "layer_norm") and every backward node one of the
// node's ("LayerNormBackward"), holding what their GEMMs and kernels inside did not; the
// roundings to bfloat16, the copies, the optimiser and the reduction wait have rows of their
// own. A timer counts its own time less the timers inside it, so the rows add up to the time
// spent inside any timer, and what a step spent outside all of them (the graph's
// bookkeeping, allocation, the glue between ops) is the measured step less their sum.
//
// Off unless a Breakdown is alive on the thread: a timer is then one thread-local load. Only
// that thread times, and only outside parallel regions: a region's work, on every thread,
// is wall time of the timer around it.
//
//   ag::profile::Breakdown breakdown;            // rows from now on, on this thread
//   { const ag::profile::Timer t("gelu"); ... }  // a row named gelu
//   for (const auto& row : breakdown.rows()) ...
#include <cstdint>
#include <string>
#include <vector>

namespace ag::profile {

struct Row {
  std::string name;    // "gelu", "GEMM bf16 NT 2048x1024x256", "LayerNormBackward"
  std::string kernel;  // the kernel that ran it ("onednn_bf16"), or ""
  int64_t calls = 0;
  double seconds = 0;  // its own, less the timers inside it
  double flops = 0;    // floating-point operations done, where known (GEMMs, the attention)
};

class Breakdown {
 public:
  Breakdown();  // only one at a time on a thread
  ~Breakdown();
  Breakdown(const Breakdown&) = delete;
  Breakdown& operator=(const Breakdown&) = delete;
  std::vector<Row> rows() const;  // most time first
  double seconds() const;         // the rows' sum
  struct State;

 private:
  State* state_;
};

class Timer {
 public:
  explicit Timer(const char* name);  // `name` outlives the Breakdown (a literal)
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  // Whether this timer counts: describe() only then, so the strings are built only then.
  bool on() const { return state_ != nullptr; }
  // Names the row by something known only now (a GEMM's class), with its kernel and flops.
  void describe(std::string name, std::string kernel, double flops);

 private:
  Breakdown::State* state_;
  Timer* parent_;
  int64_t start_ns_;
  int64_t inner_ns_ = 0;
  const char* name_;
  std::string described_, kernel_;
  double flops_ = 0;
};

}  // namespace ag::profile
