// Runs a checkpoint on given token ids and writes what hf_gpt2_reference.py holds against
// PyTorch: the logits, the loss and every parameter's gradient of one forward and backward
// pass (the first step of a fine-tuning run), and a greedy continuation.
//
//   attograd_interop_driver CHECKPOINT OUT.safetensors NEW_TOKENS ID ID ...
//
// The pass reads ids[0 .. n-2] and predicts ids[1 .. n-1] (one sequence); the greedy
// continuation starts from all n ids. OUT holds, as F32: "logits" [n-1, V], "loss" [1],
// "greedy" [NEW_TOKENS] (ids, exact in float32) and "grad/<name>" per parameter. Written by
// interop's safetensors writer, so the Python side reads it with a dozen lines of its own.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "interop/safetensors.h"
#include "io/checkpoint.h"
#include "train/model_loading.h"

namespace {

interop::SafetensorsTensor tensor_of(const std::string& name, const ag::Tensor& t) {
  return {name, t.shape(), [t](float* out) {
            const ag::Tensor c = t.contiguous();
            std::memcpy(out, c.data<float>(), c.numel() * sizeof(float));
          }};
}

int run(int argc, char** argv) {
  if (argc < 6) {
    std::cerr << "usage: attograd_interop_driver CHECKPOINT OUT NEW_TOKENS ID ID ...\n";
    return 2;
  }
  const io::Checkpoint ckpt = io::load_checkpoint(argv[1], io::LoadOptions{.weights_only = true});
  auto model = train::model_from_checkpoint(ckpt);
  model->eval();  // dropout off: the pass is deterministic
  const int64_t new_tokens = std::stoll(argv[3]);
  std::vector<int64_t> ids;
  for (int i = 4; i < argc; ++i) ids.push_back(std::stoll(argv[i]));
  const int64_t n = static_cast<int64_t>(ids.size());
  const ag::Tensor x =
      ag::from_vector(std::vector<int64_t>(ids.begin(), ids.end() - 1), {1, n - 1});
  const ag::Tensor y =
      ag::from_vector(std::vector<int64_t>(ids.begin() + 1, ids.end()), {1, n - 1});
  model->zero_grad();
  const nn::GPT::Output out = model->forward(x, y);
  out.loss.backward();
  std::vector<interop::SafetensorsTensor> tensors = {
      tensor_of("logits", out.logits.reshape({n - 1, out.logits.shape()[2]})),
      tensor_of("loss", out.loss.reshape({1}))};
  for (const auto& [name, p] : model->named_parameters())
    tensors.push_back(tensor_of("grad/" + name, p.grad()));
  ag::Generator gen(0);
  const ag::Tensor more = model->generate(ag::from_vector(ids, {1, n}), new_tokens, 0.0, 0, gen);
  const std::vector<double> all = more.to_vector();
  const ag::Tensor greedy =
      ag::from_vector(std::vector<float>(all.begin() + n, all.end()), {new_tokens});
  tensors.push_back(tensor_of("greedy", greedy));
  interop::write_safetensors(argv[2], tensors, interop::StoredType::f32);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "attograd_interop_driver: " << e.what() << "\n";
    return 1;
  }
}
