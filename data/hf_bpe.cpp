// HfBpeTokenizer: Hugging Face tokenizers' byte-level BPE over attograd's BPE machinery
// (hf_bpe.h), and its stream encoder.
#include "data/hf_bpe.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "base/json.h"
#include "base/utf8.h"
#include "data/normalize.h"

namespace data {

namespace {

std::string added_problem(const HfBpeSpec& spec, size_t k) {
  const AddedToken& t = spec.added[k];
  if (t.id >= spec.tokens.size())
    return fmt::format("has id {}, past the vocabulary of {}", t.id, spec.tokens.size());
  if (t.content.empty() || t.content.size() > HfBpeTokenizer::kMaxAddedTokenBytes)
    return fmt::format("has {} bytes; 1 to {} expected", t.content.size(),
                       HfBpeTokenizer::kMaxAddedTokenBytes);
  try {
    base::check_utf8(t.content);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  for (size_t j = 0; j < k; ++j)
    if (spec.added[j].id == t.id || spec.added[j].content == t.content)
      return fmt::format("repeats added token {} (id {})", j, spec.added[j].id);
  return "";
}

// The added tokens and the template's ids, checked; the rest the BPE checks.
HfBpeSpec checked(HfBpeSpec spec) {
  if (spec.added.size() > HfBpeTokenizer::kMaxAddedTokens)
    throw std::invalid_argument(fmt::format("hf tokenizer: {} added tokens; at most {}",
                                            spec.added.size(), HfBpeTokenizer::kMaxAddedTokens));
  for (size_t k = 0; k < spec.added.size(); ++k)
    if (const std::string why = added_problem(spec, k); !why.empty())
      throw std::invalid_argument(fmt::format("hf tokenizer: added token {} ('{}') {}", k,
                                              base::printable(spec.added[k].content), why));
  for (const auto* ids : {&spec.prefix, &spec.suffix}) {
    if (ids->size() > HfBpeTokenizer::kMaxTemplateIds)
      throw std::invalid_argument(fmt::format("hf tokenizer: the template adds {} ids; at most {}",
                                              ids->size(), HfBpeTokenizer::kMaxTemplateIds));
    for (const uint32_t id : *ids)
      if (id >= spec.tokens.size())
        throw std::invalid_argument(
            fmt::format("hf tokenizer: the template adds id {}, past the vocabulary of {}", id,
                        spec.tokens.size()));
  }
  return spec;
}

BpeTokenizer make_bpe(const HfBpeSpec& spec) {
  BpeTokenizer::OwnVocabulary v;
  v.tokens = spec.tokens;
  v.outside.assign(spec.tokens.size(), false);
  for (const AddedToken& t : spec.added) v.outside[t.id] = !t.in_vocabulary;
  v.merges = spec.merges;
  v.whole_tokens = spec.ignore_merges;
  try {
    return BpeTokenizer::from_vocabulary(std::move(v), spec.split_pattern);
  } catch (const std::invalid_argument& e) {
    std::string why = e.what();
    if (why.rfind("bpe tokenizer: ", 0) == 0) why.erase(0, 15);
    throw std::invalid_argument("hf tokenizer: " + why);
  }
}

// Steps 1 to 4 of hf_bpe.h on a text in chunks: the raw added tokens, normalization of the
// text between them, the normalized added tokens, and the BPE's own stream of pieces.
class HfStreamEncoder final : public BpeStreamEncoder {
 public:
  explicit HfStreamEncoder(const HfBpeTokenizer& tok)
      : BpeStreamEncoder(tok.bpe()),
        tok_(tok),
        raw_(tok.raw_matcher()),
        normalized_(tok.normalized_matcher()) {}
  void add(std::string_view chunk, std::vector<uint32_t>& out) override { step(chunk, false, out); }
  void finish(std::vector<uint32_t>& out) override { step({}, true, out); }

 private:
  void step(std::string_view chunk, bool final, std::vector<uint32_t>& out) {
    const auto on_id = [&out](uint32_t id) { out.push_back(id); };
    const auto to_bpe = [&](std::string_view text, bool ends) {
      BpeStreamEncoder::add(text, out);
      if (ends) BpeStreamEncoder::finish(out);
    };
    const auto to_normalized = [&](std::string_view text, bool ends) {
      normalized_.add(text, ends, to_bpe, on_id);
    };
    const auto normalize = [&](std::string_view text, bool ends) {
      if (tok_.spec().normalizer == Normalizer::none) return to_normalized(text, ends);
      waiting_ += text;
      const size_t end = ends ? waiting_.size() : nfc_stable_end(waiting_);
      const std::string done = nfc(std::string_view(waiting_).substr(0, end));
      waiting_.erase(0, end);
      to_normalized(done, ends);
    };
    raw_.add(chunk, final, normalize, on_id);
  }

  const HfBpeTokenizer& tok_;
  AddedTokenSplitter raw_, normalized_;
  std::string waiting_;  // text not yet normalized: more could change its normal form
};

}  // namespace

HfBpeTokenizer::HfBpeTokenizer(HfBpeSpec spec)
    : spec_(checked(std::move(spec))),
      bpe_(make_bpe(spec_)),
      raw_(spec_.added, /*normalized=*/false),
      normalized_(spec_.added, /*normalized=*/true) {}

void HfBpeTokenizer::encode_append(std::string_view utf8, std::vector<uint32_t>& out) const {
  base::check_utf8(utf8);
  HfStreamEncoder encoder(*this);
  encoder.add(utf8, out);
  encoder.finish(out);
}

std::vector<int64_t> HfBpeTokenizer::encode(const std::string& utf8) const {
  std::vector<uint32_t> ids;
  ids.reserve(utf8.size() / 3);
  encode_append(utf8, ids);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::vector<int64_t> HfBpeTokenizer::with_template(const std::vector<int64_t>& ids) const {
  std::vector<int64_t> out(spec_.prefix.begin(), spec_.prefix.end());
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), spec_.suffix.begin(), spec_.suffix.end());
  return out;
}

std::string HfBpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size())
      throw std::out_of_range(
          fmt::format("hf tokenizer: id {} at position {} is outside the vocabulary of {}", ids[i],
                      i, vocab_size()));
    out += spec_.tokens[static_cast<size_t>(ids[i])];
  }
  return out;
}

