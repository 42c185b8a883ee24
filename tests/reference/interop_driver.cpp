// Runs a checkpoint on given token ids and writes what hf_gpt2_reference.py and
// hf_llama_reference.py hold against PyTorch: the logits, the loss and every parameter's gradient
// of one forward and backward pass (the first step of a fine-tuning run), and a greedy
// continuation.
//
//   attograd_interop_driver CHECKPOINT OUT.safetensors NEW_TOKENS [--lora RANK TARGETS] ID ID ...
//   attograd_interop_driver CHECKPOINT OUT.safetensors 0 --decoder q8_0 ID ID ...
//
// The pass reads ids[0 .. n-2] and predicts ids[1 .. n-1] (one sequence); the greedy
// continuation starts from all n ids. OUT holds, as F32: "logits" [n-1, V], "loss" [1],
// "greedy" [NEW_TOKENS] (ids, exact in float32; left out when NEW_TOKENS is 0) and
// "grad/<name>" per parameter. With --lora, the checkpoint's model gets LoRA adapters of
// RANK on the Linears TARGETS names (lora_alpha 16), lora_B drawn at random too (a fresh
// adapter's B is zero, which would leave every lora_A gradient zero), and OUT holds each
// adapter's values as "param/<name>" for the reference to load. Written by interop's
// safetensors writer, so the Python side reads it with a dozen lines of its own.
//
// With --decoder q8_0, OUT holds only "logits" [n-1, V] of the cached decoder of `sample
// --weights q8_0` (Q8_0 blocks by activations rounded to Q8_0, llama.cpp's arithmetic): row 0
// a prefill of ids[0] (float32, as a decoder's prefills are), each later row a step.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/generator.h"
#include "interop/safetensors.h"
#include "io/checkpoint.h"
#include "nn/gpt.h"
#include "nn/inference.h"
#include "nn/module.h"
#include "train/config.h"
#include "train/model_loading.h"

