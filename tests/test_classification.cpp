// Classification (docs/finetuning.md): the TSV/CSV reader, the classifier in the model
// description (config keys, parameters, pooling over padded rows, --init-from an LM), and
// the metrics `eval` prints.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <random>

#include "autograd/allocator.h"
#include "base/utf8.h"
#include "checkpoint_support.h"
#include "data/data_error.h"
#include "data/examples.h"
#include "data/tokenizer.h"
#include "support.h"
#include "train/classification_metrics.h"
#include "train/config.h"
#include "train/model_loading.h"
#include "train/task.h"

namespace {

using ag_test::TempDir;
using Catch::Matchers::Contains;

data::TaskOptions classify_options(int64_t context = 64) {
  data::TaskOptions o;
  o.context_length = context;
  return o;
}

data::TaskExamples read(const std::string& path, const data::TaskOptions& o = classify_options()) {
  return data::read_classification_examples(path, data::ByteTokenizer(), o);
}

std::string text_of(const data::Example& e) {
  return data::ByteTokenizer().decode(e.ids);
}

// The one-line error reading `content` gives.
std::string classification_error_of(const std::string& content,
                                    const data::TaskOptions& o = classify_options()) {
  TempDir dir;
  const std::string path = dir.write("set.tsv", content);
  try {
    read(path, o);
  } catch (const data::DataError& e) {
    const std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    CHECK_THAT(what, Contains("set.tsv"));
    return what;
  }
  FAIL("no error for: " << content);
  return "";
}

void error_free(const std::string& content) {
  TempDir dir;
  read(dir.write("set.tsv", content));
}

}  // namespace

TEST_CASE("a TSV of text and label reads as examples with sorted labels", "[classify][data]") {
  TempDir dir;
  const std::string path = dir.write("set.tsv", "buy now\tspam\nhello there\tham\n\nhi\tham \n");
  const data::TaskExamples t = read(path);
  CHECK(t.labels == std::vector<std::string>{"ham", "spam"});
  REQUIRE(t.examples.size() == 3);
  CHECK(text_of(t.examples[0]) == "buy now");
  CHECK(t.examples[0].label == 1);
  CHECK(t.examples[1].label == 0);
  CHECK(t.examples[2].label == 0);  // "ham " is "ham"
  CHECK(t.examples[2].line == 4);   // the empty line is skipped, and counted
  CHECK(t.examples[0].targets.empty());
  CHECK(t.truncated == 0);
  CHECK(data::classification_corpus_text(path) == "buy now\nhello there\nhi\n");
}

TEST_CASE("a CSV's quoted fields hold commas, quotes and newlines", "[classify][data]") {
  TempDir dir;
  const std::string path =
      dir.write("set.csv",
                "\xEF\xBB\xBFtext,label\r\n\"win, \"\"free\"\"\nprize\",spam\r\nsee you,ham\r\n"
                "say \"hi\",ham");
  const data::TaskExamples t = read(path);
  REQUIRE(t.examples.size() == 3);
  CHECK(text_of(t.examples[0]) == "win, \"free\"\nprize");
  CHECK(t.examples[0].line == 2);
  CHECK(t.examples[1].line == 4);  // the quoted newline counts
  CHECK(text_of(t.examples[1]) == "see you");
  CHECK(text_of(t.examples[2]) == "say \"hi\"");  // a quote inside an unquoted field
  CHECK(t.labels == std::vector<std::string>{"ham", "spam"});
}

TEST_CASE("a header line is found by its column names, in either order", "[classify][data]") {
  TempDir dir;
  SECTION("label first, as the book's SMS spam CSV") {
    const data::TaskExamples t =
        read(dir.write("a.csv", "Label,Text\nham,hi\nspam,\"win, now\"\n"));
    REQUIRE(t.examples.size() == 2);
    CHECK(text_of(t.examples[1]) == "win, now");
    CHECK(t.examples[1].label == 1);
  }
  SECTION("other columns are ignored") {
    const data::TaskExamples t =
        read(dir.write("b.tsv", "id\tsentence\tcategory\n7\tgood\tpos\n8\tbad\tneg\n"));
    REQUIRE(t.examples.size() == 2);
    CHECK(text_of(t.examples[0]) == "good");
    CHECK(t.labels == std::vector<std::string>{"neg", "pos"});
  }
  SECTION("without one, the first line is a row") {
    const data::TaskExamples t = read(dir.write("c.tsv", "hello\tgreeting\nbye\tfarewell\n"));
    CHECK(t.examples.size() == 2);
  }
}

