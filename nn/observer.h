#pragma once
// Watching a forward: what a layer computes on the way, handed to an Observer while an
// ObserverScope is alive on this thread. An observed forward is an inference (dropout off,
// whatever mode the model is in; an InferenceScope comes with it), and attention layers
// then compute their weights explicitly, show them, and attend with those same weights
// (attention_maps.h is a forward with such an observer).
//
//   struct Print : nn::Observer {
//     void attention(const nn::Module& layer, const ag::Tensor& w) override { ... }
//   } print;
//   nn::ObserverScope watch(print);
//   model.forward(ids);
#include "autograd/autograd.h"
#include "nn/module.h"

namespace nn {

class Observer {
 public:
  virtual ~Observer() = default;
  // An attention layer's softmax weights [B, H, T, T]: rows queries, columns keys, zero
  // above the diagonal.
  virtual void attention(const Module& layer, const ag::Tensor& weights) = 0;
};

class ObserverScope {
 public:
  explicit ObserverScope(Observer& observer);
  ~ObserverScope();
  ObserverScope(const ObserverScope&) = delete;
  ObserverScope& operator=(const ObserverScope&) = delete;
  static Observer* current();  // null when no forward is watched

 private:
  Observer* previous_;
  InferenceScope inference_;
};

}  // namespace nn
