#include "report/metrics_log.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

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
  explicit LogParser(const std::string& name) : path_(name) {}

  void line(std::string_view text, size_t number, bool complete);
  std::vector<MetricsRun> finish() {
    for (size_t r = 0; r < runs_.size(); ++r) close_session(r);
    for (MetricsRun& run : runs_) note_resumes(run);
    return std::move(runs_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw MetricsError(fmt::format("{}:{}: {}", base::printable(path_), number_, what));
  }
  Json parse(std::string_view text, bool complete);
  double number(const Json& j, const char* key) const;
  std::string run_id_of(const Json& j) const;
  MetricsRun& run_of(const Json& j);
  size_t begin_run(const std::string& id);
  void step_line(const Json& j);
  void start_record(const Json& j);
  void sample_record(const Json& j);
  void drop_from(int64_t step);
  void close_session(size_t run);
  static void note_resumes(MetricsRun& run);

  // Per run, its open session: the elapsed_s reached, its first step, the tokens trained on
  // by then and its tokens per step (from its run record; NaN without one)
  struct Session {
    double elapsed = 0;
    int64_t first = 0;
    double tokens_at_first = 0, tokens_per_step = NAN;
    double tokens_at(int64_t step) const {
      return tokens_at_first + static_cast<double>(step - first) * tokens_per_step;
    }
  };
  void begin_session(size_t run, int64_t from, const Json& start);

  std::string path_;
  std::vector<MetricsRun> runs_;
  std::vector<Session> sessions_;  // per run
  size_t current_ = 0;             // the run that records without an identity join
  size_t number_ = 0;
};