// n rows of the SMS Spam Collection's own layout: label<TAB>text, no header line.
std::string sms_rows(int n) {
  std::string out;
  for (int i = 0; i < n; ++i)
    out += i % 3 == 0 ? fmt::format("spam\tWIN a prize now, call {}\n", 1000 + i)
                      : fmt::format("ham\tsee you at {} tonight, ok?\n", i);
  return out;
}

TEST_CASE("without a header the label is the column of few values, and the layout is said",
          "[classify][data]") {
  TempDir dir;
  SECTION("the SMS Spam Collection's label<TAB>text: two labels, not one per message") {
    const data::TaskExamples t = read(dir.write("SMSSpamCollection", sms_rows(40)));
    CHECK(t.labels == std::vector<std::string>{"ham", "spam"});
    REQUIRE(t.examples.size() == 40);
    CHECK(text_of(t.examples[0]) == "WIN a prize now, call 1000");
    CHECK(t.examples[0].label == 1);
    CHECK_THAT(t.layout, Contains("SMSSpamCollection': no header line; column 1 is the label (2 "
                                  "different values in 40 rows), column 2 the text"));
  }
  SECTION("extra columns: the longest other column is the text, the rest ignored and named") {
    // column 4 has the fewest values, one: it labels nothing
    const data::TaskExamples t =
        read(dir.write("x.csv",
                       "1,\"good, really\",pos,x\n2,bad,neg,x\n3,\"fine \"\"ok\"\"\",pos,x\n"
                       "4,awful film,neg,x\n5,great,pos,x\n"));
    CHECK(t.labels == std::vector<std::string>{"neg", "pos"});
    CHECK(text_of(t.examples[2]) == "fine \"ok\"");
    CHECK_THAT(t.layout, Contains("column 3 is the label") && Contains("column 2 the text") &&
                             Contains("ignored: column 1, column 4"));  // one value: no label
  }
  SECTION("a header's layout names the columns, and the ignored ones") {
    const data::TaskExamples t =
        read(dir.write("spam.csv", "v1,v2,,,\nham,\"Ok, lar...\",,,\nspam,Free entry,,,\n"));
    CHECK(text_of(t.examples[0]) == "Ok, lar...");
    CHECK(t.labels == std::vector<std::string>{"ham", "spam"});
    CHECK_THAT(t.layout, Contains("a header line names the columns: text 'v2' (column 2), label "
                                  "'v1' (column 1); ignored: column 3, column 4, column 5"));
  }
  SECTION("with a model's labels, the column holding only them is the label") {
    data::TaskOptions o = classify_options();
    o.labels = {"ham", "spam"};
    const data::TaskExamples t = read(dir.write("one.tsv", "spam\twin\n"), o);
    REQUIRE(t.examples.size() == 1);
    CHECK(text_of(t.examples[0]) == "win");
    CHECK(t.examples[0].label == 1);
    CHECK_THAT(t.layout, Contains("column 1 is the label (it holds only the model's labels)"));
  }
}

TEST_CASE("a headerless file whose every column has many values is refused, with the fix",
          "[classify][data][errors]") {
  std::string rows;
  for (int i = 0; i < 40; ++i) rows += fmt::format("message {}\tnote {}\n", i, i % 12);
  CHECK_THAT(
      classification_error_of(rows),
      Contains("no header line and no column that looks like a label") &&
          Contains("column 2, the one with the fewest different values, has 12 in 40 rows") &&
          Contains("name the columns in a first line"));
  // a header naming the columns is the user's word: a label per text is then allowed
  CHECK_NOTHROW(error_free("text\tlabel\n" + rows));
}

