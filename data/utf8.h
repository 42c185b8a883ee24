#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace data {

// Code points of a UTF-8 string. Overlong forms, surrogates, code points above U+10FFFF
// and truncated sequences are errors naming the byte offset.
std::vector<uint32_t> utf8_decode(const std::string& text);
void utf8_append(std::string& out, uint32_t code_point);
// "é (U+00E9)" for messages; control characters show only their U+ code.
std::string describe_code_point(uint32_t cp);

}  // namespace data
