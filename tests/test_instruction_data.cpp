// The instruct task (data/instructions.h): Alpaca's template as the book writes it,
// template files, the reader of JSON and JSONL instruction records with its one-line
// errors, the prompt's mask, truncation, and the gradients the mask leaves.
#include <catch2/catch.hpp>

#include "data/data.h"
#include "support.h"

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {

const std::string kBookPrompt =
    "Below is an instruction that describes a task. Write a response that appropriately "
    "completes the request.\n\n### Instruction:\n";

// A char tokenizer that covers every text of the file with Alpaca's template.
data::CharTokenizer tokenizer_for(const std::string& path) {
  data::TaskOptions o;
  return data::CharTokenizer::from_text(data::instruction_corpus_text(path, o));
}

data::TaskOptions instruct_options(const data::Tokenizer& tok, int64_t context = 512) {
  data::TaskOptions o;
  o.context_length = context;
  o.end_of_text = data::end_of_text_id(tok);
  return o;
}

data::TaskExamples instruction_read(const std::string& path, int64_t context = 512,
                                    bool truncate = true) {
  const data::CharTokenizer tok = tokenizer_for(path);
  data::TaskOptions o = instruct_options(tok, context);
  o.truncate = truncate;
  return data::read_instruction_examples(path, tok, o);
}

// The message read_instruction_examples gives for a file of this content.
std::string instruction_error_of(const ag_test::TempDir& dir, const std::string& content,
                                 const std::string& name = "bad.jsonl") {
  const std::string path = dir.write(name, content);
  const data::ByteTokenizer tok;
  try {
    data::read_instruction_examples(path, tok, instruct_options(tok));
  } catch (const data::DataError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("Alpaca's template formats a record as the book's chapter 7 does") {
  const data::PromptTemplate t = data::PromptTemplate::alpaca();
  REQUIRE(t.format("Reverse the word.", "") ==
          kBookPrompt + "Reverse the word.\n\n### Response:\n");
  REQUIRE(t.format("Reverse the word.", "cat") ==
          kBookPrompt + "Reverse the word.\n\n### Input:\ncat\n\n### Response:\n");
  REQUIRE(data::PromptTemplate::parse("", "x").format("a", "b") == t.format("a", "b"));
}

TEST_CASE("a template file has two prompts with placeholders and literal braces") {
  const auto t = data::PromptTemplate::parse(
      R"({"description": "mine", "prompt_input": "Q: {instruction} [{input}] {{x}}\nA: ",
          "prompt_no_input": "Q: {instruction}\nA: ", "response_split": "A:"})",
      "t.json");
  REQUIRE(t.format("why", "") == "Q: why\nA: ");
  REQUIRE(t.format("why", "sky") == "Q: why [sky] {x}\nA: ");
}

TEST_CASE("a bad template file is an error naming the file and the key") {
  const auto error = [](const std::string& text) -> std::string {
    try {
      data::PromptTemplate::parse(text, "t.json");
    } catch (const data::DataError& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string ok_no_input = R"("prompt_no_input": "{instruction}")";
  REQUIRE_THAT(error(R"({"prompt_input": "{instruction} {output} {input}", )" + ok_no_input + "}"),
               Contains("t.json: 'prompt_input' has the placeholder '{output}'"));
  REQUIRE_THAT(error(R"({"prompt_input": "{input}", )" + ok_no_input + "}"),
               Equals("t.json: 'prompt_input' has no {instruction}"));
  REQUIRE_THAT(error(R"({"prompt_input": "{instruction}", )" + ok_no_input + "}"),
               Equals("t.json: 'prompt_input' has no {input}"));
  REQUIRE_THAT(error(R"({"prompt_input": "{instruction}{input}", "prompt_no_input": "{input}"})"),
               Contains("'prompt_no_input' has the placeholder '{input}'"));
  REQUIRE_THAT(error(R"({"prompt_input": "{instruction}{input} }", )" + ok_no_input + "}"),
               Contains("'prompt_input' has a lone '}'"));
  REQUIRE_THAT(error(R"({"prompt_input": "{instruction}{input", )" + ok_no_input + "}"),
               Contains("'prompt_input' has a lone '{'"));
  REQUIRE_THAT(error(R"({"prompt_input": "{instruction}{input}"})"),
               Equals("t.json: 'prompt_no_input' is missing"));
  REQUIRE_THAT(error(R"({"prompt_input": "{instruction}{input}", "x": 1, )" + ok_no_input + "}"),
               Contains("t.json: 'x' is not a key of a prompt template"));
  REQUIRE_THAT(error(R"({"prompt_input": 3, )" + ok_no_input + "}"),
               Contains("t.json: 'prompt_input' must be a string"));
  REQUIRE_THAT(error("[1]"), Contains("t.json: the file must be a JSON object"));
  REQUIRE_THAT(error("{"), Contains("t.json: not valid JSON"));
}

TEST_CASE("a template file is read, checked and kept as its text") {
  ag_test::TempDir dir;
  const std::string text = R"({"prompt_input": "{instruction}+{input}=",
                               "prompt_no_input": "{instruction}="})";
  REQUIRE(data::read_prompt_template_file(dir.write("t.json", text)) == text);
  REQUIRE_THROWS_WITH(data::read_prompt_template_file(dir.write("e.json", "")),
                      Contains("e.json: the prompt template file is empty"));
  REQUIRE_THROWS_WITH(
      data::read_prompt_template_file(dir.write("bad.json", R"({"prompt_input": "{x}"})")),
      Contains("bad.json: 'prompt_input' has the placeholder '{x}'"));
  REQUIRE_THROWS_WITH(data::read_prompt_template_file(dir.write(
                          "big.json", std::string(data::kMaxPromptTemplateBytes + 1, ' '))),
                      Contains("big.json") && Contains("65536"));
}

TEST_CASE("instruction records become prompt plus response plus end-of-text, the prompt masked") {
  ag_test::TempDir dir;
  const std::string path =
      dir.write("set.json",
                "[\n"
                R"(  {"instruction": "Say hi.", "output": "hi", "id": 7},)"
                "\n"
                R"(  {"instruction": "Reverse it.", "input": "ab", "output": "ba"})"
                "\n]\n");
  const data::CharTokenizer tok = tokenizer_for(path);
  const data::TaskExamples got = data::read_instruction_examples(path, tok, instruct_options(tok));
  REQUIRE(got.examples.size() == 2);
  REQUIRE(got.truncated == 0);
  const int64_t eot = tok.vocab_size();  // a char tokenizer has no <|endoftext|>
  const auto& alpaca = data::PromptTemplate::alpaca();
  for (int k = 0; k < 2; ++k) {
    const data::Example& e = got.examples[k];
    const std::vector<int64_t> prompt =
        tok.encode(k == 0 ? alpaca.format("Say hi.", "") : alpaca.format("Reverse it.", "ab"));
    std::vector<int64_t> ids = prompt, response = tok.encode(k == 0 ? "hi" : "ba");
    ids.insert(ids.end(), response.begin(), response.end());
    ids.push_back(eot);
    REQUIRE(e.ids == ids);
    REQUIRE(e.line == 2 + k);
    // the targets: nothing until the prompt's last token, which predicts the response's
    // first; then the response's tokens and the end-of-text; nothing after it
    std::vector<int64_t> targets(ids.size(), data::kIgnoreTarget);
    targets[prompt.size() - 1] = response[0];
    targets[prompt.size()] = response[1];
    targets[prompt.size() + 1] = eot;
    REQUIRE(e.targets == targets);
  }
}

TEST_CASE("JSON lines are told from a JSON array by their content, blank lines skipped") {
  ag_test::TempDir dir;
  const std::string lines = R"({"instruction": "a", "input": "", "output": "b"})"
                            "\n\n"
                            R"({"instruction": "c", "input": null, "output": "d", "x": [1]})"
                            "\r\n";
  for (const char* name : {"set.jsonl", "set.json", "set.txt"}) {
    const data::TaskExamples got = instruction_read(dir.write(name, lines));
    REQUIRE(got.examples.size() == 2);
    REQUIRE(got.examples[0].line == 1);
    REQUIRE(got.examples[1].line == 3);
  }
  const data::TaskExamples array = instruction_read(
      dir.write("array.jsonl", "\xEF\xBB\xBF [" + std::string(R"({"instruction": "a",
      "output": "b"}, {"output": "]", "instruction": "[{\"\\"}])")));
  REQUIRE(array.examples.size() == 2);
  REQUIRE(array.examples[1].line == 2);
}

TEST_CASE("bad instruction records are one-line errors naming file, line and field") {
  ag_test::TempDir dir;
  const std::string good = R"({"instruction": "a", "output": "b"})";
  const auto p = [&](const std::string& name) { return dir.file(name); };
  REQUIRE_THAT(instruction_error_of(dir, good + "\n" + R"({"output": "b"})" + "\n"),
               Equals(p("bad.jsonl") + ": line 2: 'instruction' is missing"));
  REQUIRE_THAT(instruction_error_of(dir, good + "\n\n" + R"({"instruction": 1, "output": "b"})"),
               Equals(p("bad.jsonl") + ": line 3: 'instruction' must be a string, not an "
                                       "unsigned integer"));
  REQUIRE_THAT(instruction_error_of(dir, R"({"instruction": "a"})"),
               Equals(p("bad.jsonl") + ": line 1: 'output' is missing"));
  REQUIRE_THAT(instruction_error_of(dir, R"({"instruction": "a", "output": ["b"]})"),
               Contains("line 1: 'output' must be a string, not an array"));
  REQUIRE_THAT(instruction_error_of(dir, R"({"instruction": "a", "output": ""})"),
               Contains("line 1: 'output' is empty"));
  REQUIRE_THAT(instruction_error_of(dir, R"({"instruction": "a", "input": 2, "output": "b"})"),
               Contains("line 1: 'input' must be a string"));
  REQUIRE_THAT(instruction_error_of(
                   dir, good + "\n" + R"({"instruction": "a)" + "\xff" + R"(", "output": "b"})"),
               Contains(": line 2: invalid UTF-8") && Contains("0xFF"));
  REQUIRE_THAT(instruction_error_of(dir, good + "\n[1]\n"),
               Contains("line 2: a record must be a JSON object") && Contains("not an array"));
  REQUIRE_THAT(instruction_error_of(dir, good + "\n{\"instruction\": \n"),
               Contains("line 2: not valid JSON"));
  REQUIRE_THAT(instruction_error_of(dir, good.substr(0, 19) + R"(, "instruction": "x"})"),
               Contains("line 1: ") && Contains("appears twice"));
  REQUIRE_THAT(instruction_error_of(dir, " \n\n"),
               Equals(p("bad.jsonl") + ": no records (the file is empty)"));
  REQUIRE_THAT(instruction_error_of(dir, "[ ]"),
               Equals(p("bad.jsonl") + ": no records (an empty array)"));

  SECTION("a JSON array's errors name the record's number and its line") {
    const std::string array = "[\n" + good + ",\n" + good + ",\n" + R"({"instruction": "c",
      "output": ""})" + "\n]";
    REQUIRE_THAT(instruction_error_of(dir, array, "bad.json"),
                 Equals(p("bad.json") + ": record 3 (line 4): 'output' is empty: a record needs "
                                        "a response to train on"));
    REQUIRE_THAT(instruction_error_of(dir, "[" + good + ",\n]", "bad.json"),
                 Contains("record 2 (line 2): an empty record (a stray ',')"));
    REQUIRE_THAT(instruction_error_of(dir, "[" + good + ",," + good + "]", "bad.json"),
                 Contains("record 2 (line 1): an empty record"));
    REQUIRE_THAT(instruction_error_of(dir, "[" + good + "]\n\n x", "bad.json"),
                 Contains("bad.json: line 3: text after the closing ']'"));
    REQUIRE_THAT(instruction_error_of(dir, "[" + good + ", " + good, "bad.json"),
                 Contains("bad.json: the array of records has no closing ']'"));
    REQUIRE_THAT(
        instruction_error_of(dir, "[" + good + ", \"x\"]", "bad.json"),
        Contains("record 2 (line 1): a record must be a JSON object") && Contains("not a string"));
  }
}

