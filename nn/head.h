#pragma once
// What a GPT puts after its final norm: the language-model head, or a replacement that
// reads the same hidden states (GPT::replace_head). A head declares its parameters, its
// training forward and loss, its inference step (LM heads only) and its footprint.
//
//   model.freeze();                                             // the body stays as it is
//   model.replace_head(std::make_shared<nn::ClassificationHead>(cfg.d_model, 2, gen),
//                      "classifier");
//   auto out = model.forward(ids, labels);                      // labels: int64 [B]
#include <memory>
#include <string>

#include "nn/layers.h"

namespace nn {

class Head : public Module {
 public:
  // h [B, T, C], the final norm's output -> logits. lengths (int64 [B], optional): the
  // real tokens of each row of a right-padded batch (data/examples.h), for heads that pool
  // over a sequence; an LM head's padding is masked by its targets instead.
  virtual ag::Tensor forward(const ag::Tensor& h,
                             const ag::Tensor& lengths = ag::Tensor()) const = 0;
  // The mean loss of forward's logits against targets; throws naming both shapes when
  // they do not fit.
  virtual ag::Tensor loss(const ag::Tensor& logits, const ag::Tensor& targets) const = 0;
  // The same loss straight from h, where the head computes it without holding its logits
  // (the LM head: ag::linear_cross_entropy); undefined where it does not, and the caller
  // runs forward, then loss.
  virtual ag::Tensor loss_from_states(const ag::Tensor& h, const ag::Tensor& targets) const {
    (void)h, (void)targets;
    return ag::Tensor();
  }
  // Inference: logit columns [v0, v1) of rows a [rows, C] into y (row stride ldy). A head
  // that does not predict tokens throws std::logic_error.
  virtual void infer(const InferenceContext& c, const float* a, int64_t rows, int64_t v0,
                     int64_t v1, float* y, int64_t ldy) const;
  // The matrix infer streams (a bfloat16 decoder keeps a copy of it), its element count and
  // its rows (also of a shape-only description); undefined and 0 if none.
  virtual ag::Tensor streamed_weight() const { return ag::Tensor(); }
  virtual int64_t streamed_elements() const { return 0; }
  virtual int64_t streamed_outputs() const { return 0; }
};

// logits = h W^T with W [vocab_size, C]: the head's own weight ("lm_head.weight", drawn as a
// Linear's), or tied to the token embedding's (registering nothing).
class LMHead : public Head {
 public:
  LMHead(int64_t d_model, int64_t vocab_size, ag::Generator& gen);
  // Reads `tied_weight` [vocab_size, d_model] (undefined in a shape-only description).
  LMHead(const ag::Tensor& tied_weight, int64_t d_model, int64_t vocab_size);
  ag::Tensor forward(const ag::Tensor& h, const ag::Tensor& lengths = ag::Tensor()) const override;
  // targets [B, T] of token ids: the mean next-token cross-entropy
  ag::Tensor loss(const ag::Tensor& logits, const ag::Tensor& targets) const override;
  // loss(forward(h), targets) a chunk of rows at a time (ag::linear_cross_entropy)
  ag::Tensor loss_from_states(const ag::Tensor& h, const ag::Tensor& targets) const override;
  void infer(const InferenceContext& c, const float* a, int64_t rows, int64_t v0, int64_t v1,
             float* y, int64_t ldy) const override;
  ag::Tensor streamed_weight() const override { return weight; }
  void bind_inference(InferenceContext& c) const override { c.bind(this, weight, ag::Tensor()); }
  int64_t streamed_elements() const override { return vocab_size_ * d_model_; }
  int64_t streamed_outputs() const override { return vocab_size_; }
  void footprint(Footprint& f) const override;
  bool tied() const { return tied_; }
  ag::Tensor weight;  // [vocab_size, d_model]

 private:
  bool tied_;
  int64_t d_model_ = 0, vocab_size_ = 0;
};

// num_classes logits from each sequence's pooled hidden state: logits [B, num_classes] =
// pooled W^T + b, trained with the cross-entropy of one label per sequence (the chapter's
// spam classifier). Weight and bias drawn as a Linear's; without a bias (with_bias false,
// GPTConfig::classifier_bias) it is transformers' bias-free `score` layer. The pool
// (GPTConfig::pool):
//   last  the state of the last real token, h[b, lengths[b] - 1] (the only position that
//         saw the whole text; padding comes after it)
//   mean  the mean of the states of the first lengths[b] positions
// Without lengths every position is real (last: T - 1; mean: all T). Padding on the right
// never changes a row's logits: causal attention keeps it out of the real positions.
class ClassificationHead : public Head {
 public:
  ClassificationHead(int64_t d_model, int64_t num_classes, ag::Generator& gen,
                     Pooling pool = Pooling::last, bool with_bias = true);
  ag::Tensor forward(const ag::Tensor& h, const ag::Tensor& lengths = ag::Tensor()) const override;
  // [B, C]: the states the logits read (differentiable: a gather of rows, or a masked mean)
  ag::Tensor pooled(const ag::Tensor& h, const ag::Tensor& lengths) const;
  // targets [B] of class ids
  ag::Tensor loss(const ag::Tensor& logits, const ag::Tensor& targets) const override;
  void footprint(Footprint& f) const override;
  ag::Tensor weight, bias;  // [num_classes, d_model], [num_classes] (undefined without one)
  Pooling pool() const { return pool_; }

 private:
  int64_t d_model_, num_classes_;
  Pooling pool_;
};

}  // namespace nn
