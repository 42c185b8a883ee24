// data/: the char tokenizer and the byte tokenizer, the train/val split, random-window
// batches, the evaluation windows (all as docs/model.md defines them), and the built-in
// corpus whose floor a bigram model cannot approach.
#include <catch2/catch.hpp>
#include <set>

#include "data/data.h"

using Catch::Matchers::Contains;

TEST_CASE("char tokenizer ids are the ranks of the sorted distinct code points") {
  auto tok = data::CharTokenizer::from_text("hello, wörld\n");
  // '\n' ' ' ',' 'd' 'e' 'h' 'l' 'o' 'r' 'w' 'ö'
  REQUIRE(tok.vocab_size() == 11);
  REQUIRE(tok.code_points().front() == '\n');
  REQUIRE(tok.code_points().back() == 0xF6);  // ö sorts after ASCII
  REQUIRE(tok.encode("hello") == std::vector<int64_t>{5, 4, 6, 6, 7});
  REQUIRE(tok.encode("ö") == std::vector<int64_t>{10});
  REQUIRE(tok.decode(tok.encode("world, hello\n")) == "world, hello\n");
  REQUIRE(tok.decode(tok.encode("wörld")) == "wörld");
}

TEST_CASE("an unknown character is an error naming it and its position") {
  auto tok = data::CharTokenizer::from_text("abc\n");
  REQUIRE_THROWS_WITH(tok.encode("ab\nxÆ"), Contains("'x' (U+0078)") && Contains("position 3") &&
                                                Contains("line 2, column 1"));
  REQUIRE_THROWS_WITH(tok.encode("abÆ"), Contains("U+00C6") && Contains("position 2"));
  REQUIRE_THROWS_WITH(tok.encode("a\tb"), Contains("U+0009"));

  SECTION("unless a replacement token is set") {
    tok.set_replacement('c');
    REQUIRE(tok.encode("aZb") == std::vector<int64_t>{1, 3, 2});
    REQUIRE_THROWS_WITH(tok.set_replacement('Z'), Contains("'Z'"));
  }
}

TEST_CASE("decoding an id outside the vocabulary is an error naming it") {
  auto tok = data::CharTokenizer::from_text("ab");
  REQUIRE_THROWS_WITH(tok.decode({0, 2}), Contains("id 2") && Contains("position 1"));
  REQUIRE_THROWS_WITH(tok.decode({-1}), Contains("id -1"));
  REQUIRE_THROWS_WITH(data::ByteTokenizer().decode({256}), Contains("256"));
}

TEST_CASE("a char vocabulary must be valid ascending code points") {
  REQUIRE_THROWS_WITH(data::CharTokenizer({'b', 'a'}), Contains("ascending"));
  REQUIRE_THROWS_WITH(data::CharTokenizer({'a', 'a'}), Contains("ascending"));
  REQUIRE_THROWS_WITH(data::CharTokenizer({0xD800}), Contains("not a valid code point"));
  REQUIRE_THROWS_WITH(data::CharTokenizer({0x110000}), Contains("not a valid code point"));
}

TEST_CASE("the byte tokenizer is total: any bytes round-trip") {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes += static_cast<char>(b);
  data::ByteTokenizer tok;
  auto ids = tok.encode(bytes);
  REQUIRE(ids.size() == 256);
  REQUIRE(ids[255] == 255);
  REQUIRE(tok.decode(ids) == bytes);
  REQUIRE(tok.vocab_size() == 256);
}

TEST_CASE("the validation split is the last fraction of the ids") {
  std::vector<int64_t> ids(100);
  for (int64_t i = 0; i < 100; ++i) ids[i] = i;
  auto s = data::split_tokens(ids, 0.1);
  REQUIRE(s.train.size() == 90);
  REQUIRE(s.val.size() == 10);
  REQUIRE(s.train.back() == 89);
  REQUIRE(s.val.front() == 90);
  REQUIRE(data::split_tokens(ids, 0.0).val.empty());
  REQUIRE_THROWS_WITH(data::split_tokens(ids, 1.0), Contains("val_fraction"));
}

