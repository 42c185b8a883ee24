#include "train/model_loading.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "base/utf8.h"
#include "io/checkpoint.h"
#include "nn/frozen_base.h"
#include "train/config.h"
#include "train/freezing.h"

namespace train {

namespace {

template <typename T>
std::string value_text(const T& v) {
  if constexpr (std::is_same_v<T, bool>)
    return v ? "true" : "false";
  else
    return fmt::format("{}", v);
}

// The one refusal of a setting an --init-from checkpoint decides, given otherwise.
[[noreturn]] void refuse_other_value(const io::Checkpoint& ckpt, const std::string& key,
                                     const std::string& mine, const std::string& theirs) {
  std::string option = key;
  std::replace(option.begin(), option.end(), '_', '-');
  throw std::invalid_argument(fmt::format(
      "--{} {} disagrees with '{}', whose model has {} {}: with --init-from the model is the "
      "checkpoint's (leave --{} out)",
      option, mine, base::printable(ckpt.source), key, theirs, option));
}

// The settings of a run, beside its model's keys (nn::config_fields()), that the weights
// of an --init-from checkpoint fix: ids mean what its tokenizer says.
struct InitDecided {
  const char* key;
  data::TokenizerKind RunConfig::*member;
};
constexpr InitDecided kInitDecided[] = {{"tokenizer", &RunConfig::tokenizer}};
// The init's own unless given; given, it converts (no refusal): how the base is held.
constexpr const char* kBasePrecisionKey = "base_precision";

// The base precision of a file holding frozen weights as blocks: own when its run held them
// so (a GGUF import's) or they are in more than one block format (each kept as it is);
// else the format most of its packed weights are in, bfloat16 aside (a format falls back
// to it for rows that are not whole blocks), or bfloat16 when all are; fp32 when it holds
// none, or the run freezes nothing (it trains every weight: nothing stays packed).
ag::quant::BasePrecision own_base_precision(const io::Checkpoint& ckpt, const RunConfig& cfg,
                                            ag::quant::BasePrecision recorded) {
  using ag::quant::BasePrecision;
  if (ckpt.packed.empty() || (cfg.model.lora_rank == 0 && cfg.freeze.empty()))
    return BasePrecision::fp32;
  std::map<std::string, int64_t> weights;  // by format
  for (const auto& [name, t] : ckpt.model)
    if (const auto it = ckpt.packed.find(name); it != ckpt.packed.end())
      weights[it->second] += t.numel();
  const std::string bf16 = base::choice_name(BasePrecision::bf16);
  if (recorded == BasePrecision::own || weights.size() - weights.count(bf16) > 1)
    return BasePrecision::own;
  std::string most = bf16;
  for (const auto& [format, n] : weights)
    if (format != bf16 && (most == bf16 || n > weights[most])) most = format;
  return base::find_choice<BasePrecision>(most).value_or(BasePrecision::fp32);
}

}  // namespace

std::vector<std::string> keys_an_init_decides() {
  std::vector<std::string> keys;
  for (const auto& f : nn::config_fields()) keys.emplace_back(f.key);
  for (const InitDecided& d : kInitDecided) keys.emplace_back(d.key);
  keys.emplace_back(kBasePrecisionKey);
  return keys;
}

void take_model_of(const io::Checkpoint& ckpt, RunConfig& cfg) {
  const RunConfig was = RunConfig::from_json(ckpt.config);
  const nn::GPTConfig& from = was.model;
  const auto& given = cfg.model_keys_given;
  auto set_here = [&](const char* key) {
    return std::find(given.begin(), given.end(), key) != given.end();
  };
  for (const auto& f : nn::config_fields()) {
    std::visit(
        [&](auto member) {
          auto& mine = cfg.model.*member;
          const auto& theirs = from.*member;
          if (f.head_setting) {  // the head is the task's: a classifier may start from an LM
            if (!set_here(f.key) && std::string_view(f.key) != "num_classes") mine = theirs;
            return;
          }
          if (!set_here(f.key)) mine = theirs;
          const std::string_view key = f.key;
          if (mine == theirs || key == "dropout" || f.adapter_setting) return;
          // RoPE holds no parameter per position: a run may train on shorter windows (or
          // longer ones: RoPE's angles extend) than the checkpoint's context
          if (key == "context_length" && from.position == nn::PositionKind::rope) return;
          refuse_other_value(ckpt, f.key, value_text(mine), value_text(theirs));
        },
        f.member);
  }
  for (const InitDecided& d : kInitDecided) {
    const auto theirs = was.*d.member;  // the kind its run recorded (import: the file's)
    if (!set_here(d.key)) cfg.*d.member = theirs;
    if (cfg.*d.member != theirs)
      refuse_other_value(ckpt, d.key, value_text(cfg.*d.member), value_text(theirs));
  }
  // a file of blocks: the run holds them as they are unless --base-precision converts them
  if (!set_here(kBasePrecisionKey))
    cfg.base_precision = own_base_precision(ckpt, cfg, was.base_precision);
}

void refuse_trained_blocks(const io::Checkpoint& ckpt) {
  if (ckpt.packed.empty()) return;
  std::vector<std::string> names;
  for (const auto& [name, t] : ckpt.model) names.push_back(name);
  std::vector<bool> frozen;
  try {
    frozen = frozen_parameters(RunConfig::from_json(ckpt.config), names);
  } catch (const std::invalid_argument& e) {
    throw io::CheckpointError(fmt::format("'{}': {}", base::printable(ckpt.source), e.what()));
  }
  for (size_t i = 0; i < names.size(); ++i)
    if (const auto it = ckpt.packed.find(names[i]); it != ckpt.packed.end() && !frozen[i])
      throw io::CheckpointError(fmt::format(
          "'{}': /model/{} is held as {} blocks, but the file's config trains it (only a frozen "
          "weight, under lora_rank or freeze, is held packed)",
          base::printable(ckpt.source), base::printable(names[i]), it->second));
}

void check_weights_fit(const io::Checkpoint& ckpt, const nn::GPTConfig& model_cfg,
                       const std::string& mismatch) {
  refuse_trained_blocks(ckpt);
  auto fail = [&](const std::string& what) {
    throw io::CheckpointError(fmt::format("'{}' {}: {}", ckpt.source, mismatch, what));
  };
  std::unordered_map<std::string, const ag::Tensor*> in_file;
  for (const auto& [name, t] : ckpt.model) in_file.emplace(name, &t);
  for (const auto& [name, shape] : model_cfg.parameter_shapes()) {
    const auto it = in_file.find(name);
    if (it == in_file.end()) fail(fmt::format("'{}' is missing from the file", name));
    if (it->second->shape() != shape)
      fail(fmt::format("'{}' has shape {} in the file but {} in the model", name,
                       ag::shape_str(it->second->shape()), ag::shape_str(shape)));
    in_file.erase(it);
  }
  for (const auto& [name, t] : ckpt.model)
    if (in_file.count(name))
      fail(fmt::format("the file has '{}', which the model does not", base::printable(name)));
}

bool init_head_is_fresh(const io::Checkpoint& init, const nn::GPTConfig& run_model) {
  return RunConfig::from_json(init.config).model.num_classes != run_model.num_classes;
}

bool init_vocab_grows(const io::Checkpoint& init, const nn::GPTConfig& run_model) {
  return RunConfig::from_json(init.config).model.vocab_size < run_model.vocab_size;
}

namespace {

// dst [V', ...] from src [V, ...] (V < V'): the first V rows src's, every later row the mean
// of src's rows (summed in double, in row order: the same bits on every rank and machine),
// as Hugging Face's resize_token_embeddings(mean_resizing=True) starts added tokens.
void copy_rows_then_mean(const ag::Tensor& dst, const ag::Tensor& src) {
  const ag::Tensor from = src.contiguous();
  const int64_t rows = from.size(0), width = rows > 0 ? from.numel() / rows : 0;
  std::vector<double> sum(static_cast<size_t>(width), 0.0);
  const float* s = from.const_data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) sum[c] += s[r * width + c];
  std::vector<float> grown(static_cast<size_t>(dst.numel()));
  std::copy(s, s + rows * width, grown.begin());
  for (int64_t i = rows * width; i < dst.numel(); ++i)
    grown[i] = static_cast<float>(sum[i % width] / static_cast<double>(rows));
  ag::copy_(dst, ag::from_vector(grown, dst.shape()));
}

// Whether a checkpoint's tensor is the parameter's with rows for the init's vocabulary (the
// embedding, an untied head and its bias), which the run's larger vocabulary grows.
bool vocab_rows(const ag::Tensor& param, const ag::Tensor& in_file, int64_t init_vocab) {
  const ag::Shape &want = param.shape(), &have = in_file.shape();
  return !want.empty() && want.size() == have.size() && have[0] == init_vocab &&
         want[0] > init_vocab && std::equal(want.begin() + 1, want.end(), have.begin() + 1);
}

}  // namespace