std::unique_ptr<BpeStreamEncoder> make_hf_stream_encoder(const HfBpeTokenizer& tokenizer) {
  return std::make_unique<HfStreamEncoder>(tokenizer);
}

}  // namespace data

// ---- settings as JSON -------------------------------------------------------------------

namespace data {

namespace {

using nlohmann::json;

[[noreturn]] void settings_fail(const std::string& key, const std::string& what) {
  throw std::invalid_argument(fmt::format("hf tokenizer settings: '{}' {}", key, what));
}

const json& field(const json& object, const std::string& key, json::value_t type,
                  const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end()) settings_fail(path + key, "is missing");
  const bool is_unsigned = type == json::value_t::number_unsigned && it->is_number_unsigned();
  if (it->type() != type && !is_unsigned) settings_fail(path + key, "has the wrong type");
  return *it;
}

void expect_size(const json& object, size_t keys, const std::string& path) {
  if (object.size() != keys)
    settings_fail(path, fmt::format("has {} keys, not the {} expected", object.size(), keys));
}

std::vector<uint32_t> id_list(const json& top, const std::string& key) {
  std::vector<uint32_t> ids;
  for (const json& v : field(top, key, json::value_t::array, "")) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX)
      settings_fail(key, "holds something other than an id");
    ids.push_back(v.get<uint32_t>());
  }
  return ids;
}

AddedToken added_token(const json& v, size_t k) {
  const std::string path = fmt::format("added_tokens[{}].", k);
  if (!v.is_object()) settings_fail(path, "is not an object");
  expect_size(v, 5, path);
  AddedToken t;
  const json& id = field(v, "id", json::value_t::number_unsigned, path);
  if (id.get<uint64_t>() > UINT32_MAX) settings_fail(path + "id", "is not an id");
  t.id = id.get<uint32_t>();
  t.content = field(v, "content", json::value_t::string, path).get<std::string>();
  t.special = field(v, "special", json::value_t::boolean, path).get<bool>();
  t.normalized = field(v, "normalized", json::value_t::boolean, path).get<bool>();
  t.in_vocabulary = field(v, "in_vocabulary", json::value_t::boolean, path).get<bool>();
  return t;
}

}  // namespace

std::string hf_settings_json(const HfBpeSpec& spec) {
  json added = json::array();
  for (const AddedToken& t : spec.added)
    added.push_back({{"id", t.id},
                     {"content", t.content},
                     {"special", t.special},
                     {"normalized", t.normalized},
                     {"in_vocabulary", t.in_vocabulary}});
  const json top = {{"normalizer", spec.normalizer == Normalizer::nfc ? "NFC" : "none"},
                    {"ignore_merges", spec.ignore_merges},
                    {"prefix", spec.prefix},
                    {"suffix", spec.suffix},
                    {"added_tokens", std::move(added)}};
  return top.dump(-1, ' ', /*ensure_ascii=*/true);
}

void read_hf_settings(const std::string& text, HfBpeSpec& spec) {
  if (text.size() > kMaxHfSettingsJsonBytes)
    settings_fail("",
                  fmt::format("take {} bytes; at most {}", text.size(), kMaxHfSettingsJsonBytes));
  json top;
  try {
    top = base::parse_json(text);
  } catch (const base::JsonError& e) {
    settings_fail("", fmt::format("are not JSON: {}", e.what()));
  }
  if (!top.is_object()) settings_fail("", "are not a JSON object");
  expect_size(top, 5, "");
  const std::string normalizer =
      field(top, "normalizer", json::value_t::string, "").get<std::string>();
  if (normalizer != "NFC" && normalizer != "none")
    settings_fail("normalizer", "is not NFC or none");
  spec.normalizer = normalizer == "NFC" ? Normalizer::nfc : Normalizer::none;
  spec.ignore_merges = field(top, "ignore_merges", json::value_t::boolean, "").get<bool>();
  spec.prefix = id_list(top, "prefix");
  spec.suffix = id_list(top, "suffix");
  const json& added = field(top, "added_tokens", json::value_t::array, "");
  if (added.size() > HfBpeTokenizer::kMaxAddedTokens)
    settings_fail("added_tokens", fmt::format("has more than {}", HfBpeTokenizer::kMaxAddedTokens));
  spec.added.clear();
  for (size_t k = 0; k < added.size(); ++k) spec.added.push_back(added_token(added[k], k));
}

}  // namespace data
