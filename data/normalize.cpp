#include "data/normalize.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "base/utf8.h"

namespace data {

std::string nfc(std::string_view utf8) {
  if (utf8.empty()) return {};
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(utf8.data()),
                   static_cast<utf8proc_ssize_t>(utf8.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  if (n < 0)
    throw std::invalid_argument(
        fmt::format("NFC normalization: {}", utf8proc_errmsg(static_cast<utf8proc_ssize_t>(n))));
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

namespace {

// A character before which normalization may stop: nothing after it changes what is before.
bool starts_stably(uint32_t cp) {
  if (cp < 0x80) return true;
  if (cp >= 0x1160 && cp < 0x1200) return false;  // Hangul vowels and trailing consonants
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  const bool mark = p->category == UTF8PROC_CATEGORY_MN || p->category == UTF8PROC_CATEGORY_MC ||
                    p->category == UTF8PROC_CATEGORY_ME;
  return p->combining_class == 0 && !mark;
}

}  // namespace

size_t nfc_stable_end(std::string_view utf8) {
  for (size_t i = utf8.size(); i > 0;) {  // backwards, a character start at a time
    --i;
    if ((static_cast<unsigned char>(utf8[i]) & 0xC0) == 0x80) continue;
    uint32_t cp = 0;
    if (base::utf8_char(utf8, i, cp) > 0 && starts_stably(cp)) return i;
  }
  return 0;
}

}  // namespace data
