// Multiple-choice evaluation (docs/finetuning.md): items read in both shapes, every bad line a
// one-line error naming file, line and field; endings tokenized and cut as lm-eval-harness
// does; scores equal to the log-likelihoods the forward gives; ties, standard errors and
// the tally; the file scored a line at a time.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/threading.h"
#include "data/choice_items.h"
#include "data/tokenizer.h"
#include "nn/gpt.h"
#include "support.h"
#include "train/multiple_choice.h"

using ag_test::gpt_config;
using ag_test::TempDir;
using Catch::Matchers::Contains;

namespace {

data::ChoiceItem choice_parse(const std::string& line) {
  return data::parse_choice_item(line, "items.jsonl", 7);
}

std::vector<int64_t> bytes(const std::string& s) {
  return data::ByteTokenizer().encode(s);
}

// A small GPT over bytes, untrained (its scores are as good as any to compare).
nn::GPT byte_model(int64_t context = 64) {
  return nn::GPT(gpt_config(256, context, 16, 2, 2, 0.1), 7);
}

// The log-likelihood of `ending` after `context`, from one forward of that row alone.
double reference_log_likelihood(const nn::GPT& model, const std::vector<int64_t>& context,
                                const std::vector<int64_t>& ending) {
  ag::NoGradGuard no_grad;
  std::vector<int64_t> row = context;
  row.insert(row.end(), ending.begin(), ending.end() - 1);
  const auto L = static_cast<int64_t>(row.size());
  const auto logits = model.forward(ag::from_vector(row, {1, L})).logits.to_vector();
  double sum = 0;
  for (size_t t = 0; t < ending.size(); ++t) {
    const size_t at = (context.size() + t - 1) * 256;
    double z = 0;
    for (size_t v = 0; v < 256; ++v) z += std::exp(logits[at + v]);
    sum += logits[at + static_cast<size_t>(ending[t])] - std::log(z);
  }
  return sum;
}

}  // namespace

TEST_CASE("multiple-choice items are read in HellaSwag's shape and the question shape") {
  auto a = choice_parse(R"({"ctx": "A man", "endings": ["runs.", "sits."], "label": 1, "ind": 4})");
  CHECK(a.context == "A man");
  CHECK(a.endings == std::vector<std::string>{"runs.", "sits."});
  CHECK(a.label == 1);
  CHECK(a.line == 7);
  CHECK(a.endings_key == "endings");
  CHECK(choice_parse(R"({"ctx": "x", "endings": ["a", "b", "c"], "label": "2"})").label == 2);
  const std::string choices = R"("question": "2 + 2 =", "choices": ["3", "4", "5"])";
  auto q = choice_parse("{" + choices + R"(, "answer": 1})");
  CHECK(q.context == "2 + 2 =");
  CHECK(q.label == 1);
  CHECK(q.context_key == "question");
  CHECK(q.endings_key == "choices");
  CHECK(choice_parse("{" + choices + R"(, "answer": "C"})").label == 2);
  CHECK(choice_parse("{" + choices + R"(, "answer": "4"})").label == 1);
  // a single capital letter is a letter, even when it is also a choice's text
  CHECK(choice_parse(R"({"question": "q", "choices": ["B", "A"], "answer": "A"})").label == 0);
}

