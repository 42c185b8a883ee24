#include "report/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/utf8.h"
#include "data/identity.h"

namespace report::html {

std::string escape(std::string_view text, bool keep_line_breaks) {
  const std::string printable = base::printable(text, keep_line_breaks);
  std::string out;
  out.reserve(printable.size() + printable.size() / 8);
  for (const char c : printable) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string script_json(const nlohmann::json& value) {
  const std::string ascii = value.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(ascii.size());
  for (const char c : ascii) {
    switch (c) {  // outside strings JSON has none of these, so only strings change
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

std::string base64(const std::string& bytes) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t group = 0;
    for (size_t k = 0; k < 3; ++k)
      group = group << 8 | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kDigits[(group >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

}  // namespace

std::string csp_hash(std::string_view bytes) {
  const std::string hex = data::text_identity(bytes).substr(7);  // after "sha256:"
  std::string digest;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    digest += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return "sha256-" + base64(digest);
}

std::string num(double value, int decimals) {
  if (!std::isfinite(value)) return "0";
  std::string s = fmt::format("{:.{}f}", value, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

}  // namespace report::html
