#include "cli/sample_output.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/utf8.h"

namespace cli {

SampleWriter::SampleWriter(int fd, int64_t samples, std::vector<std::string> stops, bool escape,
                           std::string_view prompt)
    : fd_(fd), stops_(std::move(stops)), escape_(escape), samples_(static_cast<size_t>(samples)) {
  const std::string shown =
      escape ? base::printable(prompt, /*keep_line_breaks=*/true) : std::string(prompt);
  for (int64_t b = 0; b < samples; ++b) {
    Sample& s = samples_[static_cast<size_t>(b)];
    if (samples > 1) s.kept = fmt::format("--- sample {} of {} ---\n", b + 1, samples);
    s.kept += shown;
  }
  end(-1);  // writes the first sample's beginning
}

bool SampleWriter::add(int64_t sample, std::string_view bytes) {
  Sample& s = samples_[static_cast<size_t>(sample)];
  if (s.ended || errno_) return false;
  s.held += bytes;
  const size_t stop = stop_at(s.held);
  if (stop != std::string::npos) {
    s.held.resize(stop);
    end(sample);
    return false;
  }
  const size_t ready = s.held.size() - may_begin_stop(s.held);
  release(sample, std::string_view(s.held).substr(0, ready), false);
  s.held.erase(0, ready);
  return errno_ == 0;
}

void SampleWriter::end_sample(int64_t sample) {
  if (!samples_[static_cast<size_t>(sample)].ended) end(sample);
}

void SampleWriter::finish() {
  for (int64_t b = 0; b < static_cast<int64_t>(samples_.size()); ++b)
    if (!samples_[static_cast<size_t>(b)].ended) end(b);
}

// Generated text that is final: escaped when asked (a character still incomplete waits,
// unless this is the sample's last text), then written live or kept for later.
void SampleWriter::release(int64_t sample, std::string_view text, bool last) {
  Sample& s = samples_[static_cast<size_t>(sample)];
  std::string out;
  if (escape_) {
    s.partial += text;
    const size_t complete = last ? s.partial.size() : base::utf8_complete_prefix(s.partial);
    out = base::printable(std::string_view(s.partial).substr(0, complete), true);
    s.partial.erase(0, complete);
  } else {
    out = text;
  }
  if (sample == current_)
    write(out);
  else
    s.kept += out;
}

// Ends a sample (its held bytes released, a line break after it); when it is the one
// written live, the samples after it that are kept are written in turn. end(-1) only
// writes what the live sample kept.
void SampleWriter::end(int64_t sample) {
  if (sample >= 0) {
    Sample& s = samples_[static_cast<size_t>(sample)];
    release(sample, s.held, true);
    s.held.clear();
    release(sample, "\n", true);
    s.ended = true;
    if (sample != current_) return;
  }
  while (current_ < static_cast<int64_t>(samples_.size())) {
    Sample& s = samples_[static_cast<size_t>(current_)];
    write(s.kept);
    s.kept.clear();
    s.kept.shrink_to_fit();
    if (!s.ended) break;
    ++current_;
  }
}

void SampleWriter::write(std::string_view text) {
  while (!text.empty() && errno_ == 0) {
    const ssize_t n = ::write(fd_, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      errno_ = n < 0 ? errno : EIO;
      return;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
}

size_t SampleWriter::stop_at(const std::string& text) const {
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, text.find(stop));
  return first;
}

size_t SampleWriter::may_begin_stop(const std::string& text) const {
  size_t longest = 0;
  for (const std::string& stop : stops_)
    for (size_t len = std::min(stop.size() - 1, text.size()); len > longest; --len)
      if (std::string_view(text).substr(text.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        longest = len;
        break;
      }
  return longest;
}

}  // namespace cli
