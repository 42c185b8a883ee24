#include "nn/attention_maps.h"

#include <fmt/format.h>

#include "nn/observer.h"

namespace nn {

namespace {

void check_ids(const GPT& model, const std::vector<int64_t>& ids) {
  const GPTConfig& cfg = model.config();
  const int64_t T = static_cast<int64_t>(ids.size());
  if (T == 0 || T > cfg.context_length)
    throw std::invalid_argument(
        fmt::format("attention maps: a sequence of {} tokens; it must be between 1 and the "
                    "model's context_length {}",
                    T, cfg.context_length));
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= cfg.vocab_size)
      throw std::invalid_argument(
          fmt::format("attention maps: token {} has id {}, outside the vocabulary of {}", i, ids[i],
                      cfg.vocab_size));
}

// Keeps each attention layer's weights of the one sequence, in the order the layers run.
struct MapCollector : Observer {
  std::vector<ag::Tensor> weights;
  void attention(const Module&, const ag::Tensor& w) override {
    weights.push_back(w.select(0, 0).contiguous());  // [H, T, T]
  }
};

}  // namespace

ag::Tensor attention_weights(const MultiHeadAttention& layer, const ag::Tensor& x) {
  return layer.weights(x);
}

AttentionMaps attention_maps(const GPT& model, const std::vector<int64_t>& ids) {
  check_ids(model, ids);
  ag::NoGradGuard no_grad;
  MapCollector collector;
  ag::Tensor logits;
  {
    ObserverScope watch(collector);
    logits = model.forward(ag::from_vector(ids, {1, static_cast<int64_t>(ids.size())})).logits;
  }
  return AttentionMaps{std::move(collector.weights), logits.select(0, 0).contiguous()};
}

}  // namespace nn