TEST_CASE("a model's labels read a file; an unknown one is an error naming it",
          "[classify][data]") {
  data::TaskOptions o = classify_options();
  o.labels = {"ham", "spam", "zzz"};
  TempDir dir;
  const data::TaskExamples t = read(dir.write("set.tsv", "a\tspam\nb\tspam\n"), o);
  CHECK(t.labels == o.labels);
  CHECK(t.examples[0].label == 1);
  const std::string e = classification_error_of("a\tham\nb\tegg\n", o);
  CHECK_THAT(e,
             Contains("line 2") && Contains("unknown label 'egg'") && Contains("ham, spam, zzz"));
}

TEST_CASE("texts longer than the context are cut to their first tokens, or refused",
          "[classify][data]") {
  TempDir dir;
  const std::string path = dir.write("set.tsv", "abcdefgh\tx\nab\ty\n");
  const data::TaskExamples t = read(path, classify_options(4));
  CHECK(t.truncated == 1);
  CHECK(text_of(t.examples[0]) == "abcd");
  data::TaskOptions strict = classify_options(4);
  strict.truncate = false;
  CHECK_THAT(classification_error_of("abcdefgh\tx\nab\ty\n", strict),
             Contains("line 1") && Contains("8 tokens, longer than the context of 4") &&
                 Contains("--no-truncate"));
}

TEST_CASE("bad classification files are one-line errors naming file, line and field",
          "[classify][data][errors]") {
  CHECK_THAT(classification_error_of("good\tpos\njust text\n"),
             Contains("line 2: no label column"));
  CHECK_THAT(classification_error_of("\tpos\nb\tneg\n"), Contains("line 1: field 'text' is empty"));
  CHECK_THAT(classification_error_of("a\tpos\nb\t  \n"),
             Contains("line 2: field 'label' is empty"));
  CHECK_THAT(classification_error_of("Text\tLabel\na\t\n"),
             Contains("line 2: field 'Label' is empty"));
  CHECK_THAT(classification_error_of("a\tpos\nb\tpos\n"),
             Contains("every row has the label 'pos'") && Contains("at least two labels"));
  CHECK_THAT(classification_error_of("a\tpos\nb\xff\tneg\n"),
             Contains("line 2: field 'text': invalid UTF-8") && Contains("0xFF"));
  CHECK_THAT(classification_error_of(""), Contains("no rows"));
  CHECK_THAT(classification_error_of("text\tlabel\n\n"), Contains("no rows"));
  CHECK_THAT(classification_error_of("a\tb\tc\nd\te\n"),
             Contains("line 2: 2 fields, but line 1 has 3"));
  CHECK_THAT(classification_error_of("just\ntext\n"), Contains("line 1: no label column"));
  CHECK_THAT(classification_error_of("text\tlabel\textra\na\tb\n"),
             Contains("line 2: 2 fields, but the header names 3 columns"));
  CHECK_THAT(classification_error_of("a,pos\n\"b,neg\n"),
             Contains("line 2: a quoted field is not closed before the end of the file"));
  CHECK_THAT(classification_error_of("a,pos\n\"b\"x,neg\n"),
             Contains("line 2: 'x' after a closing quote"));
  CHECK_THAT(classification_error_of(std::string(size_t{1} << 21, 'a') + "\tpos\n"),
             Contains("line 1: a line longer than 1 MiB"));
  CHECK_THAT(classification_error_of("a,pos\n\"" + std::string(size_t{1} << 21, 'a')),
             Contains("line 2: a record longer than 1 MiB"));
  TempDir dir;
  CHECK_THROWS_WITH(read(dir.file("absent.tsv")), Contains("absent.tsv"));
}

