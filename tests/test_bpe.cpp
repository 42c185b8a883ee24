// data/bpe.h and data/pretokenize.h: the byte-level BPE tokenizer. Merges worked out by
// hand, the tie-break, round trips of hostile Unicode, invalid UTF-8, the fast encoder
// against a naive reading of the merge rules, the incremental trainer against a naive one
// that recounts every pair for every merge, and text in chunks against text in one piece.
#include <fmt/format.h>
#include <omp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <random>

#include "base/utf8.h"
#include "data/bpe.h"
#include "data/corpus.h"
#include "support.h"

using Catch::Matchers::Contains;
using Merge = data::BpeTokenizer::Merge;
using Merges = std::vector<Merge>;

namespace {

std::vector<std::string> pieces_of(const std::string& text, const std::string& pattern) {
  data::SplitPattern compiled(pattern);
  data::PieceMatcher matcher(compiled);
  std::vector<std::string> pieces;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = matcher.piece_end(text, pos);
    pieces.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return pieces;
}

std::vector<std::string> gpt4_pieces(const std::string& text) {
  return pieces_of(text, std::string(data::kGpt4SplitPattern));
}

// The merge rules read literally: while some adjacent pair is a merge, replace the one
// with the lowest merge index (the leftmost of equals) by that merge's token.
std::vector<int64_t> naive_encode(const data::BpeTokenizer& tok, const std::string& text) {
  std::map<Merge, uint32_t> rank;
  for (size_t i = 0; i < tok.merges().size(); ++i) rank[tok.merges()[i]] = static_cast<uint32_t>(i);
  std::vector<int64_t> out;
  for (const std::string& piece : pieces_of(text, tok.split_pattern())) {
    std::vector<uint32_t> ids(piece.begin(), piece.end());
    for (auto& id : ids) id &= 0xFF;
    for (;;) {
      size_t best_pos = 0;
      uint32_t best = UINT32_MAX;
      for (size_t i = 0; i + 1 < ids.size(); ++i)
        if (auto it = rank.find({ids[i], ids[i + 1]}); it != rank.end() && it->second < best)
          best = it->second, best_pos = i;
      if (best == UINT32_MAX) break;
      ids[best_pos] = 256 + best;
      ids.erase(ids.begin() + best_pos + 1);
    }
    out.insert(out.end(), ids.begin(), ids.end());
  }
  return out;
}

// Training without the incremental bookkeeping: recount every pair of every piece before
// each merge; most frequent pair first, ties to the smallest (left, right).
Merges naive_train(const std::string& text, size_t n_merges, const std::string& pattern) {
  std::map<std::string, int64_t> counts;
  for (const std::string& p : pieces_of(text, pattern)) ++counts[p];
  std::vector<std::pair<std::vector<uint32_t>, int64_t>> words;
  for (const auto& [piece, count] : counts) {
    std::vector<uint32_t> ids(piece.begin(), piece.end());
    for (auto& id : ids) id &= 0xFF;
    words.emplace_back(ids, count);
  }
  Merges merges;
  while (merges.size() < n_merges) {
    std::map<Merge, int64_t> pairs;
    for (const auto& [ids, count] : words)
      for (size_t i = 0; i + 1 < ids.size(); ++i) pairs[{ids[i], ids[i + 1]}] += count;
    if (pairs.empty()) break;
    auto best = pairs.begin();  // ascending pairs: the first of the highest count wins
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (it->second > best->second) best = it;
    const Merge m = best->first;
    const auto id = static_cast<uint32_t>(256 + merges.size());
    merges.push_back(m);
    for (auto& [ids, count] : words) {
      std::vector<uint32_t> merged;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i + 1 < ids.size() && ids[i] == m.first && ids[i + 1] == m.second) {
          merged.push_back(id);
          ++i;
        } else {
          merged.push_back(ids[i]);
        }
      }
      ids = merged;
    }
  }
  return merges;
}