TEST_CASE("a character the tokenizer lacks names the record and the field") {
  ag_test::TempDir dir;
  const std::string path = dir.write("set.jsonl", R"({"instruction": "ab", "output": "ab"})");
  const data::CharTokenizer tok = tokenizer_for(path);
  const data::TaskOptions o = instruct_options(tok);
  const std::string other = dir.write("other.jsonl", R"({"instruction": "a", "output": "aZ"})");
  REQUIRE_THROWS_WITH(data::read_instruction_examples(other, tok, o),
                      Contains("other.jsonl: line 1: 'output': ") && Contains("'Z'"));
  const std::string in_input =
      dir.write("input.jsonl", R"({"instruction": "a", "input": "Q", "output": "a"})");
  REQUIRE_THROWS_WITH(data::read_instruction_examples(in_input, tok, o),
                      Contains("input.jsonl: line 1: 'input': ") && Contains("'Q'"));
}

TEST_CASE("a record longer than the context loses its response's tail, counted") {
  ag_test::TempDir dir;
  const std::string path = dir.write("set.jsonl", R"({"instruction": "x", "output": "abcdefgh"})"
                                                  "\n"
                                                  R"({"instruction": "x", "output": "ab"})");
  const data::CharTokenizer tok = tokenizer_for(path);
  const auto P =
      static_cast<int64_t>(tok.encode(data::PromptTemplate::alpaca().format("x", "")).size());
  const int64_t eot = tok.vocab_size();
  data::TaskOptions o = instruct_options(tok, P + 4);
  const data::TaskExamples got = data::read_instruction_examples(path, tok, o);
  REQUIRE(got.truncated == 1);
  const data::Example& cut = got.examples[0];
  REQUIRE(cut.ids.size() == static_cast<size_t>(P + 4));  // prompt + "abcd"
  REQUIRE(tok.decode({cut.ids.end() - 4, cut.ids.end()}) == "abcd");
  // the last position still predicts the next response token: "e"
  REQUIRE(tok.decode({cut.targets.back()}) == "e");
  // the short record fits whole, its end-of-text the target of its last response token
  const data::Example& whole = got.examples[1];
  REQUIRE(whole.ids.size() == static_cast<size_t>(P + 3));
  REQUIRE(whole.targets[static_cast<size_t>(P + 1)] == eot);

  SECTION("a record whose prompt and response fill the context exactly is not cut") {
    o.context_length = P + 2;  // "ab": the end-of-text is only a target
    const data::TaskExamples fit = data::read_instruction_examples(
        dir.write("fit.jsonl", R"({"instruction": "x", "output": "ab"})"), tok, o);
    REQUIRE(fit.truncated == 0);
    REQUIRE(fit.examples[0].ids.size() == static_cast<size_t>(P + 2));
    REQUIRE(fit.examples[0].targets.back() == eot);
  }
  SECTION("with truncate off it is an error naming the file and line") {
    o.truncate = false;
    REQUIRE_THROWS_WITH(data::read_instruction_examples(path, tok, o),
                        Contains("set.jsonl: line 1: the prompt and response take") &&
                            Contains(fmt::format("more than the context length {}", P + 4)));
  }
  SECTION("a prompt longer than the context is refused: nothing of it would be trained") {
    o.context_length = P - 1;
    REQUIRE_THROWS_WITH(
        data::read_instruction_examples(path, tok, o),
        Contains(fmt::format("set.jsonl: line 1: the prompt alone is {} tokens, more than the "
                             "context length {}",
                             P, P - 1)));
  }
}