TEST_CASE("classification metrics on a hand-computed case", "[classify][metrics]") {
  // true:      0 0 0 1 1 2 2 2 2;  label 3 never occurs nor is predicted
  // predicted: 0 1 0 1 2 2 2 0 2
  const train::ClassificationMetrics m =
      train::classification_metrics({0, 0, 0, 1, 1, 2, 2, 2, 2}, {0, 1, 0, 1, 2, 2, 2, 0, 2}, 4);
  CHECK(m.examples == 9);
  CHECK(m.correct == 6);
  CHECK(m.accuracy == Approx(6.0 / 9));
  CHECK(m.confusion ==
        std::vector<std::vector<int64_t>>{{2, 1, 0, 0}, {0, 1, 1, 0}, {1, 0, 3, 0}, {0, 0, 0, 0}});
  CHECK(m.per_label[0].precision == Approx(2.0 / 3));  // predicted 0: three times, two right
  CHECK(m.per_label[0].recall == Approx(2.0 / 3));
  CHECK(m.per_label[1].precision == Approx(0.5));
  CHECK(m.per_label[1].recall == Approx(0.5));
  CHECK(m.per_label[2].precision == Approx(0.75));
  CHECK(m.per_label[2].recall == Approx(0.75));
  CHECK(m.per_label[2].f1 == Approx(0.75));
  CHECK(m.per_label[2].support == 4);
  CHECK(m.per_label[3].precision == 0);
  CHECK(m.per_label[3].recall == 0);
  CHECK(m.per_label[3].f1 == 0);
  CHECK(m.per_label[3].support == 0);
  const train::ClassificationMetrics skewed = train::classification_metrics({0, 1}, {0, 0}, 2);
  CHECK(skewed.per_label[0].f1 == Approx(2 * 0.5 * 1.0 / 1.5));
  CHECK_THROWS_AS(train::classification_metrics({0}, {2}, 2), std::invalid_argument);
  CHECK_THROWS_AS(train::classification_metrics({0, 1}, {0}, 2), std::invalid_argument);
}

namespace {

nn::GPTConfig classifier_config(const std::string& pool, bool tied) {
  nn::GPTConfig cfg = ag_test::gpt_config(11, 8, 8, 2, 2, 0.0);
  cfg.num_classes = 3;
  cfg.pool = base::parse_choice<nn::Pooling>(pool);
  cfg.tie_weights = tied;
  return cfg;
}

}  // namespace

TEST_CASE("num_classes puts a classifier where the LM head was", "[classify][model]") {
  for (bool tied : {true, false})
    for (bool bias : {false, true}) {
      INFO("tied " << tied << ", classifier_bias " << bias);
      nn::GPTConfig cfg = classifier_config("last", tied);
      cfg.classifier_bias = bias;
      const auto shapes = cfg.parameter_shapes();
      int64_t total = 0;
      for (const auto& [name, shape] : shapes) {
        CHECK(name.rfind("lm_head", 0) != 0);
        total += ag::shape_numel(shape);
      }
      const size_t head = shapes.size() - (bias ? 2 : 1);
      CHECK(shapes[head].first == "classifier.weight");
      CHECK(shapes[head].second == ag::Shape{3, 8});
      CHECK(shapes.back().first == (bias ? "classifier.bias" : "classifier.weight"));
      CHECK(cfg.num_parameters() == total);
      nn::GPT model(cfg, 1);
      CHECK(model.num_parameters() == total);
    }
  nn::GPTConfig one = classifier_config("last", true);
  one.num_classes = 1;
  CHECK_THROWS_WITH(one.validate(), Contains("num_classes must be 0") && Contains("got 1"));
  one.num_classes = 2;
  CHECK_THROWS_WITH(base::parse_choice<nn::Pooling>("max"),
                    Contains("pool must be 'last' or 'mean'"));
}