// init's own model: the run's base (take_model_of), with init's head and adapters.
void check_init_fits(const io::Checkpoint& init, const nn::GPTConfig& run_model) {
  const nn::GPTConfig theirs = RunConfig::from_json(init.config).model;
  if (theirs.same_adapters(run_model) && !init_head_is_fresh(init, run_model) &&
      !init_vocab_grows(init, run_model))
    return check_weights_fit(init, run_model);
  try {
    theirs.validate();
  } catch (const std::invalid_argument& e) {
    throw io::CheckpointError(fmt::format("'{}': {}", init.source, e.what()));
  }
  check_weights_fit(init, theirs);
}

namespace {

// What the run takes from its init (GPTConfig and the three ways a run differs from it).
struct InitChanges {
  nn::GPTConfig theirs;
  bool fresh_head = false, fresh_adapters = false, grows = false;
  std::string head;  // the run's head's parameter prefix
  InitChanges(const io::Checkpoint& init, const nn::GPTConfig& run_model)
      : theirs(RunConfig::from_json(init.config).model),
        fresh_head(init_head_is_fresh(init, run_model)),
        fresh_adapters(!theirs.same_adapters(run_model)),
        grows(init_vocab_grows(init, run_model)),
        head(run_model.num_classes > 0 ? "classifier." : "lm_head.") {}
  // A parameter the init has nothing for: the new head's own, or an adapter (B = 0: the
  // base's output).
  bool fresh(const std::string& name) const {
    return (fresh_head && name.rfind(head, 0) == 0) ||
           (fresh_adapters && is_adapter_parameter(name));
  }
};

bool same_storage(const ag::Tensor& a, const ag::Tensor& b) {
  if (a.packing() || b.packing()) return a.impl()->storage == b.impl()->storage;
  return a.numel() == b.numel() && a.numel() > 0 && a.const_data<float>() == b.const_data<float>();
}

}  // namespace

