#pragma once
// The GEMM tuner (autograd/ops/gemm_tuning.h) as a new process would see it, for tests.
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "autograd/ops/gemm_tuning.h"

namespace ag_test {

// The tuner as a new process with this environment would see it; restored afterwards.
class TuningEnvironment {
 public:
  explicit TuningEnvironment(const std::string& cache, const char* mode = nullptr) {
    for (const char* name : {"XDG_CACHE_HOME", "ATTOGRAD_TUNE"})
      if (const char* v = std::getenv(name)) saved_[name] = v;
    ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);
    set_mode(mode);
  }
  void set_mode(const char* mode) {  // and start afresh, as a new process would
    if (mode)
      ::setenv("ATTOGRAD_TUNE", mode, 1);
    else
      ::unsetenv("ATTOGRAD_TUNE");
    ag::detail::reset_tuning_for_tests();
  }
  ~TuningEnvironment() {
    for (const char* name : {"XDG_CACHE_HOME", "ATTOGRAD_TUNE"})
      if (saved_.count(name))
        ::setenv(name, saved_[name].c_str(), 1);
      else
        ::unsetenv(name);
    ag::detail::reset_tuning_for_tests();
  }

 private:
  std::map<std::string, std::string> saved_;
};

// --precision bf16's fallback to float32 (ATTOGRAD_BF16_FALLBACK) on or off for a scope
struct Bf16FallbackScope {
  explicit Bf16FallbackScope(bool on) { ag::detail::set_bf16_fallback(on); }
  ~Bf16FallbackScope() { ag::detail::set_bf16_fallback(std::nullopt); }
};

}  // namespace ag_test
