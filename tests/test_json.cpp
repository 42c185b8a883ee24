// base/json.h: the one reader of JSON from elsewhere, and the same bounds wherever such
// JSON comes from (a prepared folder's files, a checkpoint's config, a metrics line).
#include <catch2/catch.hpp>

#include "base/json.h"
#include "data/tokenizer_file.h"
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
