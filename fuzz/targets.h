#pragma once
// What each fuzz target does with one input, shared by the libFuzzer mains in fuzz/ and
// by tests/test_fuzz_regressions.cpp, which replays every input a fuzzer ever crashed on
// (fuzz/regressions/<target>/) in the ordinary test suite. Expected failures (clean
// exceptions naming the problem) are caught; anything else -- a crash, a sanitizer report,
// an unexpected exception type, a broken round trip (std::abort) -- is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "autograd/quant/packed_weight.h"
#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "data/data.h"
#include "interop/gguf.h"
#include "interop/gguf_lora.h"
#include "interop/hf_llama.h"
#include "interop/input_bytes.h"
#include "interop/llmc.h"
#include "interop/model_files.h"
#include "interop/safetensors.h"
#include "interop/tokenizer_json.h"
#include "io/checkpoint.h"
#include "io/tokenizer_section.h"
#include "serve/answer.h"
#include "serve/request.h"
#include "train/train.h"

namespace fuzz {

// Any bytes as a checkpoint file, taken as far as `sample` would take them. The file is read
// as the program reads it (in a child, whose crashes the fuzzer cannot see), then, unless
// libhdf5 crashed or hung there, parsed again in this process, so the fuzzer sees and is
// guided by the reading code itself; both must come to the same result.
inline void checkpoint(const std::string& bytes) {
  io::Checkpoint ckpt;
  std::string error;
  try {
    ckpt = io::load_checkpoint_image(bytes, "fuzz.h5");
  } catch (const io::CheckpointError& e) {
    error = e.what();
  }
  if (error.find("is damaged: the HDF5 library") != std::string::npos) return;
  try {
    const io::Checkpoint again = io::parse_checkpoint_in_process(bytes, "fuzz.h5");
    if (!error.empty() || again.model.size() != ckpt.model.size() || again.config != ckpt.config ||
        again.tokenizer.merges != ckpt.tokenizer.merges ||
        again.tokenizer.split_pattern != ckpt.tokenizer.split_pattern)
      std::abort();
  } catch (const io::CheckpointError& e) {
    if (error != e.what()) std::abort();
  }
  if (!error.empty()) return;
  try {
    auto tokenizer = io::make_tokenizer(ckpt.tokenizer);
    if (tokenizer->vocab_size() > 0) tokenizer->decode({0});
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
  }
  try {
    train::RunConfig cfg = train::RunConfig::from_json(ckpt.config);
    if (cfg.model.vocab_size == 0) return;
    cfg.validate();
    // only small models: the loader must be safe, not allocate whatever a file asks for
    if (cfg.model.num_parameters() < (1 << 20)) train::model_from_checkpoint(ckpt);
  } catch (const std::invalid_argument&) {
  } catch (const io::CheckpointError&) {
  }
}

// Any bytes as text: valid UTF-8 round-trips through a char tokenizer built from it, any
// bytes through the byte tokenizer; invalid UTF-8 is a std::invalid_argument.
inline void tokenizer(const std::string& text) {
  data::ByteTokenizer bytes;
  if (bytes.decode(bytes.encode(text)) != text) std::abort();
  try {
    const size_t n_chars = base::utf8_decode(text).size();
    auto tok = data::CharTokenizer::from_text(text);
    if (tok.decode(tok.encode(text)) != text) std::abort();
    // a vocabulary from a prefix: unknown characters are named, or replaced when asked
    auto prefix = data::CharTokenizer::from_text(text.substr(0, text.find('\n')));
    try {
      prefix.encode(text);
    } catch (const std::invalid_argument&) {
    }
    if (prefix.vocab_size() > 0) {
      prefix.set_replacement(prefix.code_points().front());
      if (prefix.encode(text).size() != n_chars) std::abort();
    }
  } catch (const std::invalid_argument&) {
  }
}

// Any bytes as a prepared folder's meta.json: refused with a DataError naming the file, or
// read; what is read writes back to bytes that read the same and write the same again.
inline void prepared_meta(const std::string& bytes) {
  data::PreparedMeta meta;
  try {
    meta = data::parse_prepared_meta(bytes, "meta.json");
  } catch (const data::DataError& e) {
    if (std::string(e.what()).rfind("meta.json: ", 0) != 0) std::abort();
    return;
  }
  const std::string again = data::prepared_meta_bytes(meta);
  const data::PreparedMeta reread = data::parse_prepared_meta(again, "meta.json");
  if (data::prepared_meta_bytes(reread) != again) std::abort();
  if (data::prepared_identity(reread) != data::prepared_identity(meta)) std::abort();
}

// Any bytes as a tokenizer file (a prepared folder's tokenizer.json): refused with a
// DataError naming the file, or a tokenizer that saves to a file reading the same, and
// round-trips a text (bpe: any text; char: its own characters).
inline void tokenizer_file(const std::string& bytes) {
  std::unique_ptr<data::Tokenizer> tok;
  try {
    tok = data::parse_tokenizer_file(bytes, "tokenizer.json");
  } catch (const data::DataError& e) {
    if (std::string(e.what()).rfind("tokenizer.json: ", 0) != 0) std::abort();
    return;
  }
  const std::string again = data::tokenizer_file_bytes(*tok);
  if (data::tokenizer_file_bytes(*data::parse_tokenizer_file(again, "tokenizer.json")) != again)
    std::abort();
  std::vector<int64_t> ids;
  for (int64_t id = 0; id < std::min<int64_t>(tok->vocab_size(), 300); ++id) ids.push_back(id);
  std::string text = tok->kind() == data::TokenizerKind::bpe
                         ? "Hello w\xc3\xb6rld 123\n  \xf0\x9f\x98\x80"
                         : tok->decode(ids);
  try {
    if (tok->decode(tok->encode(text)) != text) std::abort();
  } catch (const std::runtime_error&) {  // a split pattern PCRE2 gives up on (match limit)
  }
}

// Any bytes as GPT-2's tokenizer files: vocab.json, then after the first NUL byte (none:
// empty) merges.txt. Refused with a DataError naming one of the files, or a tokenizer that
// round-trips a text and whose files, written again, read back as the same vocabulary.
inline void gpt2_files(const std::string& bytes) {
  const size_t nul = std::min(bytes.find('\0'), bytes.size());
  const std::string vocab = bytes.substr(0, nul);
  const std::string merges = nul < bytes.size() ? bytes.substr(nul + 1) : "";
  std::unique_ptr<data::Tokenizer> tok;
  try {
    tok = data::parse_gpt2_tokenizer_files(vocab, merges, "vocab.json", "merges.txt");
  } catch (const data::DataError& e) {
    const std::string what = e.what();
    if (what.rfind("vocab.json", 0) != 0 && what.rfind("merges.txt: ", 0) != 0) std::abort();
    return;
  }
  const data::ByteLevelVocab v = data::byte_level_vocab(*tok);
  const auto again = data::parse_gpt2_tokenizer_files(
      data::gpt2_vocab_json(v), data::gpt2_merges_txt(v), "vocab.json", "merges.txt");
  if (data::byte_level_vocab(*again).tokens != v.tokens) std::abort();
  const std::string text = "Hello w\xc3\xb6rld 123 it's\n  \xf0\x9f\x98\x80 <|endoftext|>";
  if (tok->decode(tok->encode(text)) != text) std::abort();
}

// Any bytes as Hugging Face tokenizers' tokenizer.json (Llama 3's, Qwen2's, SmolLM2's
// layouts among them): refused with an InteropError naming the file, or a tokenizer whose
// tokenizer.json, written again, reads back as the same ids on a text holding added tokens.
inline void hf_tokenizer_json(const std::string& bytes) {
  io::TokenizerSection section;
  try {
    section = interop::read_hf_tokenizer_json(interop::InputBytes::of(bytes, "tokenizer.json"));
  } catch (const interop::InteropError& e) {
    if (std::string(e.what()).rfind("tokenizer.json: ", 0) != 0) std::abort();
    return;
  }
  const auto tok = io::make_tokenizer(section);
  const std::string text =
      "Hi w\xc3\xb6rld 1234 it'S\r\n  \xf0\x9f\x98\x80<|im_end|> e\xcc\x81 <s>";
  const auto again = io::make_tokenizer(interop::read_hf_tokenizer_json(
      interop::InputBytes::of(data::hf_tokenizer_json(*tok), "again.json")));
  try {
    const std::vector<int64_t> ids = tok->encode(text);
    if (again->encode(text) != ids) std::abort();
    tok->decode(ids);
  } catch (const std::runtime_error&) {  // a split pattern PCRE2 gives up on (match limit)
  }
}

// The bytes as a file that lives in memory, readable at path() while this lives; ok() is
// false when it could not be made (the input is then skipped).
class MemoryFile {
 public:
  MemoryFile(const char* name, const std::string& bytes) : fd_(memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ >= 0 && write(fd_, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~MemoryFile() {
    if (fd_ >= 0) close(fd_);
  }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  bool ok() const { return fd_ >= 0; }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

// Any bytes as a `--config` file of `attograd train`.
inline void config(const std::string& bytes) {
  const MemoryFile file("config", bytes);
  if (!file.ok()) return;
  train::RunConfig cfg;
  try {
    auto desc = cli::run_options(cfg);
    cli::parse_options({"--config", file.path()}, desc);
    cfg.validate();
  } catch (const cli::UsageError&) {
  } catch (const std::invalid_argument&) {
  }
}

// Any bytes as a `--multiple-choice` file, read and tokenized as `eval` reads it (with a byte
// and a char tokenizer, a window of 16): items that hold what the reader promises, or a
// DataError naming the file.
inline void choice_items(const std::string& bytes) {
  const MemoryFile file("items", bytes);
  if (!file.ok()) return;
  const data::ByteTokenizer byte_tokens;
  const auto char_tokens = data::CharTokenizer::from_text("abc .\n");
  try {
    data::ChoiceReader reader(file.path());
    while (const auto item = reader.next()) {
      const auto k = static_cast<int64_t>(item->endings.size());
      if (k < 2 || k > static_cast<int64_t>(data::kMaxEndings) || item->label < 0 ||
          item->label >= k || item->context.empty())
        std::abort();
      for (const data::Tokenizer* tok : {static_cast<const data::Tokenizer*>(&byte_tokens),
                                         static_cast<const data::Tokenizer*>(&char_tokens)}) {
        try {
          const auto t = train::tokenize_choice_item(*item, *tok, 16, reader.name());
          for (const auto& e : t.endings)
            if (e.empty() || e.size() > 16 || t.context.size() + e.size() > 17) std::abort();
        } catch (const data::DataError&) {
        }
      }
    }
  } catch (const data::DataError&) {
  }
}

// Any bytes as instruction records (`train --task instruct`), and before the first NUL
// byte (none: Alpaca's) as a prompt template file's text: refused with a DataError naming
// the template or the file, or examples as instruction_example makes them (as many ids as
// targets, within the context, each target the next id or ignored).
inline void instruction_data(const std::string& bytes) {
  const size_t nul = bytes.find('\0');
  const std::string tmpl = nul == std::string::npos ? "" : bytes.substr(0, nul);
  const std::string records = nul == std::string::npos ? bytes : bytes.substr(nul + 1);
  const MemoryFile file("records", records);
  if (!file.ok()) return;
  const std::string path = file.path();
  const data::ByteTokenizer tok;
  data::TaskOptions o;
  o.context_length = 512, o.prompt_template = tmpl, o.end_of_text = 256;
  try {
    for (const data::Example& e : data::read_instruction_examples(path, tok, o).examples) {
      if (e.ids.size() != e.targets.size() || e.ids.size() > 512) std::abort();
      for (size_t i = 0; i < e.ids.size(); ++i)
        if (e.targets[i] != data::kIgnoreTarget &&
            (i + 1 < e.ids.size() && e.targets[i] != e.ids[i + 1]))
          std::abort();
    }
  } catch (const data::DataError& e) {
    const std::string what = e.what();
    if (what.rfind(path + ": ", 0) != 0 && what.rfind("the prompt template: ", 0) != 0)
      std::abort();
  }
}

// Any bytes as a classification file (`train --task classify`): examples whose labels are
// among the labels read and whose ids fit the context, or a DataError naming the file.
inline void classification_data(const std::string& bytes) {
  const MemoryFile file("labelled", bytes);
  if (!file.ok()) return;
  const std::string path = file.path();
  const data::ByteTokenizer tok;
  data::TaskOptions o;
  o.context_length = 64;
  try {
    const data::TaskExamples all = data::read_classification_examples(path, tok, o);
    const auto labels = static_cast<int64_t>(all.labels.size());
    if (all.examples.empty() || labels < 2) std::abort();
    for (const data::Example& e : all.examples)
      if (e.ids.empty() || e.ids.size() > 64 || e.label < 0 || e.label >= labels) std::abort();
    (void)data::classification_corpus_text(path);
  } catch (const data::DataError& e) {
    if (std::string(e.what()).rfind(path, 0) != 0 &&
        std::string(e.what()).rfind("'" + path, 0) != 0)
      std::abort();
  }
}

// The same parameters, in the same order, bit for bit (a format's round trip).
inline bool same_weights(const nn::StateDict& a, const nn::StateDict& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || a[i].second.shape() != b[i].second.shape() ||
        std::memcmp(a[i].second.data<float>(), b[i].second.data<float>(),
                    static_cast<size_t>(a[i].second.numel()) * 4) != 0)
      return false;
  return true;
}

// Any bytes as an llm.c checkpoint: refused with an InteropError naming the file, or a model
// that writes back (in the file's own precision) to a checkpoint reading the same, bit for bit.
inline void llmc(const std::string& bytes) {
  interop::ModelFiles m;
  try {
    m = interop::read_llmc_weights(interop::InputBytes::of(bytes, "fuzz.bin"));
  } catch (const interop::InteropError& e) {
    if (std::string(e.what()).rfind("fuzz.bin: ", 0) != 0) std::abort();
    return;
  }
  int32_t version = 0;
  std::memcpy(&version, bytes.data() + 4, 4);
  std::string again;
  interop::write_llmc(
      m, version == interop::kLlmcVersionF32 ? ag::Precision::fp32 : ag::Precision::bf16,
      [&](const char* d, size_t n) { again.append(d, n); });
  const interop::ModelFiles back =
      interop::read_llmc_weights(interop::InputBytes::of(again, "again.bin"));
  if (!same_weights(back.weights, m.weights)) std::abort();
}

// The same file read keeping its blocks (import --keep-blocks) where the plain read took
// it: read too, each kept tensor's values the plain read's bit for bit (a head tied by one
// read and not the other, blocks and floats of equal values, aside).
inline void gguf_kept(const std::string& bytes, const interop::ModelFiles& plain) {
  const interop::ModelFiles kept =
      interop::read_gguf(interop::InputBytes::of(bytes, "fuzz.gguf"), true);
  if (kept.config.tie_weights != plain.config.tie_weights) return;
  nn::StateDict values;
  for (const auto& [name, t] : kept.weights)
    values.emplace_back(name, t.packing() ? ag::quant::unpacked(t, ag::DType::Float32) : t);
  if (!same_weights(values, plain.weights)) std::abort();
}

// Any bytes as a GGUF file: refused with an InteropError naming the file, or a model (and
// tokenizer) that writes back in F32 to a file reading the same, bit for bit, and reads
// the same keeping its blocks.
inline void gguf(const std::string& bytes) {
  interop::ModelFiles m;
  try {
    m = interop::read_gguf(interop::InputBytes::of(bytes, "fuzz.gguf"));
  } catch (const interop::InteropError& e) {
    if (std::string(e.what()).rfind("fuzz.gguf: ", 0) != 0) std::abort();
    return;
  }
  gguf_kept(bytes, m);
  std::string again;
  interop::write_gguf(m, interop::StoredType::f32, "fuzz",
                      [&](const char* d, size_t n) { again.append(d, n); });
  const interop::ModelFiles back = interop::read_gguf(interop::InputBytes::of(again, "again.gguf"));
  if (back.config.tie_weights != m.config.tie_weights ||
      back.tokenizer.has_value() != m.tokenizer.has_value())
    std::abort();
  if (m.tokenizer &&
      (back.tokenizer->type != m.tokenizer->type || back.tokenizer->merges != m.tokenizer->merges ||
       back.tokenizer->split_pattern != m.tokenizer->split_pattern ||
       back.tokenizer->byte_order != m.tokenizer->byte_order ||
       back.tokenizer->special_tokens != m.tokenizer->special_tokens))
    std::abort();
  if (!same_weights(back.weights, m.weights)) std::abort();
}

// The bases gguf_lora puts an adapter on: a GPT-2 (llama.cpp's gpt2: q, k and v fused) and a
// Llama (llama: q and k rows permuted), two blocks each, small.
inline std::vector<nn::GPTConfig> lora_bases() {
  nn::GPTConfig gpt2;
  gpt2.vocab_size = 32, gpt2.context_length = 8, gpt2.d_model = 8, gpt2.n_heads = 2;
  gpt2.n_layers = 2, gpt2.qkv_bias = true;
  nn::GPTConfig llama = gpt2;
  llama.position = nn::PositionKind::rope, llama.mlp = nn::MlpKind::swiglu;
  llama.norm = nn::NormKind::rms_norm, llama.linear_bias = false, llama.qkv_bias = false;
  llama.n_kv_heads = 1, llama.d_ff = 12;
  return {gpt2, llama};
}

// Any bytes as llama.cpp's LoRA adapter GGUF on each of lora_bases(): refused with an
// InteropError naming the file, or read into adapters that write and read back the same.
inline void gguf_lora(const std::string& bytes) {
  for (const nn::GPTConfig& base : lora_bases()) {
    interop::LoraAdapter a;
    try {
      a = interop::read_gguf_lora(interop::InputBytes::of(bytes, "fuzz.gguf"), base);
    } catch (const interop::InteropError& e) {
      if (std::string(e.what()).rfind("fuzz.gguf: ", 0) != 0) std::abort();
      continue;
    }
    std::string again;
    interop::write_gguf_lora(a, "fuzz", interop::StoredType::f32,
                             [&](const char* d, size_t n) { again.append(d, n); });
    const interop::LoraAdapter back =
        interop::read_gguf_lora(interop::InputBytes::of(again, "again.gguf"), base);
    if (!back.config.same_adapters(a.config) || !same_weights(back.tensors, a.tensors))
      std::abort();
  }
}

// Any bytes as a safetensors file: refused with an InteropError naming the file (a tensor of
// a dtype without weights when it is read), or read whole, every tensor's bytes inside the
// file and all of them together exactly its data.
inline void safetensors(const std::string& bytes) {
  try {
    const auto in = interop::SafetensorsReader::from_bytes(bytes, "fuzz.safetensors");
    uint64_t total = 0;
    for (const auto& e : in.entries()) {
      const ag::Tensor t = in.read(e);
      if (static_cast<uint64_t>(t.numel()) * e.dtype->bits / 8 != e.end - e.begin) std::abort();
      total += e.end - e.begin;
    }
    if (total > bytes.size()) std::abort();
  } catch (const interop::InteropError& e) {
    if (std::string(e.what()).rfind("fuzz.safetensors: ", 0) != 0) std::abort();
  }
}

// Any bytes as a Hugging Face config.json of the Llama family (llama, qwen2, qwen3): a config
// within attograd's bounds, whose parameters are counted (as the import counts them against
// the file's size), or an InteropError naming the file.
inline void hf_llama_config(const std::string& bytes) {
  std::vector<std::string> notes;
  try {
    const nn::GPTConfig c =
        interop::read_llama_config(interop::InputBytes::of(bytes, "config.json"), notes);
    if (c.num_parameters() < c.vocab_size) std::abort();
  } catch (const interop::InteropError& e) {
    if (std::string(e.what()).rfind("config.json: ", 0) != 0) std::abort();
  }
}

// Any bytes as the body of `serve`'s completions and chat requests (serve/request.h): a
// request whose fields hold what the reader promises, or an ApiError with a 400 and a JSON
// error body; a request read is also answered (serve/answer.h) from made-up tokens.
inline void serve_request(const std::string& bytes) {
  const serve::RequestLimits limits;
  for (const auto endpoint : {serve::Endpoint::completions, serve::Endpoint::chat}) {
    try {
      const serve::GenerationRequest r = serve::parse_request(bytes, endpoint, limits);
      if (r.n < 1 || r.n > limits.max_choices || !(r.temperature >= 0 && r.temperature <= 2) ||
          !(r.top_p > 0 && r.top_p <= 1) || r.top_k < 0 || r.stop.size() > limits.max_stops ||
          (r.max_tokens && (*r.max_tokens < 1 || *r.max_tokens > limits.max_tokens)) ||
          (endpoint == serve::Endpoint::chat && r.messages.empty()))
        std::abort();
      const data::ByteTokenizer tokenizer;
      serve::Prepared p{r, {1, 2}, 3};
      serve::Answer answer(p, tokenizer, "id", "model", 0);
      for (int64_t c = 0; c < r.n; ++c)
        for (int64_t id : {0xe2, 0x82, 0xac, -1}) {
          answer.take(id < 0 ? serve::TokenEvent::end(c, serve::Finish::length)
                             : serve::TokenEvent::token(c, id));
        }
      if (!answer.done() || answer.whole().empty()) std::abort();
    } catch (const serve::ApiError& e) {
      if (e.status != 400 || serve::error_body(e).empty()) std::abort();
    }
  }
}

}  // namespace fuzz
