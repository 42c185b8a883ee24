// base/utf8.h: the one UTF-8 decoder, and the words every reader of text uses for bad
// bytes, whichever path (decoding, validating, streaming) finds them.
#include <catch2/catch.hpp>

#include "base/utf8.h"
#include "data/bpe.h"
#include "data/pretokenize.h"
#include "io/checkpoint_reader.h"

using Catch::Matchers::Contains;

TEST_CASE("invalid UTF-8 is an error naming the byte offset") {
  REQUIRE_THROWS_WITH(base::utf8_decode("ab\xff"), Contains("offset 2"));
  REQUIRE_THROWS_WITH(base::utf8_decode("a\xc3"), Contains("cut off") && Contains("offset 1"));
  REQUIRE_THROWS_WITH(base::utf8_decode("\xc0\xaf"), Contains("overlong"));
  REQUIRE_THROWS_WITH(base::utf8_decode("\xed\xa0\x80"), Contains("surrogate"));
  REQUIRE_THROWS_WITH(base::utf8_decode("\xf4\x90\x80\x80"), Contains("beyond U+10FFFF"));
  REQUIRE_THROWS_WITH(base::utf8_decode("\xc3\x28"),
                      Contains("continuation") && Contains("offset 1"));
  REQUIRE(base::utf8_decode("\xf0\x9f\x99\x82") == std::vector<uint32_t>{0x1F642});
}

TEST_CASE("text from a file is escaped before it reaches a terminal") {
  REQUIRE(base::printable("blocks.0.attn") == "blocks.0.attn");
  REQUIRE(base::printable("caf\xc3\xa9 \xf0\x9f\x99\x82") ==
          "caf\xc3\xa9 \xf0\x9f\x99\x82");  // é, emoji
  REQUIRE(base::printable("a\x1b[2Jb") == "a\\x1b[2Jb");
  REQUIRE(base::printable("line\nnext\ttab") == "line\\nnext\\ttab");
  REQUIRE(base::printable("line\nnext\ttab", true) == "line\nnext\ttab");
  REQUIRE(base::printable("\xc2\x9b"
                          "31m") == "\\u{009b}31m");              // C1 CSI
  REQUIRE(base::printable("x\xe2\x80\xaeyz") == "x\\u{202e}yz");  // right-to-left override
  REQUIRE(base::printable("\xff\xc3") == "\\xff\\xc3");           // not UTF-8
  REQUIRE(base::printable("\x7f") == "\\x7f");
  REQUIRE(base::describe_code_point(0x9B) == "U+009B");
}

TEST_CASE("validating and decoding name the same problem at the same offset") {
  for (const std::string bad : {"ab\xff", "a\xc3", "\xc0\xaf", "x\xed\xa0\x80", "\xf4\x90\x80\x80",
                                "\xc3\x28", "\xf0\x8d\xa0\x80"}) {
    CAPTURE(bad);
    std::string decoded, checked;
    try {
      base::utf8_decode(bad);
    } catch (const std::invalid_argument& e) {
      decoded = e.what();
    }
    try {
      base::check_utf8(bad);
    } catch (const std::invalid_argument& e) {
      checked = e.what();
    }
    REQUIRE_THAT(decoded, Contains("invalid UTF-8: "));
    REQUIRE(checked == decoded);
  }
  // an overlong form of a surrogate is reported as overlong, as it always was
  REQUIRE_THROWS_WITH(base::check_utf8("\xf0\x8d\xa0\x80"), Contains("overlong"));
  // offsets count from where the text sits in a longer one
  REQUIRE_THROWS_WITH(base::check_utf8("ab\xff", 1000), Contains("offset 1002"));
}

TEST_CASE("a stream's chunk may end inside a character and nowhere else") {
  REQUIRE(base::check_utf8_prefix("ab\xe2\x82") == 2);  // the euro sign's first two bytes
  REQUIRE(base::check_utf8_prefix("ab\xe2\x82\xac") == 5);
  REQUIRE_THROWS_WITH(base::check_utf8_prefix("ab\xff\xe2"), Contains("offset 2"));
  REQUIRE(base::utf8_complete_prefix("ab\xe2\x82") == 2);
  REQUIRE(base::utf8_complete_prefix("ab\xe2\x82\xac") == 5);
  // the text stream BPE encodes through holds the cut character back
  data::TextStream stream(0);
  stream.add("ab\xe2\x82");
  REQUIRE(stream.subject() == "ab");
  stream.add("\xac");
  REQUIRE(stream.subject() == "ab\xe2\x82\xac");
  stream.add("\xe2");
  REQUIRE_THROWS_WITH(stream.finish(), Contains("cut off") && Contains("offset 5"));
}

TEST_CASE("checkpoint messages escape what the one decoder refuses") {
  // overlong forms and surrogates were passed through by the checkpoint reader's own
  // decoder; the one decoder refuses them, so they are escaped byte by byte
  REQUIRE(io::detail::printable("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");
  REQUIRE(io::detail::printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  // and a right-to-left override, which reorders what a terminal shows
  REQUIRE(io::detail::printable("x\xe2\x80\xaeyz") == "x\\u{202e}yz");
}

TEST_CASE("code points are written back as UTF-8 of the right length") {
  for (const uint32_t cp : {0x41u, 0xE9u, 0x20ACu, 0x1F642u}) {
    std::string s;
    base::utf8_append(s, cp);
    REQUIRE(s.size() == base::utf8_length(cp));
    REQUIRE(base::utf8_decode(s) == std::vector<uint32_t>{cp});
  }
  REQUIRE(base::replace_invalid_utf8("a\xe2\x82\xff"
                                     "b") == "a\uFFFD\uFFFDb");
}