TEST_CASE("every bad multiple-choice line is one line naming the file, the line and the field") {
  const std::string two = R"("endings": ["a", "b"])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"ctx\": ", "not valid JSON"},
      {"[1, 2]", "must be a JSON object, not an array"},
      {R"({"ctx": "x", "question": "y"})", "both 'ctx' and 'question'"},
      {R"({"context": "x"})", "'ctx' (or 'question') is missing"},
      {R"({"ctx": 3, )" + two + R"(, "label": 0})", "'ctx' must be a string, not an unsigned"},
      {R"({"ctx": "", )" + two + R"(, "label": 0})", "'ctx' is empty"},
      {R"({"ctx": "x", "label": 0})", "'endings' is missing"},
      {R"({"ctx": "x", "endings": "ab", "label": 0})", "'endings' must be an array"},
      {R"({"ctx": "x", "endings": ["a"], "label": 0})",
       "'endings' has 1 entry; an item needs 2 to 26"},
      {R"({"ctx": "x", "endings": ["a", 2], "label": 0})", "'endings[1]' must be a string"},
      {R"({"ctx": "x", "endings": ["a", ""], "label": 0})", "'endings[1]' is empty"},
      {R"({"ctx": "x", )" + two + "}", "'label' is missing"},
      {R"({"ctx": "x", )" + two + R"(, "label": 2})", "'label' is 2, outside 0 to 1 (2 endings)"},
      {R"({"ctx": "x", )" + two + R"(, "label": -1})", "'label' is -1, outside 0 to 1"},
      {R"({"ctx": "x", )" + two + R"(, "label": 1.0})", "'label' must be an integer"},
      {R"({"ctx": "x", )" + two + R"(, "label": "one"})",
       "'label' must be an integer (or a string of digits), not \"one\""},
      {R"({"question": "q", "choices": ["a", "b"], "answer": "C"})",
       "'answer' is the letter C, but there are 2 choices (A to B)"},
      {R"({"question": "q", "choices": ["a", "b"], "answer": "c"})",
       "'answer' \"c\" is neither a letter nor the text of a choice"},
      {R"({"question": "q", "choices": ["a", "a"], "answer": "a"})", "more than one choice"},
      {R"({"question": "q", "choices": ["a", "b"], "answer": true})",
       "'answer' must be an integer, a letter or the text of a choice, not a boolean"},
      {R"({"question": "q", "choices": ["a", "b"]})", "'answer' is missing"},
      {R"({"question": "q", "endings": ["a", "b"], "answer": 0})", "'choices' is missing"},
  };
  std::string many = R"({"ctx": "x", "endings": [)";
  for (int i = 0; i < 27; ++i) many += (i ? ", " : "") + std::string("\"e\"");
  for (const auto& [line, expected] : cases) {
    INFO(line);
    REQUIRE_THROWS_WITH(choice_parse(line),
                        Contains("items.jsonl: line 7: ") && Contains(expected) && !Contains("\n"));
  }
  REQUIRE_THROWS_WITH(choice_parse(many + R"(], "label": 0})"), Contains("has 27 entries"));
}

TEST_CASE("the multiple-choice reader skips blank lines, counts every line and bounds a line") {
  TempDir dir;
  const std::string item = R"({"ctx": "x", "endings": ["a", "b"], "label": 1})";
  data::ChoiceReader reader(dir.write("items.jsonl", "\n" + item + "\r\n  \n" + item));
  CHECK(reader.next()->line == 2);
  CHECK(reader.next()->line == 4);  // the last line needs no newline
  CHECK_FALSE(reader.next());
  CHECK_FALSE(reader.next());
  const std::string long_line = item + std::string(data::kMaxChoiceLineBytes, ' ') + "\n";
  data::ChoiceReader too_long(dir.write("long.jsonl", item + "\n" + long_line));
  CHECK(too_long.next());
  REQUIRE_THROWS_WITH(too_long.next(), Contains("long.jsonl: line 2 is longer than 1048576 bytes"));
  data::ChoiceReader bad(dir.write("bad.jsonl", item + "\n\n" + R"({"ctx": "x"})" + "\n"));
  CHECK(bad.next());
  REQUIRE_THROWS_WITH(bad.next(), Contains("bad.jsonl: line 3: 'endings' is missing"));
  REQUIRE_THROWS_WITH(data::ChoiceReader(dir.path.string()), Contains("not a regular file"));
  REQUIRE_THROWS_WITH(data::ChoiceReader(dir.file("absent.jsonl")), Contains("absent.jsonl"));
}