TEST_CASE("the corpus text of instruction records holds every prompt and response") {
  ag_test::TempDir dir;
  const std::string path =
      dir.write("set.jsonl", R"({"instruction": "é", "input": "ü", "output": "ß"})");
  data::TaskOptions o;
  REQUIRE(data::instruction_corpus_text(path, o) ==
          data::PromptTemplate::alpaca().format("é", "ü") + "ß\n");
  o.prompt_template =
      R"({"prompt_input": "{instruction}|{input}|", "prompt_no_input": "{instruction}|"})";
  REQUIRE(data::instruction_corpus_text(path, o) == "é|ü|ß\n");
}

namespace {

// Every parameter's gradient after one backward of the batch of one example whose inputs
// are e.ids and whose targets are `targets`.
std::vector<std::vector<double>> gradients(const data::Example& e,
                                           const std::vector<int64_t>& targets, int64_t vocab) {
  nn::GPTConfig c;
  c.vocab_size = vocab;
  c.context_length = static_cast<int64_t>(e.ids.size());
  c.d_model = 16, c.n_heads = 2, c.n_layers = 1, c.dropout = 0;
  nn::GPT model(c, 7);
  data::Example changed = e;
  changed.targets = targets;
  const data::Example* rows[] = {&changed};
  const data::ExampleBatch b = data::make_batch(rows, vocab - 1);
  model.forward(b.x, b.y, b.lengths).loss.backward();
  std::vector<std::vector<double>> out;
  for (const ag::Tensor& p : model.parameters()) out.push_back(p.grad().to_vector());
  return out;
}

}  // namespace