TEST_CASE("batches are windows whose targets are the inputs shifted by one") {
  std::vector<int64_t> ids(50);
  for (int64_t i = 0; i < 50; ++i) ids[i] = i;  // id = position, so windows are visible
  data::BatchSampler sampler(&ids, /*batch=*/8, /*T=*/6);
  ag::Generator gen(3);
  auto [x, y] = sampler.next(gen);
  REQUIRE(x.shape() == ag::Shape{8, 6});
  REQUIRE(y.shape() == ag::Shape{8, 6});
  for (int64_t b = 0; b < 8; ++b) {
    const int64_t start = static_cast<int64_t>(x.at({b, 0}));
    REQUIRE(start >= 0);
    REQUIRE(start + 6 < 50);  // the target of the last input exists
    for (int64_t t = 0; t < 6; ++t) {
      REQUIRE(x.at({b, t}) == start + t);
      REQUIRE(y.at({b, t}) == start + t + 1);
    }
  }
  SECTION("the same generator state gives the same batches") {
    ag::Generator a(11), b(11);
    REQUIRE(sampler.next(a).first.to_vector() == sampler.next(b).first.to_vector());
  }
  SECTION("every start is reachable, including the last") {
    std::vector<int64_t> few = {0, 1, 2, 3};
    data::BatchSampler s(&few, 64, 2);  // starts 0 and 1
    std::set<double> starts;
    for (double v : s.next(gen).first.narrow(1, 0, 1).to_vector()) starts.insert(v);
    REQUIRE(starts == std::set<double>{0, 1});
  }
  REQUIRE_THROWS_WITH(data::BatchSampler(&ids, 8, 50), Contains("50"));
  REQUIRE_THROWS_WITH(data::BatchSampler(&ids, 0, 4), Contains("batch size"));
}

TEST_CASE("evaluation windows start at multiples of T and need T plus one ids") {
  auto w = data::eval_windows(10, 3);  // starts 0, 3, 6; 9 would need ids up to 12
  REQUIRE(w.size() == 3);
  REQUIRE(w[2].first == 6);
  REQUIRE(data::eval_windows(10, 4).size() == 2);  // 0, 4; 8 needs 13 ids
  REQUIRE(data::eval_windows(9, 4).size() == 2);   // 4..8 uses id 8, the last
  REQUIRE(data::eval_windows(4, 4).empty());
}

TEST_CASE("unigram and bigram baselines are exact on small examples") {
  // ids 0 1 0 1: unigram p = 1/2 each, loss ln 2
  REQUIRE_THAT(data::unigram_loss({0, 1, 0, 1}, 2),
               Catch::Matchers::WithinAbs(std::log(2.0), 1e-12));
  // train 0 1 0 1 with add-one: P(1|0) = (2+1)/(2+2) = 3/4; val 0 1: loss -ln(3/4)
  REQUIRE_THAT(data::bigram_loss({0, 1, 0, 1}, {0, 1}, 2),
               Catch::Matchers::WithinAbs(-std::log(0.75), 1e-12));
}

TEST_CASE("the built-in corpus is deterministic and a bigram model stays far above its floor") {
  data::Corpus a = data::builtin_corpus(0, 50000), b = data::builtin_corpus(0, 50000);
  REQUIRE(a.text == b.text);
  REQUIRE(a.text != data::builtin_corpus(1, 50000).text);
  REQUIRE(a.text.size() >= 50000);
  REQUIRE(a.ideal_loss > 0.2);
  REQUIRE(a.ideal_loss < 1.0);
  auto tok = data::CharTokenizer::from_text(a.text);
  auto split = data::split_tokens(tok.encode(a.text), 0.1);
  const double bigram = data::bigram_loss(split.train, split.val, tok.vocab_size());
  const double unigram = data::unigram_loss(split.val, tok.vocab_size());
  INFO("floor " << a.ideal_loss << ", bigram " << bigram << ", unigram " << unigram);
  REQUIRE(bigram > a.ideal_loss + 1.0);  // one character of context cannot recall the line
  REQUIRE(unigram > bigram);
  REQUIRE_THAT(a.description, Contains("ideal loss"));
}
