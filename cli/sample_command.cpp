// `sample`: text generated from a checkpoint, streamed as it is made.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "cli/sample_chat.h"
#include "cli/sample_output.h"
#include "data/instructions.h"
#include "io/checkpoint.h"
#include "io/tokenizer_section.h"
#include "nn/generation.h"
#include "nn/inference.h"
#include "train/console.h"
#include "train/memory_plan.h"
#include "train/task.h"
#include "train/train.h"

template <>
struct base::ChoiceNames<nn::WeightFormat> {
  static constexpr const char* key = "--weights";
  static constexpr std::array<std::pair<nn::WeightFormat, const char*>, 6> rows = {
      {{nn::WeightFormat::fp32, "fp32"},
       {nn::WeightFormat::bf16, "bf16"},
       {nn::WeightFormat::q8_0, "q8_0"},
       {nn::WeightFormat::q8_0_f32, "q8_0-f32"},
       {nn::WeightFormat::q4_k, "q4_k"},
       {nn::WeightFormat::q4_k_f32, "q4_k-f32"}}};
};

namespace cli {

namespace {

struct SampleOptions {
  std::string path, prompt;
  nn::WeightFormat weights = nn::WeightFormat::fp32;
  std::string instruction, input;  // instruct: the record whose response is sampled
  bool instruct = false;           // --instruction given
  ChatRequest chat;                // --chat, --system, --chat-format
  bool chats = false;              // --chat given
  int64_t tokens = 200, top_k = 0, num_samples = 1, slide = 0;
  double temperature = 1.0, top_p = 1.0, max_time = 0;
  std::vector<std::string> stops;
  uint64_t seed = 0;
  int threads = ag::kDefaultThreads;
  bool no_cache = false;
};

po::options_description sample_options(SampleOptions& o) {
  po::options_description desc("sample options");
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("checkpoint", po::value(&o.path),
      "checkpoint to sample from (also the first bare argument; default: attograd.h5 when "
      "there is one here)");
  add("prompt", po::value(&o.prompt)->default_value(""), "text to continue (default: newline)");
  add("instruction", po::value(&o.instruction),
      "sample the response to this instruction: the prompt is formatted with the "
      "checkpoint's template (Alpaca's unless trained with --template), only the response is "
      "printed, and it ends at the end-of-text token (docs/finetuning.md)");
  add("input", po::value(&o.input),
      "with --instruction: the record's input (an empty one leaves its section out)");
  add("chat", po::value<std::string>()->implicit_value(""),
      "a chat model's reply to this user message (--chat MESSAGE or --chat=MESSAGE): the "
      "conversation is written in the checkpoint's chat format, only the reply is printed, and "
      "it ends at the end of the turn; --chat alone: a conversation, a user line at a time read "
      "from standard input (docs/finetuning.md)");
  add("system", po::value(&o.chat.system), "with --chat: the system message, first");
  add("chat-format", po::value(&o.chat.format),
      "with --chat: chatml or llama3, instead of the checkpoint's chat format");
  add("tokens", po::value(&o.tokens)->default_value(200), "tokens to generate (per sample)");
  add("temperature", po::value(&o.temperature)->default_value(1.0),
      "softmax temperature (0: greedy)");
  add("top-k", po::value(&o.top_k)->default_value(0), "keep the k likeliest tokens (0: all)");
  add("top-p", po::value(&o.top_p)->default_value(1.0),
      "then the fewest likeliest tokens whose probability reaches p (1: all)");
  add("num-samples", po::value(&o.num_samples)->default_value(1),
      "independent continuations, drawn side by side");
  add("stop", po::value(&o.stops)->composing(),
      "end a sample where its text reaches TEXT (not printed; may be repeated)");
  add("max-time", po::value(&o.max_time)->default_value(0),
      "stop after this many seconds (0: no limit)");
  add("seed", po::value(&o.seed)->default_value(0), "sampling seed");
  add("no-cache", po::bool_switch(&o.no_cache),
      "run the whole window for every token (no key/value cache; for verification)");
  add("slide", po::value(&o.slide)->default_value(0),
      "past the context, the window moves this many tokens at a time (0: half the context; "
      "1: every token sees the last context_length tokens)");
  add("weights", value_with_default(&o.weights, o.weights),
      "fp32, or bf16: the weight matrices rounded to bfloat16, half the bytes a token reads, or "
      "q8_0: rounded to ggml's Q8_0 blocks and read as them, 1.06 bytes a weight, multiplied "
      "as llama.cpp does by activations rounded to Q8_0, or q8_0-f32: the same blocks by "
      "float32 activations (the rounded model's logits to float32 rounding), or q4_k: to Q4_K "
      "blocks, 0.56 bytes a weight (Q8_0 where rows are not a multiple of 256), by activations "
      "rounded to 8 bits as llama.cpp does, or q4_k-f32: the same blocks by float32 "
      "activations (see docs/sampling.md, docs/quantization.md)");
  add("threads", po::value(&o.threads)->default_value(ag::kDefaultThreads), "threads");
  add("config", po::value<std::string>(), "read options from an INI file");
  return desc;
}

void check_sample_options(const SampleOptions& o) {
  if (o.tokens < 0) throw UsageError(fmt::format("--tokens must be >= 0, got {}", o.tokens));
  if (!(o.temperature >= 0 && std::isfinite(o.temperature)))
    throw UsageError(fmt::format("--temperature must be >= 0 and finite, got {}", o.temperature));
  if (o.top_k < 0) throw UsageError(fmt::format("--top-k must be >= 0, got {}", o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1))
    throw UsageError(fmt::format("--top-p must be in (0, 1], got {}", o.top_p));
  if (o.num_samples < 1)
    throw UsageError(fmt::format("--num-samples must be >= 1, got {}", o.num_samples));
  if (!(o.max_time >= 0 && std::isfinite(o.max_time)))
    throw UsageError(fmt::format("--max-time must be >= 0 and finite, got {}", o.max_time));
  for (const std::string& stop : o.stops)
    if (stop.empty()) throw UsageError("--stop must not be empty");
  if (o.slide < 0) throw UsageError(fmt::format("--slide must be >= 0, got {}", o.slide));
  // the full-window forward multiplies float32 activations: it would check another model
  if (o.no_cache && nn::rounds_activations(o.weights))
    throw UsageError(fmt::format(
        "--no-cache runs float32 activations, and --weights {0} rounds them to 8 bits: give "
        "--weights {0}-f32 to compare the cache with the full window",
        o.weights));
  check_threads(o.threads);
}

// What needs the model's config: the slide.
void check_against_model(const SampleOptions& o, const nn::GPTConfig& cfg) {
  if (o.slide > cfg.context_length)
    throw UsageError(fmt::format("--slide must be at most the context length {}, got {}",
                                 cfg.context_length, o.slide));
}

// The text SampleWriter holds: every sample after the first is kept whole until those
// before it end (a sample's own strings besides), at most the bytes of the longest token
// for each of its tokens.
double held_text_bytes(const SampleOptions& o, const data::Tokenizer& tok) {
  const std::vector<uint32_t> lengths = data::token_byte_lengths(tok);
  const double longest = lengths.empty() ? 1.0 : *std::max_element(lengths.begin(), lengths.end());
  const double samples = static_cast<double>(o.num_samples);
  return (samples - 1) * static_cast<double>(o.tokens) * longest + samples * 128;
}

// What the generation will allocate (the decoder's cache and scratch over the window it
// uses, or the full-window forward; each sample's history and held text), against the
// memory the machine and our cgroup leave (the loaded model already counted there) and
// ulimit -v, as train's memory plan is; one sample as well as many.
void check_memory(const SampleOptions& o, const nn::GPTConfig& cfg, int64_t prompt_tokens,
                  const nn::GenerationOptions& g, const data::Tokenizer& tok) {
  const int threads = ag::num_threads();
  const double need =
      static_cast<double>(nn::generation_memory_bytes(cfg, prompt_tokens, g, threads)) +
      held_text_bytes(o, tok);
  const int64_t bytes = need < 9e18 ? static_cast<int64_t>(need) : INT64_MAX;
  const int64_t window = nn::longest_window(prompt_tokens, o.tokens, cfg.context_length);
  const std::string what =
      o.num_samples > 1 ? fmt::format("--num-samples {}", o.num_samples) : "one sample";
  const std::string short_of =
      train::memory_shortfall(bytes, threads, "lower --num-samples, --tokens or --threads");
  if (!short_of.empty())
    throw UsageError(fmt::format(
        "{} needs {} for the {} over a window of {} positions ({} threads) and the samples' "
        "text: {}",
        what, train::format_bytes(bytes),
        o.no_cache ? "full-window forward" : "key/value cache and scratch", window, threads,
        short_of));
}

// --instruction and --chat against --prompt, --input and each other.
void check_instruction_options(const SampleOptions& o, const po::variables_map& vm) {
  if (o.instruct && o.chats) throw UsageError("give --instruction or --chat, not both");
  if ((o.instruct || o.chats) && !vm["prompt"].defaulted())
    throw UsageError(fmt::format("{} makes its own prompt: give --prompt or {}",
                                 o.chats ? "--chat" : "--instruction",
                                 o.chats ? "--chat" : "--instruction"));
  if (!o.instruct && vm.count("input")) throw UsageError("--input goes with --instruction");
  for (const char* option : {"system", "chat-format"})
    if (!o.chats && vm.count(option))
      throw UsageError(fmt::format("--{} goes with --chat", option));
  if (o.chats && o.num_samples > 1) throw UsageError("--chat draws one reply: no --num-samples");
}

// "--chat MESSAGE": the word after a bare --chat is its message unless it is an option
// (--chat's value is implicit, which Boost never takes from the next word).
Args joined_chat_message(Args args) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--chat" && args[i + 1].rfind('-', 0) != 0) {
      args[i] = "--chat=" + args[i + 1];
      args.erase(args.begin() + static_cast<ptrdiff_t>(i) + 1);
    }
  return args;
}

