#pragma once
// FNV-1a over bytes: a short, stable fingerprint of a name or a value (not for security).
// 32 bits where a name's tail must stay short or a hash must fit a double exactly; 64 bits
// where collisions would matter (comparing weights bit for bit).
#include <cstdint>
#include <string_view>

namespace base {

inline uint32_t fnv1a_32(std::string_view bytes) {
  uint32_t h = 2166136261u;
  for (unsigned char c : bytes) h = (h ^ c) * 16777619u;
  return h;
}

inline uint64_t fnv1a_64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace base
