#include "report/metrics_log.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "base/json.h"
#include "base/posix_file.h"
#include "base/utf8.h"
#include "io/files.h"

namespace report {

namespace {

constexpr uint64_t kMaxFileBytes = uint64_t{1} << 30;
constexpr size_t kReadBytes = size_t{1} << 20;

using Json = nlohmann::json;

// A value from the file, safe and short enough for a message.
std::string shown(const Json& v) {
  return base::json_quote(v, 60);
}

class LogParser {
 public:
  explicit LogParser(const std::string& name) { run_.name = run_.path = name; }

  void line(std::string_view text, size_t number, bool complete);
  MetricsRun finish() {
    close_session();
    return std::move(run_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw MetricsError(fmt::format("{}:{}: {}", base::printable(run_.path), number_, what));
  }
  Json parse(std::string_view text, bool complete);
  double number(const Json& j, const char* key) const;
  void step_line(const Json& j);
  void start_record(const Json& j);
  void sample_record(const Json& j);
  void drop_from(int64_t step);
  void close_session();

  double tokens_at(int64_t step) const {
    return tokens_at_first_ + static_cast<double>(step - session_first_) * tokens_per_step_;
  }

  MetricsRun run_;
  size_t number_ = 0;
  double session_elapsed_ = 0;
  // this session's first step, the tokens trained on by then, and its tokens per step
  int64_t session_first_ = 0;
  double tokens_at_first_ = 0, tokens_per_step_ = NAN;
};

Json LogParser::parse(std::string_view text, bool complete) {
  try {
    return base::parse_json(text);
  } catch (const base::JsonError& e) {
    if (e.kind != base::JsonError::Kind::syntax) fail(e.what());
    if (!complete) {
      run_.notes.push_back(
          fmt::format("line {} has no newline and is not valid JSON yet (a run "
                      "still writing it?): skipped",
                      number_));
      return nullptr;
    }
    fail(e.what());
  }
}

void LogParser::line(std::string_view text, size_t number, bool complete) {
  number_ = number;
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (text.find_first_not_of(" \t") == std::string_view::npos) return;
  const Json j = parse(text, complete);
  if (j.is_null()) return;
  if (!j.is_object()) fail(fmt::format("expected a JSON object, got {}", shown(j)));
  if (!j.contains("event")) return step_line(j);
  const Json& event = j["event"];
  if (event == "start") return start_record(j);
  if (event == "sample") return sample_record(j);
  if (!event.is_string()) fail(fmt::format("'event' must be a string, got {}", shown(event)));
}

double LogParser::number(const Json& j, const char* key) const {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return NAN;  // JSON has no NaN: train writes none
  if (!it->is_number()) fail(fmt::format("'{}' must be a number, got {}", key, shown(*it)));
  return it->get<double>();
}

void LogParser::step_line(const Json& j) {
  const auto it = j.find("step");
  if (it == j.end()) fail("neither a step line (no 'step') nor an event");
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    fail(fmt::format("'step' must be a whole number >= 0, got {}", shown(*it)));
  MetricsPoint p;
  p.step = it->get<int64_t>();
  p.loss = number(j, "loss"), p.lr = number(j, "lr"), p.grad_norm = number(j, "grad_norm");
  p.tokens_per_s = number(j, "tokens_per_s"), p.elapsed_s = number(j, "elapsed_s");
  p.val_loss = number(j, "val_loss"), p.val_bits_per_byte = number(j, "val_bits_per_byte");
  if (std::isfinite(p.elapsed_s) && p.elapsed_s < session_elapsed_) close_session();  // a restart
  if (std::isfinite(p.elapsed_s)) session_elapsed_ = p.elapsed_s;
  p.wall_s = run_.wall_seconds + p.elapsed_s;
  p.tokens = tokens_at(p.step);
  drop_from(p.step);
  run_.points.push_back(p);
}

// A later session that repeats steps (resumed from an earlier checkpoint) replaces them.
void LogParser::drop_from(int64_t step) {
  auto& pts = run_.points;
  pts.erase(std::lower_bound(pts.begin(), pts.end(), step,
                             [](const MetricsPoint& p, int64_t s) { return p.step < s; }),
            pts.end());
}

void LogParser::start_record(const Json& j) {
  if (j.contains("config") && !j["config"].is_object())
    fail(fmt::format("'config' must be an object, got {}", shown(j["config"])));
  const double first = number(j, "first_step");
  if (std::isfinite(first)) {
    drop_from(static_cast<int64_t>(first) + 1);
    std::erase_if(run_.samples, [&](const MetricsSample& s) { return s.step > first; });
  }
  close_session();
  run_.start = j;
  const int64_t from = std::isfinite(first)  ? static_cast<int64_t>(first)
                       : run_.points.empty() ? 0
                                             : run_.points.back().step;
  const double per_step = tokens_per_step(j);
  tokens_at_first_ =
      std::isfinite(tokens_per_step_) ? tokens_at(from) : static_cast<double>(from) * per_step;
  session_first_ = from, tokens_per_step_ = per_step;
}

void LogParser::sample_record(const Json& j) {
  const auto text = j.find("text");
  if (text == j.end() || !text->is_string()) fail("a sample event needs its 'text' as a string");
  run_.sample = text->get<std::string>();
  const double step = number(j, "step");
  run_.sample_step = std::isfinite(step) ? static_cast<int64_t>(step) : -1;
  run_.samples.push_back({run_.sample_step, run_.sample});
}

void LogParser::close_session() {
  if (session_elapsed_ > 0 || !run_.points.empty() || !run_.start.is_null()) {
    run_.wall_seconds += session_elapsed_;
    ++run_.sessions;
  }
  session_elapsed_ = 0;
}

}  // namespace

bool MetricsRun::has(double MetricsPoint::*field) const {
  return std::any_of(points.begin(), points.end(),
                     [&](const MetricsPoint& p) { return std::isfinite(p.*field); });
}

MetricsRun parse_metrics(std::string_view text, const std::string& name) {
  LogParser parser(name);
  size_t number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    parser.line(text.substr(0, end), ++number, end != std::string_view::npos);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  return parser.finish();
}

MetricsRun parse_metrics_lines(const std::vector<std::string>& lines, const std::string& name) {
  LogParser parser(name);
  for (size_t i = 0; i < lines.size(); ++i) parser.line(lines[i], i + 1, true);
  return parser.finish();
}

// Read a chunk at a time: the file is never held whole, only the line being parsed, so
// memory follows what the lines keep (a point per step), not the file's size.
MetricsRun read_metrics(const std::string& path) {
  const std::string named = fmt::format("metrics file '{}'", base::printable(path));
  struct stat st;
  const base::UniqueFd fd = base::open_regular(path, named, &st);
  const auto too_big = [&](uint64_t bytes) {
    return base::FileError(
        base::FileError::Kind::too_big,
        fmt::format("{} is {} bytes, more than the {} bytes allowed", named, bytes, kMaxFileBytes),
        0, 0, bytes);
  };
  if (static_cast<uint64_t>(st.st_size) > kMaxFileBytes) throw too_big(st.st_size);
  LogParser parser(path);
  std::string chunk(kReadBytes, '\0'), line;
  size_t number = 0;
  for (uint64_t total = 0;;) {
    const ssize_t n = base::read_full(fd.get(), chunk.data(), chunk.size());
    if (n < 0)
      throw base::FileError(base::FileError::Kind::os,
                            fmt::format("cannot read {}: {}", named, std::strerror(errno)), errno,
                            0, 0);
    if ((total += static_cast<uint64_t>(n)) > kMaxFileBytes) throw too_big(total);
    for (std::string_view rest(chunk.data(), static_cast<size_t>(n)); !rest.empty();) {
      const size_t end = rest.find('\n');
      line.append(rest.substr(0, end));
      if (end == std::string_view::npos) break;
      parser.line(line, ++number, true);
      line.clear();
      rest.remove_prefix(end + 1);
    }
    if (static_cast<size_t>(n) < chunk.size()) break;  // the end
  }
  if (!line.empty()) parser.line(line, ++number, false);
  return parser.finish();
}

double tokens_per_step(const nlohmann::json& start) {
  const auto count = [&](const Json& object, const char* key, double otherwise) {
    const auto it = object.is_object() ? object.find(key) : object.end();
    return it != object.end() && it->is_number() && it->get<double>() > 0 ? it->get<double>()
                                                                          : otherwise;
  };
  const Json config = start.is_object() && start.contains("config") ? start["config"] : Json();
  return count(config, "batch_size", NAN) * count(config, "context_length", NAN) *
         count(config, "grad_accum_steps", 1) * count(start, "processes", 1);
}

namespace {

// The name a run record gives (train --name), or "".
std::string recorded_name(const MetricsRun& r) {
  const auto it = r.start.is_object() ? r.start.find("name") : r.start.end();
  return it != r.start.end() && it->is_string() ? it->get<std::string>() : "";
}

// Each run's file name, or as much of its path as tells it from the others'.
void name_by_paths(std::vector<MetricsRun>& runs) {
  namespace fs = std::filesystem;
  for (size_t depth = 1; depth < 64; ++depth) {
    bool clash = false;
    for (auto& r : runs) {
      std::vector<std::string> parts;
      for (const auto& part : fs::path(r.path).lexically_normal()) parts.push_back(part.string());
      const size_t from = parts.size() > depth ? parts.size() - depth : 0;
      std::string name;
      for (size_t k = from; k < parts.size(); ++k) name += (name.empty() ? "" : "/") + parts[k];
      r.name = name.empty() ? r.path : name;
    }
    for (size_t a = 0; a < runs.size(); ++a)
      for (size_t b = a + 1; b < runs.size(); ++b) clash = clash || runs[a].name == runs[b].name;
    if (!clash) return;
  }
}

}  // namespace

void name_runs(std::vector<MetricsRun>& runs) {
  name_by_paths(runs);
  std::vector<std::string> names;
  for (const auto& r : runs) names.push_back(recorded_name(r));
  for (size_t i = 0; i < runs.size(); ++i) {
    if (names[i].empty()) continue;
    const bool shared = std::count(names.begin(), names.end(), names[i]) > 1;
    runs[i].name = shared ? names[i] + " (" + runs[i].name + ")" : names[i];
  }
}

}  // namespace report
