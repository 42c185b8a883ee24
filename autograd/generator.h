#pragma once
// A seeded, explicitly passed random generator (xoshiro256**, seeded through splitmix64).
// Its whole state is four words, so a checkpoint can save it and a resumed run continues
// the same stream.
//
//   ag::Generator gen(1337);
//   double u = gen.uniform();                      // [0, 1)
//   ag::Generator dropout_gen(1337 + ag::kDropoutStream);
#include <array>
#include <cmath>
#include <cstdint>

namespace ag {

// A run derives each of its generators from its one seed: weights (and the final sample)
// from seed itself, the others from seed + their stream, so that each stream is saved,
// restored and replayed on its own.
constexpr uint64_t kDropoutStream = 1;  // GPT's dropout masks
constexpr uint64_t kDataStream = 2;     // the trainer's choice of batches
constexpr uint64_t kSplitStream = 3;    // which examples of a task file are held out

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { manual_seed(seed); }
  void manual_seed(uint64_t seed);

  uint64_t next_u64() { return step(s_[0], s_[1], s_[2], s_[3]); }  // inline: one per element
  double uniform();  // [0, 1) with 53 random bits: (next_u64() >> 11) 2^-53
  double normal();   // standard normal, Box-Muller (no cached spare)

  // One step of the generator on its four state words, returning the draw. Word is
  // uint64_t for next_u64, or a GCC vector of uint64_t whose lanes are separate streams
  // that advance side by side (the fused attention draws the dropout masks of 8 rows per
  // vector); every lane computes exactly what next_u64 would.
  template <typename Word>
  static Word step(Word& s0, Word& s1, Word& s2, Word& s3) {
    const Word result = rotl(s1 * 5, 7) * 9;
    const Word t = s1 << 17;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = rotl(s3, 45);
    return result;
  }

  // The test uniform() < p on a raw draw u, without the conversion to double:
  // (u >> 11) < uniform_cutoff(p) exactly when uniform() < p. uniform() is the integer
  // (u >> 11) times 2^-53, and an integer n is below x exactly when it is below ceil(x).
  // Dropout keeps an element where the test fails, in every op that drops.
  static uint64_t uniform_cutoff(double p) {
    return static_cast<uint64_t>(std::ceil(std::ldexp(p, 53)));
  }

  // The generator of sub-stream `index` of one draw: ops that need many random numbers
  // take one draw and cut their work into sub-streams, so that the pieces can be drawn
  // in any order (or thread) with the same result.
  static Generator substream(uint64_t draw, uint64_t index);

  using State = std::array<uint64_t, 4>;
  State state() const { return s_; }
  void set_state(const State& s) { s_ = s; }

 private:
  template <typename Word>
  static Word rotl(Word x, int k) {
    return (x << k) | (x >> (64 - k));
  }
  State s_{};
};

}  // namespace ag