namespace {

interop::SafetensorsTensor tensor_of(const std::string& name, const ag::Tensor& t) {
  return {name, t.shape(), [t](float* out) {
            const ag::Tensor c = t.contiguous();
            std::memcpy(out, c.data<float>(), c.numel() * sizeof(float));
          }};
}

interop::SafetensorsTensor greedy_tokens(nn::GPT& model, const std::vector<int64_t>& ids,
                                         int64_t new_tokens) {
  const int64_t n = static_cast<int64_t>(ids.size());
  ag::Generator gen(0);
  const ag::Tensor more = model.generate(ag::from_vector(ids, {1, n}), new_tokens, 0.0, 0, gen);
  const std::vector<double> all = more.to_vector();
  return tensor_of("greedy",
                   ag::from_vector(std::vector<float>(all.begin() + n, all.end()), {new_tokens}));
}

interop::SafetensorsTensor q8_0_decoder_logits(nn::GPT& model, const std::vector<int64_t>& ids) {
  nn::InferenceScope inference;
  ag::NoGradGuard no_grad;
  nn::round_weights_to_q8_0(model);  // (blocks read back from a Q8_0 file: unchanged)
  const auto n = static_cast<int64_t>(ids.size());
  nn::CachedInference decoder(model, 1, nn::WeightFormat::q8_0, n);
  std::vector<float> logits;
  const auto keep = [&](std::span<const float> row) {
    logits.insert(logits.end(), row.begin(), row.end());
  };
  keep(decoder.prefill(std::span(ids.data(), 1), 1));
  for (int64_t i = 1; i + 1 < n; ++i) keep(decoder.step(std::span(ids.data() + i, 1)));
  return tensor_of("logits", ag::from_vector(logits, {n - 1, model.config().vocab_size}));
}

// --decoder q8_0 ID ID ...: the decoder's logits alone
int run_decoder(const io::Checkpoint& ckpt, int argc, char** argv) {
  if (std::string(argv[5]) != "q8_0") throw std::invalid_argument("--decoder takes q8_0");
  const auto model = train::model_from_checkpoint(ckpt);
  model->eval();
  std::vector<int64_t> ids;
  for (int i = 6; i < argc; ++i) ids.push_back(std::stoll(argv[i]));
  if (ids.size() < 2) throw std::invalid_argument("--decoder needs two ids or more");
  interop::write_safetensors(argv[2], {q8_0_decoder_logits(*model, ids)}, interop::StoredType::f32);
  return 0;
}

// The checkpoint's model with adapters on targets: the weights the checkpoint's, lora_A as
// GPT draws it, lora_B drawn as well.
std::unique_ptr<nn::GPT> with_adapters(const io::Checkpoint& ckpt, int64_t rank,
                                       const std::string& targets) {
  nn::GPTConfig cfg = train::RunConfig::from_json(ckpt.config).model;
  cfg.lora_rank = rank, cfg.lora_targets = targets;
  cfg.validate();
  auto model = std::make_unique<nn::GPT>(cfg, 11);
  ag::Generator gen(12);
  ag::NoGradGuard no_grad;
  for (const auto& named : model->named_parameters()) {
    // a copy of the name, not a structured binding: clang 14 cannot capture one in a lambda
    const std::string& name = named.first;
    ag::Tensor p = named.second;
    const auto it = std::find_if(ckpt.model.begin(), ckpt.model.end(),
                                 [&](const auto& w) { return w.first == name; });
    if (it != ckpt.model.end())
      ag::copy_(p, it->second);
    else if (name.find("lora_B") != std::string::npos)
      ag::copy_(p, ag::randn(p.shape(), gen) * 0.05);  // a small change, as training makes
  }
  return model;
}

int run(int argc, char** argv) {
  if (argc < 6) {
    std::cerr << "usage: attograd_interop_driver CHECKPOINT OUT NEW_TOKENS [--lora RANK "
                 "TARGETS | --decoder q8_0] ID ID ...\n";
    return 2;
  }
  const io::Checkpoint ckpt = io::load_checkpoint(argv[1], io::LoadOptions{.weights_only = true});
  if (std::string(argv[4]) == "--decoder") return run_decoder(ckpt, argc, argv);
  const bool lora = std::string(argv[4]) == "--lora";
  auto model =
      lora ? with_adapters(ckpt, std::stoll(argv[5]), argv[6]) : train::model_from_checkpoint(ckpt);
  model->eval();  // dropout off: the pass is deterministic
  const int64_t new_tokens = std::stoll(argv[3]);
  std::vector<int64_t> ids;
  for (int i = lora ? 7 : 4; i < argc; ++i) ids.push_back(std::stoll(argv[i]));
  const int64_t n = static_cast<int64_t>(ids.size());
  const ag::Tensor x =
      ag::from_vector(std::vector<int64_t>(ids.begin(), ids.end() - 1), {1, n - 1});
  const ag::Tensor y =
      ag::from_vector(std::vector<int64_t>(ids.begin() + 1, ids.end()), {1, n - 1});
  model->zero_grad();
  nn::GPT::Output out = model->forward(x, y);
  out.loss.backward();
  {  // the training forward computes its loss without the logits (ag::linear_cross_entropy)
    ag::NoGradGuard no_grad;
    out.logits = model->forward(x).logits;
  }
  std::vector<interop::SafetensorsTensor> tensors = {
      tensor_of("logits", out.logits.reshape({n - 1, out.logits.shape()[2]})),
      tensor_of("loss", out.loss.reshape({1}))};
  for (const auto& [name, p] : model->named_parameters()) {
    tensors.push_back(tensor_of("grad/" + name, p.grad()));
    if (name.find(".lora_") != std::string::npos) tensors.push_back(tensor_of("param/" + name, p));
  }
  if (new_tokens > 0) tensors.push_back(greedy_tokens(*model, ids, new_tokens));
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