// Random UTF-8 with what pre-tokenization and merging must survive: multi-byte and
// combining characters, emoji, CRLF, NUL, contractions, runs long enough (> 128 bytes) to
// take the encoder's heap path.
std::string random_text(std::mt19937& rng, size_t n_parts) {
  static const std::vector<std::string> parts = {"a",
                                                 "b",
                                                 "e",
                                                 "th",
                                                 "the",
                                                 " ",
                                                 " ",
                                                 "  ",
                                                 "\n",
                                                 "\r\n",
                                                 "1",
                                                 "23",
                                                 "é",
                                                 "e\u0301",
                                                 "你",
                                                 "好",
                                                 "🙂",
                                                 "👩🏽‍💻",
                                                 "'s",
                                                 "'LL",
                                                 "!",
                                                 "?!",
                                                 ".",
                                                 "\t",
                                                 std::string(1, '\0'),
                                                 "ש",
                                                 "ע",
                                                 "\u00a0",
                                                 "Ω"};
  std::string s;
  for (size_t i = 0; i < n_parts; ++i) {
    const uint32_t r = rng() % 1000;
    if (r == 0)
      s += std::string(150 + rng() % 200, 'a');
    else if (r == 1)
      s += std::string(150 + rng() % 200, ' ');
    else if (r == 2)
      s += std::string(130 + rng() % 50, '7');
    else
      s += parts[rng() % parts.size()];
  }
  return s;
}

std::string decode_all(const data::BpeTokenizer& tok, const std::vector<uint32_t>& ids) {
  return tok.decode(std::vector<int64_t>(ids.begin(), ids.end()));
}

// OpenMP's thread count for a scope, restored after.
struct Threads {
  explicit Threads(int n) : saved(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved); }
  int saved;
};

