#pragma once
// A choice's text as its tokens arrive: what may be sent now, and where it stops.
//
//   serve::ReplyText text({"\n\n"});
//   std::string now = text.add(token_bytes);  // safe to send: whole characters, no stop
//   if (text.stopped()) ...                   // a stop text was reached: the choice ends
//   now = text.finish();                      // the end: whatever was held back
//
// A stop text ends the text where it begins (the stop and what follows are not sent, as
// OpenAI's API and `attograd sample --stop` do). Bytes that could be the start of a stop
// text are held until they are known not to be, and so are the bytes of a character split
// over tokens, so that every piece sent is whole UTF-8 (a streamed delta is a JSON string).
// The pieces sent, joined, are the whole text (up to the stop).
#include <string>
#include <string_view>
#include <vector>

namespace serve {

class ReplyText {
 public:
  explicit ReplyText(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string add(std::string_view bytes);
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace serve
