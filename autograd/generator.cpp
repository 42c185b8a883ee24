#include "autograd/generator.h"

#include <cmath>

namespace ag {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

void Generator::manual_seed(uint64_t seed) {
  uint64_t x = seed;
  for (auto& w : s_) w = splitmix64(x);
}

Generator Generator::substream(uint64_t draw, uint64_t index) {
  uint64_t x = index + 1;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return Generator(draw ^ (x ^ (x >> 31)));
}

double Generator::uniform() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

double Generator::normal() {
  // 1 - uniform() lies in (0, 1], so the log is finite.
  double u1 = 1.0 - uniform();
  double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace ag