TEST_CASE("gradients: a prompt token's target changes nothing, a response token's does") {
  // A prompt [1 2 3 4] and response [5 6], end-of-text 7. Changing a token as a *target*
  // (the inputs kept) goes through the mask: at a prompt position it is ignored.
  const int64_t eot = 7, V = 8, T = 16;
  const std::vector<int64_t> prompt = {1, 2, 3, 4}, response = {5, 6};
  const data::Example e = data::instruction_example(prompt, response, eot, T, nullptr);
  const auto base = gradients(e, e.targets, V);

  std::vector<int64_t> other_prompt = prompt;
  other_prompt[2] = 6;  // the target of position 1
  const auto prompt_changed =
      gradients(e, data::instruction_example(other_prompt, response, eot, T, nullptr).targets, V);
  REQUIRE(prompt_changed == base);  // bit for bit

  std::vector<int64_t> other_response = response;
  other_response[1] = 2;  // the target of position 4
  const auto response_changed =
      gradients(e, data::instruction_example(prompt, other_response, eot, T, nullptr).targets, V);
  REQUIRE(response_changed != base);

  // and without the mask (every position's next token a target) the prompt would count
  std::vector<int64_t> unmasked(e.ids.begin() + 1, e.ids.end());
  unmasked.push_back(data::kIgnoreTarget);
  REQUIRE(gradients(e, unmasked, V) != base);
}
