#pragma once
// Where a step's micro-batches come from: windows of a text, or a task's examples padded
// side by side. Drawn with the data generator, so one generator state reproduces every
// batch, and another rank's micro-batches are skipped by advancing it as drawing would.
#include "autograd/generator.h"
#include "autograd/tensor.h"

namespace train {

struct Batch {
  ag::Tensor x, y;     // ids [B, T]; the targets as the model's head takes them
  ag::Tensor lengths;  // [B] the real tokens of each right-padded row, or undefined
  int64_t tokens = 0;  // the real tokens of x (padding not counted): what tokens/s counts
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Damaged data (an id outside the vocabulary, a token file cut short) is a
  // data::DataError naming the file and the offset.
  virtual Batch next(ag::Generator& gen) const = 0;
  virtual void skip(ag::Generator& gen) const = 0;  // advances gen as next() would
};

}  // namespace train