TEST_CASE("an ending is its own tokens after a space, the context's trailing space moved to it") {
  const data::ByteTokenizer tok;
  const auto item = [](const std::string& ctx, std::vector<std::string> endings) {
    data::ChoiceItem i;
    i.context = ctx, i.endings = std::move(endings), i.line = 3;
    return i;
  };
  auto t = train::tokenize_choice_item(item("ab", {"cd", " e"}), tok, 16, "f");
  CHECK(t.context == bytes("ab"));
  CHECK(t.endings[0] == bytes(" cd"));  // as llm.c and lm-eval-harness give GPT-2 " " + ending
  CHECK(t.endings[1] == bytes(" e"));   // it has its space already
  t = train::tokenize_choice_item(item("ab \n", {"cd", "e"}), tok, 16, "f");
  CHECK(t.context == bytes("ab"));
  CHECK(t.endings[0] == bytes(" \ncd"));
  CHECK(t.dropped == 0);
  REQUIRE_THROWS_WITH(train::tokenize_choice_item(item(" \t", {"a", "b"}), tok, 16, "f"),
                      Contains("f: line 3: 'ctx' is only whitespace"));
  const auto chars = data::CharTokenizer::from_text("abcd ");
  REQUIRE_THROWS_WITH(train::tokenize_choice_item(item("ab", {"cd", "cx"}), chars, 16, "f"),
                      Contains("f: line 3: 'endings[1]': character 'x'"));
}

TEST_CASE("a context too long for the window loses its oldest tokens, the same for every ending") {
  data::ChoiceItem i;
  i.context = "0123456789", i.endings = {"ab", "abcd"}, i.line = 5;
  const auto t = train::tokenize_choice_item(i, data::ByteTokenizer(), 8, "f");
  // T = 8 inputs hold 9 ids: the longest ending's 5 (its space too) and 4 of the context
  CHECK(t.context == bytes("6789"));
  CHECK(t.dropped == 6);
  i.endings = {"ab", "abcdefgh"};  // 9 tokens: no room for one token of context
  REQUIRE_THROWS_WITH(train::tokenize_choice_item(i, data::ByteTokenizer(), 8, "f"),
                      Contains("f: line 5: 'endings[1]' is 9 tokens") &&
                          Contains("more than the context length 8"));
  i.endings = {"ab", "abcdefg"};  // 8 tokens fit after one token of context
  CHECK(train::tokenize_choice_item(i, data::ByteTokenizer(), 8, "f").context == bytes("9"));
}

TEST_CASE("ties go to the first ending, and the standard error is lm-eval-harness's") {
  CHECK(train::first_max(std::vector<double>{1, 3, 3}) == 1);
  CHECK(train::first_max(std::vector<double>{-2, -2}) == 0);
  // lm-eval-harness: the sample standard deviation of the 0/1 values over sqrt(n)
  const std::vector<double> values = {1, 0, 1, 1, 0, 1, 1};
  const double n = 7, mean = 5 / n;
  double squares = 0;
  for (double v : values) squares += (v - mean) * (v - mean);
  CHECK(train::sample_stderr(mean, 7) ==
        Approx(std::sqrt(squares / (n - 1)) / std::sqrt(n)).epsilon(1e-12));
  CHECK(train::sample_stderr(0.5, 5) == Approx(0.25));
  CHECK(std::isnan(train::sample_stderr(1, 1)));
  train::ChoiceTokens item;
  item.endings = {{1}, {2}, {3}, {4}};
  item.label = 2;
  train::ChoiceScores right, wrong;
  right.pick = 2, right.pick_norm = 0, wrong.pick = 0, wrong.pick_norm = 2;
  train::ChoiceTally tally;
  tally.add(item, right);
  tally.add(item, wrong);
  CHECK(tally.n == 2);
  CHECK(tally.acc() == 0.5);
  CHECK(tally.acc_norm() == 0.5);
  CHECK(tally.chance() == 0.25);
  CHECK(tally.acc_stderr() == Approx(0.5));
}

TEST_CASE("an item's scores are its endings' log-likelihoods under the forward") {
  nn::GPT model = byte_model();
  model.train();
  train::ChoiceTokens item;
  item.context = bytes("The cat sat on");
  item.endings = {bytes(" the mat."), bytes(" a"), bytes(" the hat, then slept.")};
  const auto s = train::score_choice_item(model, item);
  CHECK(model.is_training());  // scored with dropout off, the mode restored after
  model.eval();
  std::vector<double> mean;
  for (size_t j = 0; j < item.endings.size(); ++j) {
    INFO("ending " << j);
    CHECK(s.log_likelihood[j] ==
          Approx(reference_log_likelihood(model, item.context, item.endings[j])).epsilon(1e-5));
    CHECK(s.tokens[j] == static_cast<int64_t>(item.endings[j].size()));
    mean.push_back(s.log_likelihood[j] / static_cast<double>(s.tokens[j]));
  }
  CHECK(s.pick == train::first_max(s.log_likelihood));
  CHECK(s.pick_norm == train::first_max(mean));
  CHECK(s.pick == 1);  // the shortest ending has the largest sum under an untrained model
}