void load_init_weights(const io::Checkpoint& init, nn::GPT& model) {
  const InitChanges changes(init, model.config());
  std::unordered_map<std::string, const ag::Tensor*> in_file;
  for (const auto& [name, t] : init.model) in_file.emplace(name, &t);
  ag::NoGradGuard no_grad;
  for (auto& [name, p] : model.named_parameters()) {
    if (changes.fresh(name)) continue;
    const ag::Tensor& saved = *in_file.at(name);  // checked to fit
    if (same_storage(p, saved)) continue;         // read straight into it (reread_init_into)
    if (changes.grows && vocab_rows(p, saved, changes.theirs.vocab_size))
      copy_rows_then_mean(p,
                          saved.packing() ? ag::quant::unpacked(saved, ag::DType::Float32) : saved);
    else if (saved.packing())  // blocks taken as they are (pack_frozen_base decides)
      ag::quant::adopt_packed(p, saved);
    else
      ag::copy_(p, saved);
  }
}

bool init_holds_other_adapters(const io::Checkpoint& init, const nn::GPTConfig& run_model) {
  const nn::GPTConfig theirs = RunConfig::from_json(init.config).model;
  return theirs.lora_rank > 0 && !theirs.same_adapters(run_model);
}

io::Checkpoint reread_init_into(const io::Checkpoint& first, nn::GPT& model) {
  const InitChanges changes(first, model.config());
  nn::StateDict into;  // (a growing vocabulary's rows are of another shape: not read into)
  for (auto& [name, p] : model.named_parameters())
    if (!changes.fresh(name)) into.emplace_back(name, p);
  io::Checkpoint again = io::load_checkpoint(
      first.source, io::LoadOptions{.weights_only = true, .into = &into, .keep_packed = true});
  if (again.config != first.config)
    throw io::CheckpointError(
        fmt::format("'{}' changed while it was read: its config is not the one read first",
                    base::printable(first.source)));
  check_init_fits(again, model.config());
  return again;
}