// The prompt of --instruction: the record formatted with the checkpoint's template. A
// language model trained without --task instruct (a GPT-2 import, say) gets Alpaca's, and
// *note says so.
std::string instruction_prompt(const SampleOptions& o, const io::Checkpoint& ckpt,
                               std::string* note) {
  const train::RunConfig cfg = train::RunConfig::from_json(ckpt.config);
  const std::string name = base::printable(ckpt.source);
  if (!cfg.task->follows_instructions())
    *note = fmt::format("note: '{}' was not trained with --task instruct; its prompt is Alpaca's\n",
                        name);
  return data::PromptTemplate::parse(cfg.prompt_template, fmt::format("'{}' prompt_template", name))
      .format(o.instruction, o.input);
}

// Its tokens; a character the vocabulary lacks is blamed on the option that holds it.
std::vector<int64_t> encode_instruction(const data::Tokenizer& tok, const std::string& prompt,
                                        const SampleOptions& o) {
  try {
    return tok.encode(prompt);
  } catch (const std::invalid_argument& e) {
    for (const auto& [option, text] :
         {std::pair{"--instruction", &o.instruction}, std::pair{"--input", &o.input}}) {
      try {
        tok.encode(*text);
      } catch (const std::invalid_argument& in_option) {
        throw UsageError(fmt::format("{}: {}", option, in_option.what()));
      }
    }
    throw UsageError(fmt::format("--instruction: the checkpoint's prompt template: {}", e.what()));
  }
}

