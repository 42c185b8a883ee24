// `attention`: the attention weights of a checkpoint's heads over a prompt, printed as
// PyTorch prints the chapter's tensors, and optionally one head as an SVG heat map.
#include <fmt/format.h>

#include "cli/cli.h"
#include "cli/command_support.h"
#include "io/checkpoint.h"
#include "io/tokenizer_section.h"
#include "report/heat_map.h"
#include "report/report.h"
#include "train/train.h"

namespace cli {

namespace {

struct AttentionOptions {
  std::string checkpoint, prompt, svg;
  int64_t layer = -1, head = -1;
  bool json = false, overwrite = false;
  int threads = ag::kDefaultThreads;
};

po::options_description attention_options(AttentionOptions& o) {
  po::options_description desc("attention options");
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("checkpoint", po::value(&o.checkpoint)->required(),
      "the model (also the first bare argument)");
  add("prompt", po::value(&o.prompt)->required(), "the text (1 to context_length tokens)");
  add("layer", po::value(&o.layer), "only this layer (from 0)");
  add("head", po::value(&o.head), "only this head (from 0)");
  add("svg", po::value(&o.svg), "write the chosen head's heat map to this SVG file");
  add("json", po::bool_switch(&o.json),
      "print JSON instead: the token ids and labels, and each chosen head's weights in full");
  add("threads", po::value(&o.threads)->default_value(ag::kDefaultThreads), "threads");
  add("config", po::value<std::string>(), "read options from an INI file");
  add_overwrite_option(desc, o.overwrite);
  return desc;
}

void check_choice(const po::variables_map& vm, const char* option, int64_t value, int64_t count,
                  const char* what) {
  if (vm.count(option) && (value < 0 || value >= count))
    throw UsageError(fmt::format("--{} {}: the model has {} {} (0 to {})", option, value, count,
                                 what, count - 1));
}

void print_tokens(const report::PromptView& pv) {
  std::string line = fmt::format("{} tokens:", pv.tokens.size());
  for (size_t t = 0; t < pv.tokens.size(); ++t)
    line += fmt::format(" {}:{}", t, report::token_label(pv.tokens[t]));
  fmt::print("{}\n", line);
}

bool chosen(const AttentionOptions& o, int64_t layer, int64_t head) {
  return (o.layer < 0 || layer == o.layer) && (o.head < 0 || head == o.head);
}

void print_maps(const report::PromptView& pv, const AttentionOptions& o) {
  const int64_t T = static_cast<int64_t>(pv.tokens.size());
  for (int64_t l = 0; l < pv.layers; ++l)
    for (int64_t h = 0; h < pv.heads; ++h) {
      if (!chosen(o, l, h)) continue;
      const ag::Tensor w = ag::from_vector(pv.weights[l * pv.heads + h], {T, T});
      fmt::print("\nlayer {}, head {} (rows: queries, columns: keys)\n{}\n", l, h, w.str());
    }
}

void print_json(const report::PromptView& pv, const AttentionOptions& o) {
  const size_t T = pv.tokens.size();
  nlohmann::json labels = nlohmann::json::array(), maps = nlohmann::json::array();
  for (const auto& t : pv.tokens) labels.push_back(report::token_label(t));
  for (int64_t l = 0; l < pv.layers; ++l)
    for (int64_t h = 0; h < pv.heads; ++h) {
      if (!chosen(o, l, h)) continue;
      nlohmann::json rows = nlohmann::json::array();
      const std::vector<float>& w = pv.weights[l * pv.heads + h];
      for (size_t i = 0; i < T; ++i)
        rows.push_back(std::vector<float>(w.begin() + i * T, w.begin() + (i + 1) * T));
      maps.push_back({{"layer", l}, {"head", h}, {"weights", rows}});
    }
  fmt::print("{}\n", nlohmann::json({{"ids", pv.ids}, {"tokens", labels}, {"maps", maps}}).dump());
}

void write_svg(const report::PromptView& pv, const AttentionOptions& o) {
  std::vector<std::string> labels;
  for (const auto& t : pv.tokens) labels.push_back(report::token_label(t));
  const report::HeatMap map{fmt::format("l{}h{}", o.layer, o.head),
                            fmt::format("Layer {}, head {}", o.layer, o.head), "", labels,
                            pv.weights[o.layer * pv.heads + o.head]};
  base::write_file_atomically(o.svg, report::render_heat_map(map, /*standalone=*/true) + "\n");
  if (!o.json) fmt::print("\nwrote {}\n", o.svg);
}

// The weights are quadratic in the prompt: every layer's and head's n x n map, held twice
// (nn::attention_maps' and the view's copy), and a layer's scores in flight (scores,
// scaled, masked, softmax). 12000 tokens on a one-layer, one-head model peaked at 3.5 GB,
// so they are checked against the memory left (the model already loaded) and ulimit -v
// before anything is computed.
void check_maps_memory(const nn::GPTConfig& cfg, const data::Tokenizer& tok,
                       const std::string& prompt, int threads) {
  int64_t n = 0;
  try {
    n = std::min(static_cast<int64_t>(tok.encode(prompt).size()), cfg.context_length);
  } catch (const std::exception&) {
    return;  // the view names what is wrong with the prompt
  }
  const double weights = static_cast<double>(cfg.n_heads) * static_cast<double>(n) *
                         static_cast<double>(n) * (2.0 * static_cast<double>(cfg.n_layers) + 4);
  const int64_t bytes = weights * 4 < 9e18 ? static_cast<int64_t>(weights * 4) : INT64_MAX;
  const std::string short_of = train::memory_shortfall(bytes, threads, "shorten --prompt");
  if (!short_of.empty())
    throw UsageError(fmt::format(
        "--prompt of {} tokens needs {} for its attention maps ({} layers x {} heads x {}^2 "
        "weights): {}",
        n, train::format_bytes(bytes), cfg.n_layers, cfg.n_heads, n, short_of));
}

}  // namespace

int attention_command(const Args& args) {
  return guarded("attention", [&] {
    AttentionOptions o;
    auto desc = attention_options(o);
    auto vm = parse_options(args, desc, "checkpoint");
    if (wants_help(vm, "attention", desc, "CHECKPOINT")) return 0;
    if (o.prompt.empty()) throw UsageError("--prompt must not be empty");
    if (!o.svg.empty() && (!vm.count("layer") || !vm.count("head")))
      throw UsageError("--svg draws one heat map: choose it with --layer and --head");
    check_threads(o.threads);
    require_file(o.checkpoint, "checkpoint");
    const auto claim =
        claim_outputs({{"--svg", o.svg, io::OutputKind::page}},
                      {{"--checkpoint", o.checkpoint}, {"--config", config_file(vm)}},
                      {.overwrite = o.overwrite});
    ag::set_num_threads(o.threads);
    const io::Checkpoint ckpt = io::load_checkpoint(o.checkpoint);
    auto model = train::model_from_checkpoint(ckpt);
    check_choice(vm, "layer", o.layer, model->config().n_layers, "layers");
    check_choice(vm, "head", o.head, model->config().n_heads, "heads");
    const auto tokenizer = io::make_tokenizer(ckpt.tokenizer);
    check_maps_memory(model->config(), *tokenizer, o.prompt, o.threads);
    report::ModelViewOptions mo;
    mo.prompt = o.prompt, mo.sample_tokens = 0;
    const report::ModelView view = report::model_view(*model, *tokenizer, mo);
    if (o.json) {
      print_json(*view.prompt_view, o);
    } else {
      print_tokens(*view.prompt_view);
      print_maps(*view.prompt_view, o);
    }
    if (!o.svg.empty()) write_svg(*view.prompt_view, o);
    return 0;
  });
}

}  // namespace cli
