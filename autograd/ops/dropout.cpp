// Inverted dropout: survivors are scaled by 1/(1-p) at training time so evaluation needs
// no rescaling. The op takes one draw from the explicit generator and derives the mask of
// each fixed chunk of elements from that draw and the chunk's index, so chunks can be
// drawn in parallel, in any order, with the same result on any number of threads; a
// fixed seed gives the same mask (gradient checks rely on that).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "autograd/ops/map.h"
#include "autograd/parallel.h"
#include "autograd/profile.h"

namespace ag {

namespace {

constexpr int64_t kMaskChunk = 4096;  // elements drawn from one stream
// an element's draw costs about as much as streaming this many (detail::team_pays)
constexpr double kDrawWork = 4;
// One stream is a serial chain of steps, so the chunks of a group advance side by side, 8
// streams to a vector and kVectors vectors at once to hide a step's latency (as the fused
// attention draws its masks: ops/attention.cpp, tile_mask). A group is the unit of work.
constexpr int kVectors = 2;
constexpr int64_t kGroupChunks = 8 * kVectors;

// keep[i - begin] for the elements [begin, end) of a group (begin a multiple of
// kMaskChunk, at most kGroupChunks chunks): element i is kept unless draw number
// i % kMaskChunk of sub-stream i / kMaskChunk of the op's draw is under the cutoff. Each
// lane runs Generator::step, so the mask is the one each chunk's stream gives alone. A
// step's verdicts go out as one row of bytes, the lanes side by side (rows[i][lane]), and
// the rows are turned into the chunks' runs afterwards: stores of single lanes into 16
// runs at once cost more than the draws.
void draw_keep(uint64_t draw, uint64_t cutoff, int64_t begin, int64_t end, bool* keep) {
  typedef uint64_t u64v __attribute__((vector_size(64)));
  typedef uint8_t u8v __attribute__((vector_size(8)));
  thread_local std::vector<uint8_t> rows(kMaskChunk * kGroupChunks);
  u64v s0[kVectors], s1[kVectors], s2[kVectors], s3[kVectors];
  int64_t length[kGroupChunks];  // of each lane's chunk (0: none)
  for (int lane = 0; lane < kGroupChunks; ++lane) {
    length[lane] = std::clamp<int64_t>(end - begin - lane * kMaskChunk, 0, kMaskChunk);
    const auto st =
        Generator::substream(draw, static_cast<uint64_t>(begin / kMaskChunk + lane)).state();
    const int g = lane / 8, l = lane % 8;
    s0[g][l] = st[0], s1[g][l] = st[1], s2[g][l] = st[2], s3[g][l] = st[3];
  }
  for (int64_t i = 0; i < length[0]; ++i) {
#pragma GCC unroll 2
    for (int g = 0; g < kVectors; ++g) {
      const auto dropped = (Generator::step(s0[g], s1[g], s2[g], s3[g]) >> 11) < cutoff;
      const u8v kept = __builtin_convertvector(dropped == 0, u8v) & 1;
      std::memcpy(&rows[i * kGroupChunks + 8 * g], &kept, sizeof kept);
    }
  }
  for (int lane = 0; lane < kGroupChunks; ++lane) {
    bool* run = keep + lane * kMaskChunk;
    for (int64_t i = 0; i < length[lane]; ++i) run[i] = rows[i * kGroupChunks + lane] != 0;
  }
}

// dst[i] = keep[i] ? src[i] scale : 0 over [begin, end): forward's output and backward's
// gradient. The mask is read as bytes, not bool: GCC 12 has no vector type for a bool
// load, and kept this loop scalar, a branch an element.
template <typename T>
void masked_scale(const T* src, const bool* keep, T scale, T* dst, int64_t begin, int64_t end) {
  const auto* kept = reinterpret_cast<const uint8_t*>(keep);  // 0 or 1
  AG_SIMD
  for (int64_t i = begin; i < end; ++i) {
    const T scaled = src[i] * scale;
    dst[i] = kept[i] != 0 ? scaled : T(0);
  }
}

}  // namespace

// out = a * keep / (1 - p) with keep ~ Bernoulli(1 - p);  da = g * keep / (1 - p)
Tensor dropout(const Tensor& a, double p, bool training, Generator& gen) {
  const profile::Timer timer("dropout");
  if (!(p >= 0.0 && p <= 1.0))
    throw std::invalid_argument(fmt::format("dropout: p must be in [0, 1], got {}", p));
  if (!training || p == 0.0) return a;
  Tensor x = a.detach().contiguous();
  Tensor keep = empty(a.shape(), DType::Bool);  // one byte per element, not a float mask
  Tensor out = empty(a.shape(), a.dtype());
  const uint64_t draw = gen.next_u64();
  const uint64_t cutoff = Generator::uniform_cutoff(p);  // dropped where uniform() < p
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  AG_DISPATCH_FLOAT(a.dtype(), "dropout", [&] {
    const scalar_t* xp = x.const_data<scalar_t>();
    scalar_t* o = out.data<scalar_t>();
    bool* k = keep.data<bool>();
    const scalar_t s = static_cast<scalar_t>(scale);
    detail::parallel_for_items(a.numel(), kMaskChunk * kGroupChunks, kDrawWork,
                               [&](int64_t begin, int64_t end) {
                                 draw_keep(draw, cutoff, begin, end, k + begin);
                                 masked_scale(xp, k, s, o, begin, end);
                               });
  });
  if (needs_recording({a}))
    attach_backward(
        out, "DropoutBackward", {a}, [keep, scale](const Tensor& g) -> std::vector<Tensor> {
          Tensor gc = g.contiguous();
          Tensor dx = empty(gc.shape(), gc.dtype());
          AG_DISPATCH_FLOAT(gc.dtype(), "dropout backward", [&] {
            const scalar_t* gp = gc.const_data<scalar_t>();
            const bool* k = keep.const_data<bool>();
            scalar_t* d = dx.data<scalar_t>();
            const scalar_t s = static_cast<scalar_t>(scale);
            detail::parallel_for(
                gc.numel(), detail::kElementwiseGrain,
                [&](int64_t begin, int64_t end) { masked_scale(gp, k, s, d, begin, end); });
          });
          return {dx};
        });
  return out;
}

}  // namespace ag