std::vector<int64_t> encode_prompt(const data::Tokenizer& tok, const std::string& prompt) {
  try {
    return tok.encode(prompt.empty() ? "\n" : prompt);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--prompt: {}", e.what()));
  }
}

nn::GenerationOptions generation_options(const SampleOptions& o) {
  nn::GenerationOptions g;
  g.max_new_tokens = o.tokens;
  g.num_samples = o.num_samples;
  g.sampling.temperature = o.temperature;
  g.sampling.top_k = o.top_k;
  g.sampling.top_p = o.top_p;
  g.seed = o.seed;
  g.use_cache = !o.no_cache;
  g.slide = o.slide;
  g.max_seconds = o.max_time;
  g.weights = o.weights;
  return g;
}

// "1 token", "2 tokens".
std::string count_of(int64_t n, const char* noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

// The speed, on stderr (stdout holds only the text): with the cache, also the rate at which
// its steps read the weight matrices (`weight_bytes` a step), to set against the machine's
// read bandwidth (`bench --decode` measures it: docs/sampling.md).
void report(const nn::GenerationStats& st, const SampleOptions& o, int64_t slide,
            double weight_bytes) {
  const double rate = st.seconds > 0 ? static_cast<double>(st.new_tokens) / st.seconds : 0.0;
  const std::string moved =
      st.rebuilds == 0 ? "the window never moved"
                       : fmt::format("the window moved {}, {} at a time",
                                     count_of(st.rebuilds, "time"), count_of(slide, "token"));
  const std::string read =
      st.steps == 0 || st.step_seconds <= 0
          ? ""
          : fmt::format("; {} reading {} of weights each: {:.1f} GB/s", count_of(st.steps, "step"),
                        train::format_bytes(static_cast<int64_t>(weight_bytes)),
                        weight_bytes * static_cast<double>(st.steps) / st.step_seconds / 1e9);
  fmt::print(stderr,
             "sampled {} in {:.3f} s: {:.0f} tokens/s ({}, {}; prompt window of {} in {:.1f} ms; "
             "{}{}{})\n",
             count_of(st.new_tokens, "token"), st.seconds, rate, count_of(o.num_samples, "sample"),
             o.no_cache ? "no cache: the whole window per token" : "key/value cache",
             count_of(st.prompt_tokens, "token"), st.prefill_seconds * 1e3, moved, read,
             st.timed_out ? "; stopped by --max-time" : "");
}

// The checkpoint's model and tokenizer, and what its prompt needs (the template of
// --instruction, the chat format of --chat); its copy of the weights (and any optimizer
// state) is freed on return.
struct Loaded {
  std::unique_ptr<nn::GPT> model;
  std::unique_ptr<data::Tokenizer> tok;
  std::string instruct_prompt, note;
  ChatModel chat;
};

Loaded load_for_sampling(const SampleOptions& o) {
  Loaded l;
  io::Checkpoint ckpt = io::load_checkpoint(o.path, io::LoadOptions{.weights_only = true});
  l.model = train::model_from_checkpoint(ckpt);
  if (l.model->config().num_classes > 0)  // with --instruction too
    throw UsageError(
        fmt::format("'{}' is a classifier (train --task classify): it gives labels, not tokens to "
                    "sample; 'attograd classify --checkpoint {}' prints its labels' probabilities",
                    base::printable(o.path), base::printable(o.path)));
  l.tok = io::make_tokenizer(ckpt.tokenizer);
  if (o.instruct) l.instruct_prompt = instruction_prompt(o, ckpt, &l.note);
  if (o.chats) l.chat = chat_model_of(ckpt, o.chat.format);
  l.model->eval();
  if (o.weights == nn::WeightFormat::bf16) nn::round_weights_to_bfloat16(*l.model);
  if (nn::q8_0_weights(o.weights)) nn::round_weights_to_q8_0(*l.model);
  if (nn::q4_k_weights(o.weights)) nn::round_weights_to_q4_k(*l.model);
  return l;
}

// The prompt's generation, streamed to standard output.
nn::GenerationStats sample_prompt(const SampleOptions& o, const Loaded& l,
                                  const std::vector<int64_t>& ids,
                                  const nn::GenerationOptions& generation) {
  const data::Tokenizer& tok = *l.tok;
  // only the response of an instruction is printed
  SampleWriter out(STDOUT_FILENO, o.num_samples, o.stops, isatty(STDOUT_FILENO) != 0,
                   o.instruct ? "" : o.prompt);
  // A sample ends at the end-of-text token: with --instruction, wherever the token is one
  // past the tokenizer's vocabulary (a task model's extra row: no text to decode), and at a
  // byte or bpe tokenizer's reserved <|endoftext|> (a document's end: what follows is
  // another), as llama.cpp stops at an export's eos.
  const int64_t end_of_text = data::end_of_text_id(tok);
  const bool stop_at_end =
      o.instruct || end_of_text >= tok.vocab_size() || tok.reserved_end_of_text();
  std::vector<int64_t> one(1);
  const nn::GenerationStats st =
      nn::generate(*l.model, ids, generation, [&](int64_t sample, int64_t id) {
        if (stop_at_end && id == end_of_text) {
          out.end_sample(sample);
          return false;
        }
        one[0] = id;
        return out.add(sample, tok.decode(one));
      });
  out.finish();
  if (out.failed())
    throw std::runtime_error(
        fmt::format("cannot write to standard output ({})", std::strerror(out.failed())));
  return st;
}

}  // namespace

