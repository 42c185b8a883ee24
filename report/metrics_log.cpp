#include "report/metrics_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "base/json.h"
#include "base/utf8.h"
#include "io/files.h"

namespace report {

namespace {

constexpr int64_t kMaxFileBytes = int64_t{1} << 30;

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

  std::string path_;
  std::vector<MetricsRun> runs_;
  std::vector<double> session_elapsed_;  // per run: the elapsed_s of its open session
  size_t current_ = 0;                   // the run that records without an identity join
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
  session_elapsed_.push_back(0);
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
  double& session = session_elapsed_[current_];
  if (std::isfinite(p.elapsed_s) && p.elapsed_s < session) close_session(current_);  // a restart
  if (std::isfinite(p.elapsed_s)) session = p.elapsed_s;
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
    close_session(current_);
    run.resumed_at.push_back(first_step);
  } else {
    if (!current_empty) begin_run(id);
    runs_[current_].run_id = id;
    runs_[current_].first_step = first_step;
  }
  runs_[current_].start = j;
}

void LogParser::sample_record(const Json& j) {
  const auto text = j.find("text");
  if (text == j.end() || !text->is_string()) fail("a sample event needs its 'text' as a string");
  MetricsRun& run = run_of(j);
  run.sample = text->get<std::string>();
  const double step = number(j, "step");
  run.sample_step = std::isfinite(step) ? static_cast<int64_t>(step) : -1;
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
  if (session_elapsed_[r] > 0 || !run.points.empty() || !run.start.is_null()) {
    run.wall_seconds += session_elapsed_[r];
    ++run.sessions;
  }
  session_elapsed_[r] = 0;
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

std::vector<MetricsRun> read_metrics_runs(const std::string& path) {
  return parse_metrics_runs(base::read_input_file(path, "metrics file", kMaxFileBytes), path);
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
  if (!rows.empty()) {
    run.sessions = 1;
    run.wall_seconds = std::isfinite(rows.back().elapsed_s) ? rows.back().elapsed_s : 0;
  }
  return run;
}

namespace {

// Runs of one file: "run.jsonl (baseline)" by their names when those differ, else by order.
void tell_apart_runs_of_one_file(std::vector<MetricsRun>& runs) {
  for (size_t a = 0; a < runs.size(); ++a) {
    std::vector<size_t> same;
    for (size_t b = 0; b < runs.size(); ++b)
      if (runs[b].path == runs[a].path) same.push_back(b);
    if (same.size() < 2 || same[0] != a) continue;
    std::vector<std::string> names;
    for (size_t b : same) {
      const auto it = runs[b].start.find("name");
      names.push_back(runs[b].start.is_object() && it != runs[b].start.end() && it->is_string()
                          ? it->get<std::string>()
                          : "");
    }
    const bool distinct =
        std::all_of(names.begin(), names.end(), [](const std::string& n) { return !n.empty(); }) &&
        std::set<std::string>(names.begin(), names.end()).size() == names.size();
    for (size_t k = 0; k < same.size(); ++k)
      runs[same[k]].name += distinct ? fmt::format(" ({})", names[k])
                                     : fmt::format(" (run {} of {})", k + 1, same.size());
  }
}

}  // namespace

void name_runs(std::vector<MetricsRun>& runs) {
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
    if (!clash) break;
  }
  tell_apart_runs_of_one_file(runs);
}

}  // namespace report