void refuse_gradient_dump(const io::Checkpoint& ckpt) {
  if (io::is_gradient_dump(ckpt))
    throw std::invalid_argument(fmt::format(
        "'{}' is a gradient dump (eval --dump-grads: d loss / d parameter, not weights); give "
        "a checkpoint that train or resume wrote",
        base::printable(ckpt.source)));
}

std::unique_ptr<nn::GPT> model_from_checkpoint(const io::Checkpoint& ckpt) {
  refuse_gradient_dump(ckpt);
  RunConfig cfg;
  try {
    cfg = RunConfig::from_json(ckpt.config);
    cfg.model.validate();
  } catch (const std::invalid_argument& e) {
    throw io::CheckpointError(fmt::format("'{}': {}", ckpt.source, e.what()));
  }
  check_weights_fit(ckpt, cfg.model, "disagrees with its own config");
  // built without initialising (no draws, no pages written), then sharing the checkpoint's
  // tensors: one copy of the weights, where a model drawn at random and the checkpoint's
  // copied into it were two (a 124M model: 1.16 GB to sample, now 0.52)
  std::unique_ptr<nn::GPT> model;
  {
    const nn::UninitializedScope uninitialized;
    model = std::make_unique<nn::GPT>(cfg.model, cfg.seed);
  }
  try {
    if (cfg.model.lora_rank > 0)
      model->load_state_dict(ckpt.model);  // merging writes the weights: a copy of them
    else
      model->adopt_state_dict(ckpt.model);
  } catch (const std::exception& e) {
    throw io::CheckpointError(
        fmt::format("'{}' does not fit the model: {}", ckpt.source, e.what()));
  }
  merge_adapters(*model);
  return model;
}

void merge_adapters(nn::GPT& model) {
  nn::unpack_frozen_base(model);  // a packed base back to float32 (the decoder reads floats)
  std::vector<nn::Linear*> adapted;
  model.for_each_module([&](nn::Module& m) {
    if (auto* linear = dynamic_cast<nn::Linear*>(&m); linear && linear->has_adapter())
      adapted.push_back(linear);
  });
  for (nn::Linear* linear : adapted) linear->merge_adapter();
}

io::Checkpoint merged_checkpoint(const io::Checkpoint& ckpt) {
  const std::unique_ptr<nn::GPT> model = model_from_checkpoint(ckpt);
  io::Checkpoint out;
  out.config = ckpt.config;
  for (const auto& f : nn::config_fields())  // the base's keys, as a checkpoint states them
    if (f.adapter_setting) out.config.erase(f.key);
  out.step = ckpt.step;
  out.model = model->named_parameters();
  out.tokenizer = ckpt.tokenizer;
  out.data_identity = ckpt.data_identity;
  out.micro_batches = ckpt.micro_batches;
  out.source = ckpt.source;
  return out;
}

}  // namespace train