TEST_CASE("a checkpoint's config states num_classes and pool only for a classifier",
          "[classify][model]") {
  train::RunConfig lm;
  const nlohmann::json j = lm.to_json();
  CHECK_FALSE(j.contains("num_classes"));
  CHECK_FALSE(j.contains("pool"));
  train::RunConfig cls;
  cls.task = train::TaskHandle(train::task_named("classify"));
  cls.data = "set.tsv";
  cls.labels = {"a", "b"};
  cls.model.num_classes = 2;
  CHECK(cls.to_json().at("num_classes") == 2);
  CHECK_FALSE(cls.to_json().contains("pool"));  // "last", the default
  cls.model.pool = nn::Pooling::mean;
  const train::RunConfig back = train::RunConfig::from_json(cls.to_json());
  CHECK(back.model.num_classes == 2);
  CHECK(back.model.pool == nn::Pooling::mean);
  CHECK(back.labels == cls.labels);
  CHECK(cls.to_json().at("classifier_bias") == false);  // transformers' score layer
  CHECK_FALSE(back.model.classifier_bias);
  nlohmann::json before_the_key = cls.to_json();  // a classifier saved before: it had a bias
  before_the_key.erase("classifier_bias");
  CHECK(train::RunConfig::from_json(before_the_key).model.classifier_bias);
  CHECK_FALSE(lm.to_json().contains("classifier_bias"));
  train::RunConfig wrong;
  wrong.model.num_classes = 2;
  CHECK_THROWS_WITH(wrong.validate(), Contains("--task classify"));
}

TEST_CASE("padding never changes a row's logits, with either pool", "[classify][model]") {
  for (const char* pool : {"last", "mean"}) {
    INFO("pool " << pool);
    nn::GPT model(classifier_config(pool, true), 3);
    model.eval();
    ag::NoGradGuard no_grad;
    const std::vector<int64_t> row{4, 1, 7};
    const ag::Tensor alone = model.forward(ag::from_vector(row, {1, 3})).logits;
    for (int64_t pad : {0, 10}) {
      INFO("pad " << pad);
      // row 0: three tokens and two of padding; row 1: five real tokens
      const ag::Tensor ids =
          ag::from_vector(std::vector<int64_t>{4, 1, 7, pad, pad, 2, 9, 9, 3, 5}, {2, 5});
      const ag::Tensor lengths = ag::from_vector(std::vector<int64_t>{3, 5}, {2});
      const ag::Tensor batched = model.forward(ids, ag::Tensor(), lengths).logits;
      REQUIRE(batched.shape() == ag::Shape{2, 3});
      ag_test::require_values(batched.select(0, 0), alone.select(0, 0).to_vector(), 1e-5);
      const ag::Tensor second =
          model.forward(ag::from_vector(std::vector<int64_t>{2, 9, 9, 3, 5}, {1, 5})).logits;
      ag_test::require_values(batched.select(0, 1), second.select(0, 0).to_vector(), 1e-5);
    }
    const ag::Tensor bad = ag::from_vector(std::vector<int64_t>{0, 5}, {2});
    CHECK_THROWS_WITH(model.forward(ag::zeros({2, 5}, ag::DType::Int64), ag::Tensor(), bad),
                      Contains("row 0 has length 0"));
  }
}

TEST_CASE("a classifier starts from a language model's checkpoint with a fresh head",
          "[classify][model][init]") {
  for (bool tied : {true, false}) {
    INFO("tied " << tied);
    nn::GPTConfig lm_cfg = ag_test::gpt_config(11, 8, 8, 2, 2, 0.0);
    lm_cfg.tie_weights = tied;
    nn::GPT lm(lm_cfg, 5);
    const io::Checkpoint init = ag_test::init_checkpoint(lm);

    train::RunConfig run;
    run.task = train::TaskHandle(train::task_named("classify"));
    run.model.pool = nn::Pooling::mean;
    run.model_keys_given = {"pool"};
    train::take_model_of(init, run);
    CHECK(run.model.num_classes == 0);  // the task's, not the checkpoint's
    CHECK(run.model.pool == nn::Pooling::mean);
    run.model.num_classes = 2;  // what the labels make it
    CHECK(train::init_head_is_fresh(init, run.model));
    CHECK_THROWS(train::check_weights_fit(init, run.model));
    train::check_init_fits(init, run.model);
    nn::GPT classifier(run.model, 9);
    const nn::GPT fresh(run.model, 9);
    train::load_init_weights(init, classifier);
    const nn::StateDict mine = classifier.named_parameters(), before = fresh.named_parameters();
    const nn::StateDict theirs = lm.named_parameters();
    for (size_t i = 0; i < mine.size(); ++i) {
      INFO(mine[i].first);
      if (mine[i].first.rfind("classifier.", 0) == 0)
        CHECK(ag_test::bit_equal(mine[i].second, before[i].second));
      else
        CHECK(ag_test::bit_equal(mine[i].second, theirs[i].second));
    }
  }
}