int sample_command(const Args& args) {
  return guarded("sample", [&] {
    SampleOptions o;
    auto desc = sample_options(o);
    auto vm = parse_options(joined_chat_message(args), desc, "checkpoint");
    if (wants_help(vm, "sample", desc, "[CHECKPOINT]")) return 0;
    check_sample_options(o);
    if (o.path.empty()) o.path = default_checkpoint("sample");
    o.instruct = vm.count("instruction") > 0;
    o.chats = vm.count("chat") > 0;
    if (o.chats && !vm["chat"].as<std::string>().empty())
      o.chat.message = vm["chat"].as<std::string>();
    check_instruction_options(o, vm);
    require_file(o.path, "checkpoint");
    ag::set_num_threads(o.threads);
    const Loaded l = load_for_sampling(o);
    check_against_model(o, l.model->config());
    const nn::GenerationOptions generation = generation_options(o);
    nn::GenerationStats st;
    if (o.chats) {  // the longest prompt a conversation keeps: the context
      check_memory(o, l.model->config(), l.model->config().context_length, generation, *l.tok);
      st = run_chat(*l.model, *l.tok, l.chat, o.chat, generation, o.stops);
    } else {
      const std::vector<int64_t> ids = o.instruct ? encode_instruction(*l.tok, l.instruct_prompt, o)
                                                  : encode_prompt(*l.tok, o.prompt);
      check_memory(o, l.model->config(), static_cast<int64_t>(ids.size()), generation, *l.tok);
      train::noticef("{}", l.note);  // once the prompt is known good: errors are one line
      st = sample_prompt(o, l, ids, generation);
    }
    report(st, o, o.slide > 0 ? o.slide : nn::default_slide(l.model->config().context_length),
           nn::streamed_bytes(*l.model, o.weights));
    return 0;
  });
}

}  // namespace cli
