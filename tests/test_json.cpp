// base/json.h: the one reader of JSON from elsewhere, and the same bounds wherever such
// JSON comes from (a prepared folder's files, a checkpoint's config, a metrics line).
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <utility>

#include "base/json.h"
#include "data/choice_items.h"
#include "data/tokenizer_file.h"
#include "interop/safetensors.h"
#include "io/checkpoint_builder.h"
#include "report/metrics_log.h"

using Catch::Matchers::Contains;

namespace {

std::string nested(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// The message base::parse_json gives for text, or "".
std::string json_error(const std::string& text, size_t max_string = SIZE_MAX) {
  try {
    base::parse_json(text, {}, max_string);
  } catch (const base::JsonError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("JSON nested deeper than the one limit is refused wherever it comes from") {
  REQUIRE(json_error(nested(base::kMaxJsonDepth)).empty());
  REQUIRE(json_error(nested(base::kMaxJsonDepth + 1)) == "JSON nested deeper than 8 levels");
  REQUIRE(json_error(nested(100000)) == "JSON nested deeper than 8 levels");  // no recursion
  const std::string object_too_deep = "{\"a\": " + nested(base::kMaxJsonDepth) + "}";
  REQUIRE_THROWS_WITH(io::detail::parse_config_json(object_too_deep, "x.h5"),
                      Contains("deeper than 8 levels"));
  REQUIRE_THROWS_WITH(report::parse_metrics(object_too_deep + "\n", "m.jsonl"),
                      Contains("m.jsonl:1: JSON nested deeper than 8 levels"));
  REQUIRE_THROWS_WITH(data::parse_tokenizer_file(object_too_deep, "tok.json"),
                      Contains("tok.json: JSON nested deeper than 8 levels"));
}

TEST_CASE("a key given twice is refused wherever the JSON comes from") {
  const std::string twice = R"({"step": 1, "step": 2})";
  REQUIRE(json_error(twice) == "the key 'step' appears twice in one object");
  REQUIRE(json_error(R"({"a": {"k": 1}, "b": {"k": 2}})").empty());  // one key per object
  REQUIRE_THROWS_WITH(io::detail::parse_config_json(twice, "x.h5"),
                      Contains("'x.h5': root attribute 'config': the key 'step' appears twice"));
  REQUIRE_THROWS_WITH(report::parse_metrics(twice + "\n", "m.jsonl"),
                      Contains("m.jsonl:1: the key 'step' appears twice"));
  // a hostile key is escaped in the message
  REQUIRE(json_error("{\"\\u001b[2J\": 1, \"\\u001b[2J\": 2}") ==
          "the key '\\x1b[2J' appears twice in one object");
}

TEST_CASE("a string bound, when given, holds for keys and values") {
  REQUIRE(json_error(R"({"abcd": "efgh"})", 4).empty());
  REQUIRE(json_error(R"({"abcde": 1})", 4) == "a string of more than 4 bytes");
  REQUIRE(json_error(R"({"a": ["abcde"]})", 4) == "a string of more than 4 bytes");
}

TEST_CASE("a syntax error quotes the text only escaped") {
  const std::string message = json_error("{\"a\": \x1b[2J}");
  REQUIRE_THAT(message, Contains("not valid JSON: "));
  REQUIRE(message.find('\x1b') == std::string::npos);
}

TEST_CASE("numbers of a list are read aside, bounded in count and value") {
  base::NumberList ids;
  ids.key = "ids", ids.max_value = 9, ids.max_entries = 3, ids.entry = "a digit";
  const nlohmann::json j = base::parse_json(R"({"ids": [1, 2, 3], "x": [4]})", {&ids});
  REQUIRE(ids.found);
  REQUIRE(ids.values == std::vector<uint32_t>{1, 2, 3});
  REQUIRE(j["ids"].empty());
  REQUIRE(j["x"] == nlohmann::json::array({4}));
  base::NumberList more = ids;
  more.values.clear();
  REQUIRE_THROWS_WITH(base::parse_json(R"({"ids": [1, 2, 3, 4]})", {&more}),
                      Contains("'ids' has more than 3 entries"));
  more.values.clear();
  REQUIRE_THROWS_WITH(base::parse_json(R"({"ids": [1, 10]})", {&more}),
                      Contains("'ids'[1] must be a digit, not 10"));
}

TEST_CASE("values are quoted short and printable in messages") {
  REQUIRE(base::json_kind(nlohmann::json(-1)) == "a negative integer");
  REQUIRE(base::json_quote("\x1b[2J") == "\"\\u001b[2J\"");
  REQUIRE(base::json_quote(std::string(100, 'x'), 10) == "\"xxxxxx...");
}

namespace {

// A million small objects parse in well under this (under AddressSanitizer, which slows the
// parser several times, a bound that still tells seconds from the quadratic reader's minutes)
#if defined(__SANITIZE_ADDRESS__)
constexpr double kMillionSeconds = 30;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr double kMillionSeconds = 30;
#else
constexpr double kMillionSeconds = 5;
#endif
#else
constexpr double kMillionSeconds = 5;
#endif

// Seconds of one read(text).
template <typename Read>
double seconds_of(const std::string& text, Read&& read) {
  const auto start = std::chrono::steady_clock::now();
  try {
    read(text);
  } catch (const std::exception&) {  // a reader may refuse what follows the JSON
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The shortest of three timings of read(text): the least disturbed by other work.
template <typename Read>
double best_seconds(const std::string& text, Read&& read) {
  double best = 1e9;
  for (int i = 0; i < 3; ++i) best = std::min(best, seconds_of(text, read));
  return best;
}

// The shortest of three timings of each of two texts, read in turn: a burst of other work
// (the suite runs two tests at once) then slows a timing of each, not all of one (a 3.6x
// ratio, where linear time gives 2x, was seen once that way under the sanitizers).
template <typename Read>
std::pair<double, double> best_seconds_in_turn(const std::string& a, const std::string& b,
                                               Read&& read) {
  std::pair<double, double> best{1e9, 1e9};
  for (int i = 0; i < 3; ++i) {
    best.first = std::min(best.first, seconds_of(a, read));
    best.second = std::min(best.second, seconds_of(b, read));
  }
  return best;
}

// `count` small objects in one array (the shape that made nlohmann's callback parser
// quadratic), as `wrap` places it in the entry point's format.
std::string many_objects(size_t count, const std::string& before, const std::string& after) {
  std::string text = before + "[";
  for (size_t i = 0; i < count; ++i) text += i ? ",{\"a\":1}" : "{\"a\":1}";
  return text + "]" + after;
}

}  // namespace

TEST_CASE("every JSON reader takes time linear in the objects of one container") {
  struct Entry {
    const char* name;
    std::string before, after;
    std::function<void(const std::string&)> read;
  };
  const std::vector<Entry> entries = {
      {"base::parse_json", "", "", [](const std::string& t) { base::parse_json(t); }},
      {"a checkpoint's config", "{\"x\":", "}",
       [](const std::string& t) { io::detail::parse_config_json(t, "x.h5"); }},
      {"a metrics line", "{\"x\":", "}\n",
       [](const std::string& t) { report::parse_metrics(t, "m.jsonl"); }},
      {"a tokenizer file", "{\"x\":", "}",
       [](const std::string& t) { data::parse_tokenizer_file(t, "tok.json"); }},
      {"a safetensors header", "{\"__metadata__\":{},\"x\":", "}",
       [](const std::string& t) {
         std::string bytes(8, '\0');
         for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>(t.size() >> (8 * i));
         interop::SafetensorsReader::from_bytes(bytes + t, "m.safetensors");
       }},
      {"a multiple-choice line", "{\"x\":", "}",
       [](const std::string& t) { data::parse_choice_item(t, "items.jsonl", 1); }},
  };
  constexpr size_t kCount = 250'000;
  for (const Entry& e : entries) {
    INFO(e.name);
    const auto [once, twice] =
        best_seconds_in_turn(many_objects(kCount, e.before, e.after),
                             many_objects(2 * kCount, e.before, e.after), e.read);
    CAPTURE(once, twice);
    REQUIRE(twice < 3 * once + 0.05);  // quadratic would be 4x
  }
  // a million objects well within the limits of a config: in seconds, not hours
  REQUIRE(best_seconds(many_objects(1'000'000, "", ""),
                       [](const std::string& t) { base::parse_json(t); }) < kMillionSeconds);
}

TEST_CASE("JSON is one value: a NUL or anything else after it is refused") {
  REQUIRE_THAT(json_error(std::string("{\"a\": 1}\0{\"b\": 2}", 17)), Contains("not valid JSON"));
  REQUIRE_THAT(json_error(std::string("{\"a\": 1}\0", 9)), Contains("not valid JSON"));
  REQUIRE_THAT(json_error("{\"a\": 1} {\"b\": 2}"), Contains("not valid JSON"));
  REQUIRE_THAT(json_error(std::string("{\"a\": \"x\0y\"}", 12)), Contains("not valid JSON"));
  REQUIRE(json_error("{\"a\": 1}\n  ").empty());  // white space after it is not a value
}

TEST_CASE("the tree keeps every value where the text put it") {
  const nlohmann::json j = base::parse_json(
      R"({"z": [1, {"b": [true, null, -2.5]}, "s"], "a": {"y": {}, "x": []}, "m": 18446744073709551615})");
  REQUIRE(
      j ==
      nlohmann::json::parse(
          R"({"z": [1, {"b": [true, null, -2.5]}, "s"], "a": {"y": {}, "x": []}, "m": 18446744073709551615})"));
  REQUIRE(j["m"].is_number_unsigned());
  REQUIRE(base::parse_json("7") == 7);
  REQUIRE(base::parse_json("[[], [[]], {}]").dump() == "[[],[[]],{}]");
}