// Encodes text with a pattern, checking it decodes back, and returns the seconds it took; a
// pattern refused as it runs is fine too (bounded is what counts).
double seconds_to_encode(const char* pattern, const std::string& text) {
  const data::BpeTokenizer tok({}, pattern);
  const auto start = std::chrono::steady_clock::now();
  std::vector<uint32_t> ids;
  try {
    tok.encode_append(text, ids);
    REQUIRE(decode_all(tok, ids) == text);
  } catch (const std::runtime_error& e) {
    REQUIRE_THAT(e.what(), Contains("split pattern"));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("bpe learns the merges worked out by hand", "[bpe]") {
  // "aaabdaaabac" is one piece (all letters). Pairs: aa 4, ab 2, the rest 1.
  //   aa -> 256: occurrences merge left to right, "aaa" -> [256, a]: X a b d X a b a c
  //   (256,a) and ab both count 2: the tie goes to the smaller pair, (97,98) -> 257
  //   X Y d X Y a c: (256,257) counts 2 -> 258, leaving Z d Z a c, every pair once
  //   smallest first: (97,99) "ac" -> 259; (100,258) "daaab" -> 260; (258,260) -> 261;
  //   (261,259) -> 262, the whole piece. No pair is left: 7 merges, whatever was asked.
  const data::BpeTokenizer tok = data::BpeTokenizer::train("aaabdaaabac", 1000);
  REQUIRE(tok.merges() ==
          Merges{{97, 97}, {97, 98}, {256, 257}, {97, 99}, {100, 258}, {258, 260}, {261, 259}});
  REQUIRE(tok.vocab_size() == 263);
  REQUIRE(tok.token_bytes(258) == "aaab");
  REQUIRE(tok.encode("aaabdaaabac") == std::vector<int64_t>{262});
  REQUIRE(tok.encode("aaab") == std::vector<int64_t>{258});
  REQUIRE(tok.encode("aaaa") == std::vector<int64_t>{256, 256});
  REQUIRE(data::BpeTokenizer::train("aaabdaaabac", 259).merges() ==
          Merges{{97, 97}, {97, 98}, {256, 257}});
}

TEST_CASE("bpe merges never cross pieces", "[bpe]") {
  // GPT-4's pattern cuts "the cat the hat" into "the", " cat", " the", " hat": a space
  // starts a word, so "e " never forms. Pairs counting 2: "at" (97,116), "he" (104,101),
  // "th" (116,104); ties to the smallest: "at" -> 256, "he" -> 257, then "t"+"he" counts 2
  // -> 258; then all count 1 and the smallest is " c" (32,99) -> 259.
  const std::string text = "the cat the hat";
  REQUIRE(gpt4_pieces(text) == std::vector<std::string>{"the", " cat", " the", " hat"});
  const data::BpeTokenizer tok = data::BpeTokenizer::train(text, 1000);
  REQUIRE(tok.merges().size() >= 4);
  REQUIRE(Merges(tok.merges().begin(), tok.merges().begin() + 4) ==
          Merges{{97, 116}, {104, 101}, {116, 257}, {32, 99}});
  for (int64_t id = 256; id < tok.vocab_size(); ++id) {
    const std::string bytes(tok.token_bytes(static_cast<uint32_t>(id)));
    INFO("token " << id << " '" << bytes << "'");
    REQUIRE((bytes == "the" || std::string(" cat the hat").find(bytes) != std::string::npos));
    REQUIRE(bytes.find(' ', 1) == std::string::npos);  // a space only ever starts a token
  }
  REQUIRE(tok.encode(text) == std::vector<int64_t>{258, 262, 261, 263});
}

TEST_CASE("bpe breaks ties by the smallest left id then the smallest right id", "[bpe]") {
  data::BpeTrainer trainer;
  trainer.add_piece("zb", 2);  // (122, 98)
  trainer.add_piece("yb", 2);  // (121, 98)
  trainer.add_piece("ya", 2);  // (121, 97)
  trainer.add_piece("zz", 3);  // (122, 122): the highest count wins over smaller ids
  REQUIRE(trainer.train(260).merges() == Merges{{122, 122}, {121, 97}, {121, 98}, {122, 98}});
}

TEST_CASE("the gpt4 split pattern cuts pieces as cl100k does", "[bpe]") {
  using P = std::vector<std::string>;
  REQUIRE(gpt4_pieces("Hello world") == P{"Hello", " world"});
  REQUIRE(gpt4_pieces("don't WE'LL") == P{"don", "'t", " WE", "'LL"});
  REQUIRE(gpt4_pieces("1234567") == P{"123", "456", "7"});
  REQUIRE(gpt4_pieces("x  y") == P{"x", " ", " y"});
  REQUIRE(gpt4_pieces("a\n\nb") == P{"a", "\n\n", "b"});
  REQUIRE(gpt4_pieces("ok!!!\n  go") == P{"ok", "!!!\n", " ", " go"});
  REQUIRE(gpt4_pieces("(Ünïcödé) 你好") == P{"(Ünïcödé", ")", " 你好"});
  REQUIRE(gpt4_pieces("end   ") == P{"end", "   "});
}

TEST_CASE("bpe pieces cover every byte when the pattern skips some", "[bpe]") {
  // [a-z]+ matches only lower-case runs: the bytes between matches are pieces too.
  REQUIRE(pieces_of("Hello, world! 42", "[a-z]+") ==
          std::vector<std::string>{"H", "ello", ", ", "world", "! 42"});
  REQUIRE(pieces_of("xyz", "q") == std::vector<std::string>{"xyz"});
  REQUIRE(pieces_of("baab", "a*") == std::vector<std::string>{"b", "aa", "b"});  // never empty
  REQUIRE(pieces_of("abc", "") == std::vector<std::string>{"abc"});
  const data::BpeTokenizer tok = data::BpeTokenizer::train("Hello, world! 42 hello", 300, "[a-z]+");
  REQUIRE(tok.decode(tok.encode("Say HELLO, world!\n")) == "Say HELLO, world!\n");
}

TEST_CASE("bpe cuts pieces longer than a megabyte the same way whole or chunked", "[bpe]") {
  const size_t mib = data::PieceMatcher::kMaxPieceBytes;
  std::vector<size_t> sizes;
  for (const std::string& p : gpt4_pieces(std::string(3 * mib, ' '))) sizes.push_back(p.size());
  REQUIRE(sizes == std::vector<size_t>{mib, mib, mib});
  // A long run of a two-byte character: the cut falls on a character boundary.
  std::string accents;
  for (int i = 0; i < 600001; ++i) accents += "é";  // cut at 1 MiB: inside no character
  const std::string text = std::string(mib + 5, ' ') + "x" + std::string(mib + 1, 'a') + "é" +
                           std::string(1500000, '!') + "\n" + accents + " end";
  const data::BpeTokenizer tok =
      data::BpeTokenizer::train(text.substr(0, 4000) + text.substr(text.size() - 4000), 300);
  std::vector<uint32_t> whole, streamed;
  tok.encode_append(text, whole);
  REQUIRE(decode_all(tok, whole) == text);
  data::BpeStreamEncoder stream(tok);
  for (size_t pos = 0; pos < text.size(); pos += 100000)
    stream.add(std::string_view(text).substr(pos, 100000), streamed);
  stream.finish(streamed);
  REQUIRE(streamed == whole);
}

TEST_CASE("a split pattern that backtracks without end is stopped with an error", "[bpe]") {
  const data::BpeTokenizer tok({}, "(a+)+$");
  REQUIRE_THROWS_WITH(
      tok.encode(std::string(40, 'a') + "b"),
      Contains("split pattern '(a+)+$': matching at byte 0") && Contains("match limit"));
}

TEST_CASE(
    "a split pattern that looks to the end of the text for each piece is refused, not "
    "quadratic",
    "[bpe]") {
  // each piece is one byte, and finding it scans every byte after it: 300 KB took minutes
  const std::string run(300000, 'a');
  for (const char* pattern : {"a*b|."}) {
    const data::BpeTokenizer tok({}, pattern);
    REQUIRE_THROWS_WITH(tok.encode(run), Contains(fmt::format("split pattern '{}'", pattern)) &&
                                             Contains("quadratic"));
    data::BpeStreamEncoder stream(tok);
    std::vector<uint32_t> ids;
    stream.add(run, ids);
    REQUIRE_THROWS_WITH(stream.finish(ids), Contains("quadratic"));
  }
  std::string words;
  while (words.size() < 300000) words += "the cat sat on the mat\n";
  REQUIRE(gpt4_pieces(words).size() == 7 * (words.size() / 23));
}

TEST_CASE("a split pattern that scans a run from every byte of it encodes in linear time",
          "[bpe]") {
  // An unanchored search from every byte of a run, each scanning the whole run before
  // failing, was quadratic ((?:a|b)++c|\n: 42 s on 300 KB), and no PCRE2 limit counts a
  // possessive run. Anchored attempts skip what a failed one looked at.
  const auto runs = [](size_t bytes, size_t run, const std::string& after) {
    std::string text;
    while (text.size() < bytes) text += std::string(run, 'a') + after;
    return text;
  };
  // runs of a ended by nothing, a space or c and a newline; the first two patterns took
  // 30 s and 7.6 s on 300 KB before
  for (const char* pattern : {"(?:a|b)++c|\n", "(a|b)+c|\n", "a++b|\n", "[^\n]++x|\n"}) {
    for (const auto& run_and_end : std::vector<std::pair<size_t, std::string>>{
             {50, ""}, {5000, " "}, {300000, " "}, {5000, "c\n"}}) {
      // named copies, not a structured binding: clang 14 cannot capture one in a lambda
      const size_t run = run_and_end.first;
      const std::string& after = run_and_end.second;
      INFO(pattern << " on runs of " << run << " ended by '" << after << "'");
      const auto shortest = [&](size_t bytes) {  // of three: the least disturbed by other work
        const std::string text = runs(bytes, run, after);
        double best = 1e9;
        for (int i = 0; i < 3; ++i) best = std::min(best, seconds_to_encode(pattern, text));
        return best;
      };
      const double once = shortest(150000), twice = shortest(300000);
      INFO(once << " s for 150 KB, " << twice << " s for 300 KB");
      REQUIRE(twice < 3 * once + 0.1);
      REQUIRE(once < (ag_test::kAddressSanitizer ? 30.0 : 3.0));
    }
  }
}

TEST_CASE("a split pattern that backtracks through its first window at every byte is bounded",
          "[bpe]") {
  // No lookahead and no run past the window: each one-byte piece costs up to PCRE2's match
  // limit for the first window (about 6000 steps), never more, so encoding stays linear; the
  // worst found here, with a lookbehind at every step, takes about 6 s for 300 KB under load.
  const std::string run(300000, 'a');
  for (const char* pattern :
       {"(?:(?<=a)\\w){0,1000}(?<=b)|.", "[^b]{0,1000}b|.", "a{0,1020}+b|."}) {
    INFO(pattern);
    const double seconds = seconds_to_encode(pattern, run);
    INFO(seconds << " s for 300 KB");
    REQUIRE(seconds < (ag_test::kAddressSanitizer ? 120.0 : 30.0));
  }
}

TEST_CASE("a split pattern whose cost no limit bounds is refused when it is read", "[bpe]") {
  // a lookahead of unbounded length can scan to the end of the text for every piece
  for (const char* pattern : {".(?=[\\s\\S]*z)|\\n", ".(?=a*+[bc])|\\n", "\\w(?=\\w*!)|\\W|\\w",
                              "\\w+(?=[\\s\\S]*$)|\\s+|.", "a(*pla:b+)|.", "a(?!(?:b|c)+)|."}) {
    INFO(pattern);
    REQUIRE_THROWS_WITH(data::SplitPattern(pattern),
                        Contains("lookahead at offset") && Contains("quadratic"));
  }
  // constructs whose cost PCRE2's limits do not bound
  const std::vector<std::pair<const char*, const char*>> refused = {
      {"(a)\\1|.", "backreference"}, {"(?<n>a)\\k<n>|.", "backreference"},
      {"(a|b(?1))|.", "recursion"},  {"(?R)?a|.", "recursion"},
      {"(?C1)a|.", "callout"},       {"(?x) a # (?=", "extended"},
      {"a(?*b+)|.", "non-atomic"},   {"(?<n>a)(?&n)|.", "recursion"},
  };
  for (const auto& [pattern, why] : refused) {
    INFO(pattern);
    REQUIRE_THROWS_WITH(data::SplitPattern(pattern), Contains(why));
  }
  // what only looks like those: escaped, in a class, in a comment or quoted
  for (const char* pattern : {"\\(\\?=a*\\)|.", "[(?=a*)]|.", "(?#(?=a*)a|.", "\\Q(?=a*)\\E|.",
                              "[]\\\\(?=]+|.", "[[:alpha:]](?=b)|."}) {
    INFO(pattern);
    REQUIRE_NOTHROW(data::SplitPattern(pattern));
  }
  // the patterns real models use: GPT-2's, GPT-4's, Llama 3's, Qwen2's
  for (
      const std::string_view pattern :
      {data::kGpt2SplitPattern, data::kGpt4SplitPattern,
       std::string_view(
           R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
       std::string_view(
           R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")})
    REQUIRE_NOTHROW(data::SplitPattern(std::string(pattern)));
}

TEST_CASE("the gpt2 and gpt4 split patterns stay inside the limits on long runs", "[bpe]") {
  const size_t mib = data::PieceMatcher::kMaxPieceBytes;
  // a short piece whose pattern scans a whole run after it, at the start of the text
  std::string text = " \n" + std::string(mib - 100, ' ') + "x";
  for (int i = 0; i < 3; ++i)
    text += " \n\t\n" + std::string(300000, '\t') + "y" + std::string(200000, '.') + "1234567";
  text += std::string(70000, 'z') + " " + std::string(2 * mib, '\n');
  for (const auto pattern : {data::kGpt4SplitPattern, data::kGpt2SplitPattern}) {
    std::string joined;
    for (const std::string& p : pieces_of(text, std::string(pattern))) joined += p;
    REQUIRE(joined == text);
  }
}

TEST_CASE("bpe round trips hostile unicode", "[bpe]") {
  const std::vector<std::string> texts = {
      "",
      "e\u0301\u0302\u0303 a\u0308 Z\u0351\u0352\u0353\u0354",  // combining marks
      "👩‍👩‍👧‍👦 👍🏿 🧑🏽‍🚀 🏳️‍🌈 🇯🇵",  // ZWJ, skin
                                                                                     // tones, flags
      "日本語のテキスト、中文文本，한국어 텍스트",                                   // CJK
      "שלום עולם مرحبا بالعالم \u202Eevil\u202C",              // RTL and an override
      std::string("nul\0inside\0\0", 13),                      // NUL bytes
      "line\r\nline\r\n\r\n\n\r",                              // CRLF
      std::string(5000, ' ') + "x" + std::string(3000, '\n'),  // long whitespace runs
      std::string(4000, '9') + " " + std::string(3001, 'a'),   // long digit and letter runs
      "\U0010FFFF\uFFFD\uFEFF\u200B\u2028\u2029\u00A0",        // edge code points
      "I'm you'RE it's 'tis ''' can't",                        // contractions
  };
  std::string all;
  for (const auto& t : texts) all += t + "\n";
  const data::BpeTokenizer untrained({});
  const data::BpeTokenizer trained = data::BpeTokenizer::train(all + all, 700);
  REQUIRE(trained.vocab_size() > 400);
  for (const data::BpeTokenizer* tok : {&untrained, &trained}) {
    for (const std::string& t : texts) {
      INFO("text of " << t.size() << " bytes, vocabulary " << tok->vocab_size());
      const std::vector<int64_t> ids = tok->encode(t);
      for (const int64_t id : ids) REQUIRE((id >= 0 && id < tok->vocab_size()));
      REQUIRE(tok->decode(ids) == t);
      REQUIRE(ids == naive_encode(*tok, t));
    }
  }
  REQUIRE(untrained.encode("ab") == std::vector<int64_t>{97, 98});  // no merges: the bytes
  REQUIRE(trained.encode(texts[7]).size() < 100);  // the runs merged into long tokens
}

TEST_CASE("bpe refuses invalid utf8 naming the byte offset", "[bpe]") {
  const data::BpeTokenizer tok({{97, 98}});
  REQUIRE_THROWS_WITH(tok.encode("ab\xFF"
                                 "cd"),
                      Contains("invalid UTF-8") && Contains("0xFF at offset 2"));
  REQUIRE_THROWS_WITH(tok.encode("abc\xE2\x82"), Contains("offset 3") && Contains("cut off"));
  REQUIRE_THROWS_WITH(tok.encode("\xC0\xAF"), Contains("overlong encoding at offset 0"));
  REQUIRE_THROWS_WITH(tok.encode("ok \xED\xA0\x80"), Contains("surrogate U+D800 at offset 3"));
  REQUIRE_THROWS_WITH(tok.encode("\xE2\x28\xA1"),
                      Contains("0x28 at offset 1 is not a continuation"));
  REQUIRE_THROWS_WITH(tok.encode(std::string(3 << 20, 'a') + "\xFE"), Contains("offset 3145728"));

  SECTION("also when the text comes in chunks, counted over the whole text") {
    data::BpeTrainer trainer;
    trainer.add_text("hello ");
    trainer.add_text("w\xC3");  // the first byte of "é": waits for the next chunk
    trainer.add_text("\xA9 ok");
    REQUIRE_THROWS_WITH(trainer.add_text("\x80"), Contains("0x80 at offset 12"));
    data::BpeTrainer cut;
    cut.add_text("abc\xE2\x82");
    REQUIRE_THROWS_WITH(cut.end_text(), Contains("offset 3") && Contains("cut off"));
    REQUIRE_THROWS_WITH(trainer.add_piece("\xFF"), Contains("offset 0"));
  }
}

TEST_CASE("bpe decode keeps bytes that stop inside a character", "[bpe]") {
  const data::BpeTokenizer tok({});
  const std::vector<int64_t> ids = tok.encode("é!");  // 0xC3 0xA9 0x21
  REQUIRE(ids == std::vector<int64_t>{0xC3, 0xA9, 0x21});
  const std::string head = tok.decode({ids[0]});
  REQUIRE(head == "\xC3");  // not UTF-8 on its own, nothing replaced
  REQUIRE(head + tok.decode({ids[1], ids[2]}) == "é!");
  REQUIRE(base::replace_invalid_utf8(head + "!") == "\uFFFD!");
  REQUIRE(base::replace_invalid_utf8("a\xE2\x82\xFF"
                                     "b\xED\xA0\x80") == "a\uFFFD\uFFFDb\uFFFD");
  REQUIRE_THROWS_WITH(tok.decode({97, 256}), Contains("id 256 at position 1"));
  REQUIRE_THROWS_WITH(tok.decode({-3}), Contains("id -3"));
}

TEST_CASE("bpe fast encode equals the naive merge rules on random text", "[bpe]") {
  std::mt19937 rng(12345);
  const data::BpeTokenizer tok = data::BpeTokenizer::train(random_text(rng, 40000), 1200);
  REQUIRE(tok.vocab_size() == 1200);
  for (int round = 0; round < 20; ++round) {
    const std::string text = random_text(rng, 2000);
    INFO("round " << round);
    REQUIRE(tok.encode(text) == naive_encode(tok, text));
  }

  SECTION("split over threads, also when chunks do not start at piece boundaries") {
    const Threads two(2);
    const std::string text = random_text(rng, 700000);  // megabytes: chunked
    REQUIRE(text.size() > (size_t{3} << 19));
    REQUIRE(tok.encode(text) == naive_encode(tok, text));
    // Fixed 7-character pieces: a chunk start after a newline is rarely a piece start.
    const data::BpeTokenizer sevens =
        data::BpeTokenizer::train(text.substr(0, 100000), 600, "(?s).{1,7}");
    REQUIRE(sevens.encode(text) == naive_encode(sevens, text));
  }
}

TEST_CASE("bpe incremental training equals recounting every pair for every merge", "[bpe]") {
  std::mt19937 rng(7);
  const std::string text = random_text(rng, 6000);
  const std::string pattern(data::kGpt4SplitPattern);
  const data::BpeTokenizer tok = data::BpeTokenizer::train(text, 256 + 300, pattern);
  REQUIRE(tok.merges() == naive_train(text, 300, pattern));
  const data::Corpus corpus = data::builtin_corpus(3, 20000);
  REQUIRE(data::BpeTokenizer::train(corpus.text, 256 + 400).merges() ==
          naive_train(corpus.text, 400, pattern));
}

TEST_CASE("bpe trained tokenizer compresses held out text better than bytes", "[bpe]") {
  const data::Corpus train = data::builtin_corpus(1, 200000);
  const data::Corpus held_out = data::builtin_corpus(2, 50000);
  const data::BpeTokenizer tok = data::BpeTokenizer::train(train.text, 512);
  const auto ids = tok.encode(held_out.text);
  const double bytes_per_token = static_cast<double>(held_out.text.size()) / ids.size();
  INFO("bytes per token " << bytes_per_token);
  REQUIRE(bytes_per_token > 2.0);
  REQUIRE(tok.decode(ids) == held_out.text);
}

TEST_CASE("bpe refuses bad merges naming the merge index", "[bpe]") {
  using Tok = data::BpeTokenizer;
  REQUIRE_NOTHROW(Tok({{97, 98}, {256, 99}, {257, 257}}));
  REQUIRE_THROWS_WITH(Tok({{97, 98}, {256, 300}}), Contains("merge 1 (256, 300)") &&
                                                       Contains("token 300") &&
                                                       Contains("ids below 257"));
  REQUIRE_THROWS_WITH(Tok({{97, 98}, {257, 97}}), Contains("merge 1 (257, 97)"));  // itself
  REQUIRE_THROWS_WITH(Tok({{97, 98}, {99, 100}, {97, 98}}),
                      Contains("merge 2 (97, 98) repeats merge 0"));
  REQUIRE_THROWS_WITH(Tok({{UINT32_MAX, 0}}), Contains("merge 0"));
  Merges doubling = {{97, 97}};  // 2, 4, 8, ... bytes: a few merges must not take all memory
  for (uint32_t i = 0; i < 40; ++i) doubling.emplace_back(256 + i, 256 + i);
  REQUIRE_THROWS_WITH(Tok(doubling), Contains("merge 14") && Contains("32768 bytes"));
  REQUIRE_THROWS_WITH(Tok({}, "(unclosed"),
                      Contains("split pattern does not compile") && Contains("offset 9"));
  REQUIRE_THROWS_WITH(Tok({}, "\xFF"), Contains("split pattern does not compile"));
  REQUIRE_THROWS_WITH(Tok({}, "a\\Cb"), Contains("split pattern does not compile"));
}

TEST_CASE("bpe refuses a vocabulary smaller than the 256 bytes", "[bpe]") {
  REQUIRE_THROWS_WITH(data::BpeTokenizer::train("some text", 255),
                      Contains("at least 256") && Contains("255"));
  REQUIRE_THROWS_WITH(data::BpeTokenizer::train("some text", -1), Contains("-1"));
  const data::BpeTokenizer bytes = data::BpeTokenizer::train("some text", 256);
  REQUIRE(bytes.merges().empty());
  REQUIRE(bytes.vocab_size() == 256);
  REQUIRE(bytes.type() == "bpe");
}

TEST_CASE("bpe chunked training equals one shot training", "[bpe]") {
  std::mt19937 rng(99);
  const std::string text = random_text(rng, 8000) + "tail   ";
  const std::string pattern =
      GENERATE(std::string(data::kGpt4SplitPattern), std::string("(?<=a)b+|\\w+\\b|\\s+"));
  const Merges one_shot = data::BpeTokenizer::train(text, 256 + 200, pattern).merges();
  for (const size_t chunk : {size_t{1}, size_t{2}, size_t{7}, size_t{100}, size_t{4096}}) {
    INFO("chunks of " << chunk << " bytes, pattern " << pattern);
    data::BpeTrainer trainer(pattern);
    for (size_t pos = 0; pos < text.size(); pos += chunk)
      trainer.add_text(std::string_view(text).substr(pos, chunk));
    REQUIRE(trainer.bytes_added() == text.size());
    REQUIRE(trainer.train(256 + 200).merges() == one_shot);
  }
  // Random cut points, and two texts that must not be joined into one piece.
  data::BpeTrainer trainer(pattern);
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = 1 + rng() % 300;
    trainer.add_text(std::string_view(text).substr(pos, n));
    pos += n;
  }
  trainer.end_text();
  trainer.add_text("second text");
  data::BpeTrainer whole(pattern);
  whole.add_text(text);
  whole.end_text();
  whole.add_text("second text");
  REQUIRE(trainer.train(256 + 250).merges() == whole.train(256 + 250).merges());
}

TEST_CASE("bpe stream encoder equals encoding the whole text", "[bpe]") {
  std::mt19937 rng(5);
  const std::string text = random_text(rng, 30000) + "end  ";
  const data::BpeTokenizer tok = data::BpeTokenizer::train(text, 800);
  std::vector<uint32_t> whole;
  tok.encode_append(text, whole);
  for (const size_t chunk : {size_t{1}, size_t{5}, size_t{333}, size_t{1} << 20}) {
    INFO("chunks of " << chunk << " bytes");
    data::BpeStreamEncoder stream(tok);
    std::vector<uint32_t> ids;
    for (size_t pos = 0; pos < text.size(); pos += chunk)
      stream.add(std::string_view(text).substr(pos, chunk), ids);
    stream.finish(ids);
    REQUIRE(ids == whole);
    REQUIRE(decode_all(tok, ids) == text);
  }

  SECTION("chunks of megabytes split over threads") {
    const Threads two(2);
    const std::string big = random_text(rng, 700000) + "end  ";
    std::vector<uint32_t> expected, ids;
    tok.encode_append(big, expected);
    data::BpeStreamEncoder stream(tok);
    for (size_t pos = 0; pos < big.size(); pos += 1500001)
      stream.add(std::string_view(big).substr(pos, 1500001), ids);
    stream.finish(ids);
    REQUIRE(ids == expected);
  }
}
