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

  uint64_t next_u64() {  // inline: kernels draw one per element
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  double uniform();  // [0, 1) with 53 random bits
  double normal();   // standard normal, Box-Muller (no cached spare)

  // The generator of sub-stream `index` of one draw: ops that need many random numbers
  // take one draw and cut their work into sub-streams, so that the pieces can be drawn
  // in any order (or thread) with the same result.
  static Generator substream(uint64_t draw, uint64_t index);

  using State = std::array<uint64_t, 4>;
  State state() const { return s_; }
  void set_state(const State& s) { s_ = s; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  State s_{};
};

}  // namespace ag
