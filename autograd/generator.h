#pragma once
// A seeded, explicitly passed random generator (xoshiro256**, seeded through splitmix64).
// Its whole state is four words, so a checkpoint can save it and a resumed run continues
// the same stream.
#include <array>
#include <cstdint>

namespace ag {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { manual_seed(seed); }
  void manual_seed(uint64_t seed);

  uint64_t next_u64();
  double uniform();  // [0, 1) with 53 random bits
  double normal();   // standard normal, Box-Muller (no cached spare)

  using State = std::array<uint64_t, 4>;
  State state() const { return s_; }
  void set_state(const State& s) { s_ = s; }

 private:
  State s_{};
};

}  // namespace ag
