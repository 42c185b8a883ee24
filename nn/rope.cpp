#include "nn/rope.h"

#include <cmath>
#include <numbers>

namespace nn {

namespace {

// Llama 3's scaling (transformers' _compute_llama3_parameters): long wavelengths divided
// by the factor, short ones kept, those between blended smoothly.
double llama3_scaled(const GPTConfig& cfg, double frequency) {
  const double old_context = static_cast<double>(cfg.rope_original_context);
  const double low_wavelength = old_context / cfg.rope_low_freq_factor;
  const double high_wavelength = old_context / cfg.rope_high_freq_factor;
  const double wavelength = 2 * std::numbers::pi / frequency;
  if (wavelength < high_wavelength) return frequency;
  if (wavelength > low_wavelength) return frequency / cfg.rope_factor;
  const double smooth = (old_context / wavelength - cfg.rope_low_freq_factor) /
                        (cfg.rope_high_freq_factor - cfg.rope_low_freq_factor);
  return (1 - smooth) * frequency / cfg.rope_factor + smooth * frequency;
}

}  // namespace

std::vector<float> rope_inverse_frequencies(const GPTConfig& cfg) {
  const int64_t D = cfg.head_width();
  std::vector<float> inverse(static_cast<size_t>(D / 2));
  for (int64_t i = 0; i < D / 2; ++i) {
    double f = 1.0 / std::pow(cfg.rope_theta, static_cast<double>(2 * i) / static_cast<double>(D));
    if (cfg.rope_scaling == RopeScaling::llama3) f = llama3_scaled(cfg, f);
    inverse[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return inverse;
}

std::shared_ptr<const RopeTables> rope_tables(const GPTConfig& cfg) {
  if (cfg.position != PositionKind::rope) return nullptr;
  const std::vector<float> inverse = rope_inverse_frequencies(cfg);
  const int64_t T = cfg.context_length, half = static_cast<int64_t>(inverse.size());
  auto tables = std::make_shared<RopeTables>();
  tables->cos = ag::empty({T, half});
  tables->sin = ag::empty({T, half});
  float *c = tables->cos.data<float>(), *s = tables->sin.data<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(t) * inverse[static_cast<size_t>(i)];
      c[t * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      s[t * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  return tables;
}

}  // namespace nn