Json LogParser::parse(std::string_view text, bool complete) {
  try {
    return base::parse_json(text);
  } catch (const base::JsonError& e) {
    if (e.kind != base::JsonError::Kind::syntax) fail(e.what());
    if (!complete) {
      if (runs_.empty()) begin_run("");
      runs_[current_].notes.push_back(
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

std::string LogParser::run_id_of(const Json& j) const {
  const auto it = j.find("run");
  if (it == j.end()) return "";
  if (!it->is_string() || it->get_ref<const std::string&>().empty())
    fail(fmt::format("'run' must be a non-empty string, got {}", shown(*it)));
  return it->get<std::string>();
}

size_t LogParser::begin_run(const std::string& id) {
  if (runs_.size() == kMaxRuns)
    fail(
        fmt::format("more than {} runs in one file; report draws at most {} (split the file, "
                    "one run per file)",
                    kMaxRuns, kMaxRuns));
  MetricsRun r;
  r.name = r.path = path_;
  r.run_id = id;
  runs_.push_back(std::move(r));
  sessions_.emplace_back();
  return current_ = runs_.size() - 1;
}

// The run a record belongs to: the one its identity names, else the current one.
MetricsRun& LogParser::run_of(const Json& j) {
  const std::string id = run_id_of(j);
  if (!id.empty()) {
    const auto it = std::find_if(runs_.begin(), runs_.end(),
                                 [&](const MetricsRun& r) { return r.run_id == id; });
    current_ = it != runs_.end() ? static_cast<size_t>(it - runs_.begin()) : begin_run(id);
  } else if (runs_.empty()) {
    begin_run("");
  }
  return runs_[current_];
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
  MetricsRun& run = run_of(j);
  Session& session = sessions_[current_];
  if (std::isfinite(p.elapsed_s) && p.elapsed_s < session.elapsed)
    close_session(current_);  // a restart
  if (std::isfinite(p.elapsed_s)) session.elapsed = p.elapsed_s;
  p.wall_s = run.wall_seconds + p.elapsed_s;
  p.tokens = session.tokens_at(p.step);
  drop_from(p.step);
  run.points.push_back(p);
}

// A later session that repeats steps (resumed from an earlier checkpoint) replaces them.
void LogParser::drop_from(int64_t step) {
  auto& pts = runs_[current_].points;
  pts.erase(std::lower_bound(pts.begin(), pts.end(), step,
                             [](const MetricsPoint& p, int64_t s) { return p.step < s; }),
            pts.end());
}

void LogParser::start_record(const Json& j) {
  if (j.contains("config") && !j["config"].is_object())
    fail(fmt::format("'config' must be an object, got {}", shown(j["config"])));
  const double first = number(j, "first_step");
  if (std::isfinite(first) && first < 0) fail("'first_step' must be >= 0");
  const int64_t first_step = std::isfinite(first) ? static_cast<int64_t>(first) : 0;
  const std::string id = run_id_of(j);
  const bool known = std::any_of(runs_.begin(), runs_.end(), [&](const MetricsRun& r) {
    return !id.empty() && r.run_id == id;
  });
  const bool current_empty =
      !runs_.empty() && runs_[current_].points.empty() && runs_[current_].start.is_null();
  // a start without an identity continues the run before it when it resumes (first_step > 0)
  const bool resumes = known || (id.empty() && !runs_.empty() && first_step > 0);
  if (resumes) {
    MetricsRun& run = run_of(j);
    drop_from(first_step + 1);
    std::erase_if(run.samples, [&](const MetricsSample& s) { return s.step > first_step; });
    close_session(current_);
    run.resumed_at.push_back(first_step);
  } else {
    if (!current_empty) begin_run(id);
    runs_[current_].run_id = id;
    runs_[current_].first_step = first_step;
  }
  const auto& points = runs_[current_].points;
  begin_session(current_,
                std::isfinite(first) ? first_step
                : points.empty()     ? 0
                                     : points.back().step,
                j);
  runs_[current_].start = j;
}

// A session of run r from step `from` on: its tokens go on from those the run had trained
// on by then (its first session: from * its tokens per step)
void LogParser::begin_session(size_t r, int64_t from, const Json& start) {
  Session& s = sessions_[r];
  const double tokens =
      std::isfinite(s.tokens_per_step) ? s.tokens_at(from) : static_cast<double>(from);
  const double per_step = tokens_per_step(start);
  s.tokens_at_first = std::isfinite(s.tokens_per_step) ? tokens : tokens * per_step;
  s.first = from, s.tokens_per_step = per_step;
}

void LogParser::sample_record(const Json& j) {
  const auto text = j.find("text");
  if (text == j.end() || !text->is_string()) fail("a sample event needs its 'text' as a string");
  MetricsRun& run = run_of(j);
  run.sample = text->get<std::string>();
  const double step = number(j, "step");
  run.sample_step = std::isfinite(step) ? static_cast<int64_t>(step) : -1;
  run.samples.push_back({run.sample_step, run.sample});
}

// How the run began and where it was resumed, said on the page beside its notes.
void LogParser::note_resumes(MetricsRun& run) {
  if (run.first_step > 0)
    run.notes.push_back(
        fmt::format("begins with a resume from step {} (its earlier steps are not in this file)",
                    run.first_step));
  if (!run.resumed_at.empty())
    run.notes.push_back(fmt::format("{} at step {}, resumed at step {}",
                                    run.first_step > 0 ? "began" : "a fresh start", run.first_step,
                                    fmt::join(run.resumed_at, ", ")));
}

void LogParser::close_session(size_t r) {
  MetricsRun& run = runs_[r];
  if (sessions_[r].elapsed > 0 || !run.points.empty() || !run.start.is_null()) {
    run.wall_seconds += sessions_[r].elapsed;
    ++run.sessions;
  }
  sessions_[r].elapsed = 0;
}

}  // namespace

bool MetricsRun::has(double MetricsPoint::*field) const {
  return std::any_of(points.begin(), points.end(),
                     [&](const MetricsPoint& p) { return std::isfinite(p.*field); });
}

std::vector<MetricsRun> parse_metrics_runs(std::string_view text, const std::string& name) {
  LogParser parser(name);
  size_t number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    parser.line(text.substr(0, end), ++number, end != std::string_view::npos);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  return parser.finish();
}

std::vector<MetricsRun> parse_metrics_lines(const std::vector<std::string>& lines,
                                            const std::string& name) {
  LogParser parser(name);
  for (size_t i = 0; i < lines.size(); ++i) parser.line(lines[i], i + 1, true);
  return parser.finish();
}

// Read a chunk at a time: the file is never held whole, only the line being parsed, so
// memory follows what the lines keep (a point per step), not the file's size.
std::vector<MetricsRun> read_metrics_runs(const std::string& path) {
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

MetricsRun only_run(std::vector<MetricsRun> runs, const std::string& name) {
  if (runs.size() > 1)
    throw MetricsError(
        fmt::format("{} holds {} runs, not one", base::printable(name), runs.size()));
  if (runs.empty()) {
    runs.emplace_back();
    runs[0].name = runs[0].path = name;
  }
  return std::move(runs[0]);
}

}  // namespace

MetricsRun parse_metrics(std::string_view text, const std::string& name) {
  return only_run(parse_metrics_runs(text, name), name);
}

MetricsRun read_metrics(const std::string& path) {
  return only_run(read_metrics_runs(path), path);
}

MetricsRun run_of_checkpoint_history(const std::vector<io::HistoryRow>& rows,
                                     const nlohmann::json& config, const std::string& run_id,
                                     const std::string& run_name, const std::string& path) {
  MetricsRun run;
  run.name = run.path = path;
  run.run_id = run_id;
  run.start = {{"config", config}, {"first_step", 0}};
  if (!run_name.empty()) run.start["name"] = run_name;
  for (const io::HistoryRow& r : rows)
    run.points.push_back({.step = r.step,
                          .loss = r.loss,
                          .lr = r.lr,
                          .grad_norm = r.grad_norm,
                          .tokens_per_s = r.tokens_per_s,
                          .elapsed_s = r.elapsed_s,
                          .val_loss = r.val_loss,
                          .val_bits_per_byte = r.val_bits_per_byte});
  const double per_step = tokens_per_step(run.start);
  for (MetricsPoint& p : run.points)
    p.tokens = static_cast<double>(p.step) * per_step, p.wall_s = p.elapsed_s;
  if (!rows.empty()) {
    run.sessions = 1;
    run.wall_seconds = std::isfinite(rows.back().elapsed_s) ? rows.back().elapsed_s : 0;
  }
  return run;
}

namespace {

// The name a run record gives (train --name), or "".
std::string recorded_name(const MetricsRun& r) {
  const auto it = r.start.is_object() ? r.start.find("name") : r.start.end();
  return it != r.start.end() && it->is_string() ? it->get<std::string>() : "";
}

// Each run's file name, or as much of its path as tells it from other files'.
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
      for (size_t b = a + 1; b < runs.size(); ++b)
        clash = clash || (runs[a].name == runs[b].name && runs[a].path != runs[b].path);
    if (!clash) return;
  }
}

// Runs whose names are still alike (runs of one file without names of their own): "m.jsonl
// (run 2 of 3)", numbered in the order they began.
void number_alike(std::vector<MetricsRun>& runs) {
  std::vector<std::string> names;
  for (const auto& r : runs) names.push_back(r.name);
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto total = std::count(names.begin(), names.end(), names[i]);
    if (total < 2) continue;
    const auto nth = std::count(names.begin(), names.begin() + static_cast<ptrdiff_t>(i), names[i]);
    runs[i].name = fmt::format("{} (run {} of {})", names[i], nth + 1, total);
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
  number_alike(runs);
}

}  // namespace report