TEST_CASE("mangled classification files read or fail with a DataError, never otherwise",
          "[classify][data][hostile]") {
  const std::string seed =
      "text,label\n\"a, \"\"b\"\"\nc\",spam\nplain \xc3\xa9t\xc3\xa9,ham\r\n\"x\",ham\n";
  const char alphabet[] = {',', '"', '\n', '\r', '\t', 'a', ' ', '\xc3', '\xa9', '\xff', '\0'};
  std::mt19937 rng(26);
  TempDir dir;
  int read_fine = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = seed;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % (bytes.size() + 1);
      const char c = alphabet[rng() % sizeof alphabet];
      switch (rng() % 3) {
        case 0: bytes.insert(at, 1, c); break;
        case 1:
          if (at < bytes.size()) bytes.erase(at, 1);
          break;
        default:
          if (at < bytes.size()) bytes[at] = c;
      }
    }
    INFO("input: " << base::printable(bytes));
    const std::string path = dir.write("m.csv", bytes);
    try {
      const data::TaskExamples t = read(path, classify_options(8));
      for (const auto& ex : t.examples) {
        REQUIRE(!ex.ids.empty());
        REQUIRE(static_cast<int64_t>(ex.ids.size()) <= 8);
        REQUIRE(ex.label >= 0);
        REQUIRE(ex.label < static_cast<int64_t>(t.labels.size()));
      }
      ++read_fine;
    } catch (const data::DataError& e) {
      REQUIRE(std::string(e.what()).find('\n') == std::string::npos);
    }
  }
  CHECK(read_fine > 100);  // the mutations leave many files readable
}

TEST_CASE("a classifier's declared activations bound what its training step holds",
          "[classify][model][description]") {
  for (const char* pool : {"last", "mean"}) {
    INFO("pool " << pool);
    nn::GPTConfig c = ag_test::gpt_config(65, 32, 64, 4, 2, 0.1);
    c.num_classes = 4;
    c.pool = base::parse_choice<nn::Pooling>(pool);
    const int64_t B = 8, T = c.context_length;
    nn::GPT model(c, 6);
    std::vector<int64_t> ids(static_cast<size_t>(B * T)), lengths, labels;
    ag::Generator gen(6);
    for (auto& id : ids) id = static_cast<int64_t>(gen.next_u64() % 65);
    for (int64_t b = 0; b < B; ++b)
      lengths.push_back(1 + b * (T - 1) / (B - 1)), labels.push_back(b % 4);
    nn::Footprint f(T, true);
    {
      nn::ShapeOnlyScope description;
      nn::GPT(c, 0).footprint(f);
    }
    // the head's terms are per sequence, declared per token (an upper bound)
    double head_terms = 0;
    for (const auto& t : f.saved)
      if (t.name.rfind("classifier", 0) == 0) head_terms += t.bytes;
    const double tokens = static_cast<double>(B * T);
    const double declared = tokens * f.saved_bytes_per_token() + f.per_step_bytes();
    const auto before = ag::allocator_stats();
    const auto out = model.forward(ag::from_vector(ids, {B, T}), ag::from_vector(labels, {B}),
                                   ag::from_vector(lengths, {B}));
    const double held = static_cast<double>(ag::allocator_stats().live_bytes - before.live_bytes);
    CHECK(held <= 1.02 * declared);
    // pooling the last token, nothing keeps ln_f's output (declared by ln_f, read by the
    // LM head's and mean pooling's backward): one row of C floats per token fewer
    const double unread = std::string(pool) == "last" ? 4.0 * static_cast<double>(c.d_model) : 0;
    CHECK(held >= 0.98 * (declared - tokens * (head_terms + unread)));
    out.loss.backward();
  }
}