TEST_CASE("endings whose rows exceed a forward's positions are scored over several forwards") {
  nn::GPT model = byte_model(1100);
  train::ChoiceTokens item;
  for (int i = 0; i < 1000; ++i) item.context.push_back(97 + i % 26);
  for (int j = 0; j < 5; ++j)
    item.endings.push_back(bytes(std::string(" ending ") + char('a' + j)));
  // five rows of 1008 positions: four forwards' worth
  REQUIRE(5 * (1000 + 9 - 1) > train::kChoicePositions);
  const auto s = train::score_choice_item(model, item);
  model.eval();
  for (size_t j = 0; j < 5; ++j)
    CHECK(s.log_likelihood[j] ==
          Approx(reference_log_likelihood(model, item.context, item.endings[j])).epsilon(1e-5));
}

TEST_CASE("multiple-choice scores are the same bits on one and two threads") {
  nn::GPT model = byte_model();
  train::ChoiceTokens item;
  item.context = bytes("Once upon a time");
  item.endings = {bytes(" there was"), bytes(" a dragon"), bytes(" in the end")};
  const int threads = ag::num_threads();
  ag::set_num_threads(1);
  const auto one = train::score_choice_item(model, item);
  ag::set_num_threads(2);
  const auto two = train::score_choice_item(model, item);
  ag::set_num_threads(threads);
  CHECK(one.log_likelihood == two.log_likelihood);
}

TEST_CASE("a multiple-choice file is checked whole, then scored item by item up to --limit") {
  TempDir dir;
  nn::GPT model = byte_model();
  std::string text;
  for (int i = 0; i < 5; ++i)
    text += fmt::format(R"({{"ctx": "item {}", "endings": ["yes", "no", "maybe"], "label": {}}})",
                        i, i % 3) +
            "\n\n";
  const std::string path = dir.write("items.jsonl", text + R"({"ctx": "late"})" + "\n");
  const data::ByteTokenizer tok;
  CHECK(train::check_choice_file(model, tok, path, {.limit = 5}) == 5);
  REQUIRE_THROWS_WITH(train::check_choice_file(model, tok, path, {}),
                      Contains("items.jsonl: line 11: 'endings' is missing"));
  const auto tally = train::score_choice_file(model, tok, path, {.limit = 4});
  CHECK(tally.n == 4);
  CHECK(tally.chance() == Approx(1.0 / 3));
  // the same counts as scoring the items one by one
  train::ChoiceTally one_by_one;
  data::ChoiceReader reader(path);
  for (int i = 0; i < 4; ++i) {
    const auto t = train::tokenize_choice_item(*reader.next(), tok, 64, reader.name());
    one_by_one.add(t, train::score_choice_item(model, t));
  }
  CHECK(tally.correct == one_by_one.correct);
  CHECK(tally.correct_norm == one_by_one.correct_norm);
  REQUIRE_THROWS_WITH(train::check_choice_file(model, tok, dir.write("empty.jsonl", "\n \n"), {}),
                      Contains("empty.jsonl: no items"));
  REQUIRE_THROWS_WITH(train::check_choice_file(model, tok, path, {.context_length = 65}),
                      Contains("between 1 and the model's 64"));
}

TEST_CASE("multiple-choice scoring refuses a model whose head does not predict tokens") {
  TempDir dir;
  nn::GPT model = byte_model();
  ag::Generator gen(1);
  model.replace_head(std::make_shared<nn::ClassificationHead>(16, 2, gen), "classifier");
  const std::string path =
      dir.write("items.jsonl", R"({"ctx": "x", "endings": ["a", "b"], "label": 0})");
  REQUIRE_THROWS_WITH(train::check_choice_file(model, data::ByteTokenizer(), path, {}),
                      Contains("needs a model that predicts tokens"));
}
