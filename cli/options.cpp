#include "cli/options.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "base/utf8.h"
#include "cli/option_aliases.h"
#include "io/files.h"
#include "train/task.h"

namespace cli {

namespace {

constexpr int64_t kMaxConfigBytes = 1 << 20;  // a run file is a few hundred bytes

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

struct FileOption {
  std::string key, value;
  int line;
};

// What follows '=' on a config line: a value in double quotes is taken whole (so it may hold
// '#' and ';'), with \" for a quote and \\ for a backslash, and only blanks or a comment
// after it; any other value ends at the first '#' or ';' (a comment), blanks trimmed.
std::string config_value(const std::string& text, const std::string& path, int line) {
  const std::string rest = trim(text);
  if (rest.empty() || rest[0] != '"') return trim(rest.substr(0, rest.find_first_of("#;")));
  std::string value;
  for (size_t i = 1; i < rest.size(); ++i) {
    if (rest[i] == '\\' && i + 1 < rest.size() && (rest[i + 1] == '"' || rest[i + 1] == '\\')) {
      value += rest[++i];
    } else if (rest[i] != '"') {
      value += rest[i];
    } else {
      const std::string after = trim(rest.substr(i + 1));
      if (!after.empty() && after[0] != '#' && after[0] != ';')
        throw UsageError(fmt::format("{}:{}: '{}' after the value's closing quote", path, line,
                                     base::printable(after)));
      return value;
    }
  }
  throw UsageError(fmt::format("{}:{}: the value's opening quote is never closed", path, line));
}

// The long names of desc's options, for suggestions.
std::vector<std::string> option_names(const po::options_description& desc) {
  std::vector<std::string> names;
  for (const auto& option : desc.options()) names.push_back(option->long_name());
  return names;
}

// Whether an option collects every value it is given (report's --metrics, sample's
// --stop, prepare's --data) rather than taking one.
bool collects_values(const po::options_description& desc, const std::string& key) {
  const auto* d = desc.find_nothrow(key, false);
  return d && d->semantic()->is_composing();
}

// INI-style "key = value" lines (config_value says how a value may hold '#' or ';'); a line
// whose first character is '#' or ';' is a comment; [sections] are not used. A UTF-8
// byte-order mark (editors on Windows write one) is skipped; a key given twice is an error,
// since which one was meant cannot be known, unless its option collects values.
std::vector<FileOption> read_config_file(const std::string& path,
                                         const po::options_description& desc) {
  std::string content;
  try {
    content = base::read_input_file(path, "config file", kMaxConfigBytes);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
  if (content.rfind("\xEF\xBB\xBF", 0) == 0) content.erase(0, 3);
  std::vector<FileOption> out;
  std::istringstream in(content);
  std::string raw;
  for (int line = 1; std::getline(in, raw); ++line) {
    const size_t eq = raw.find_first_of("=#;");  // a comment before any '=' ends the line
    const std::string text = trim(raw.substr(0, eq));
    if (eq == std::string::npos || raw[eq] != '=') {
      if (text.empty()) continue;
      throw UsageError(fmt::format("{}:{}: expected 'key = value', got '{}'", path, line,
                                   base::printable(text)));
    }
    std::string key = option_name(text);
    if (key.empty())
      throw UsageError(fmt::format("{}:{}: no option name before '=' in '{}'", path, line,
                                   base::printable(trim(raw))));
    const std::string value = config_value(raw.substr(eq + 1), path, line);
    if (key == "config")
      throw UsageError(fmt::format("{}:{}: a config file cannot include another", path, line));
    bool known = false;
    try {  // Boost throws for some names (ambiguous prefixes) rather than answering
      known = desc.find_nothrow(key, false) != nullptr;
    } catch (const po::error&) {
    }
    if (!known)
      throw UsageError(fmt::format("{}:{}: unknown option '{}'{}", path, line, base::printable(key),
                                   option_suggestion(text, option_names(desc))));
    if (!collects_values(desc, key))
      for (const FileOption& earlier : out)
        if (earlier.key == key)
          throw UsageError(
              fmt::format("{}:{}: '{}' is already set on line {}", path, line, key, earlier.line));
    out.push_back({key, value, line});
  }
  return out;
}

// Boost reads "-1" as 2^64 - 1 for an unsigned option: a negative value for one of those
// (a seed) is refused here instead of silently wrapped around.
void refuse_negative_unsigned(const po::parsed_options& parsed,
                              const po::options_description& desc) {
  for (const po::option& o : parsed.options) {
    const auto* d = desc.find_nothrow(o.string_key, false);
    if (!d || o.value.empty()) continue;
    const bool is_unsigned = dynamic_cast<const po::typed_value<uint64_t>*>(d->semantic().get()) ||
                             dynamic_cast<const po::typed_value<uint32_t>*>(d->semantic().get());
    const std::string value = trim(o.value.front());
    if (is_unsigned && !value.empty() && value[0] == '-')
      throw UsageError(
          fmt::format("--{} must be >= 0, got {}", o.string_key, base::printable(value)));
  }
}

// An option given twice takes its last value, as in most command lines (a base command
// with an override appended), instead of Boost's "specified more than once" error; one
// that collects values (composing, as report's --metrics) keeps them all.
po::parsed_options parse_args(const std::vector<std::string>& args,
                              const po::options_description& desc,
                              const po::positional_options_description& positional = {}) {
  po::parsed_options parsed =
      po::command_line_parser(args)
          .options(desc)
          .positional(positional)
          .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
          .run();
  std::vector<po::option> last_of_each;
  for (auto it = parsed.options.rbegin(); it != parsed.options.rend(); ++it) {
    if (collects_values(desc, it->string_key) ||
        std::none_of(last_of_each.begin(), last_of_each.end(),
                     [&](const po::option& o) { return o.string_key == it->string_key; }))
      last_of_each.push_back(*it);
  }
  parsed.options.assign(last_of_each.rbegin(), last_of_each.rend());
  refuse_negative_unsigned(parsed, desc);
  return parsed;
}

// Boost's error messages substitute placeholders (%value%, %option%, ...) into their
// text, and loop forever when the user's own text contains one (our fuzzer found it): with
// a '%' anywhere in what was parsed, the message is built here instead.
std::string describe(const po::error& e, const std::vector<std::string>& parsed) {
  const bool has_percent = std::any_of(parsed.begin(), parsed.end(), [](const std::string& a) {
    return a.find('%') != std::string::npos;
  });
  if (!has_percent) return e.what();
  if (const auto* named = dynamic_cast<const po::error_with_option_name*>(&e))
    return fmt::format("invalid value for option '{}'", named->get_option_name());
  return "invalid options";
}

// Insertions, deletions, substitutions and swaps of neighbours that turn a into b.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_name(const std::string& name, const std::vector<std::string>& names) {
  if (name.size() > 64) return "";  // no misspelling of a name we have
  std::string best;
  size_t best_distance = name.size() <= 4 ? 2 : 3;
  for (const std::string& candidate : names)
    if (const size_t d = edit_distance(name, candidate); d < best_distance)
      best = candidate, best_distance = d;
  return best;
}

train::TaskHandle parse_task_option(const std::string& text) {
  try {
    return train::TaskHandle(train::task_named(text));
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what() + did_you_mean(text, train::task_names()));
  }
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& names) {
  const std::string best = closest_name(name, names);
  return best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
}

std::string option_name(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

po::variables_map parse_options(const std::vector<std::string>& args,
                                const po::options_description& desc, const char* positional,
                                int positional_count) {
  po::positional_options_description bare;
  if (positional) bare.add(positional, positional_count);
  po::variables_map vm;
  try {
    po::store(parse_args(args, desc, bare), vm);  // stored first: the command line wins
  } catch (const po::unknown_option& e) {
    throw UsageError(describe(e, args) +
                     option_suggestion(e.get_option_name(), option_names(desc)));
  } catch (const po::too_many_positional_options_error&) {
    throw UsageError(
        positional ? fmt::format("more than one value without an option name: only the {} may "
                                 "be given so (every other value follows its --option)",
                                 positional)
                   : "a value without an option name: every value follows its --option");
  } catch (const po::error& e) {
    throw UsageError(describe(e, args));
  }
  if (vm.count("config")) {
    const std::string path = vm["config"].as<std::string>();
    for (const auto& opt : read_config_file(path, desc)) {
      try {
        // an empty value (`prompt = ""`) as its own argument: Boost refuses `--prompt=`
        po::store(parse_args(opt.value.empty()
                                 ? std::vector<std::string>{"--" + opt.key, ""}
                                 : std::vector<std::string>{"--" + opt.key + "=" + opt.value},
                             desc),
                  vm);
      } catch (const po::error& e) {
        throw UsageError(
            fmt::format("{}:{}: {}", path, opt.line, describe(e, {opt.key, opt.value})));
      } catch (const UsageError& e) {
        throw UsageError(fmt::format("{}:{}: {}", path, opt.line, e.what()));
      }
    }
  }
  if (vm.count("help")) return vm;  // --help needs none of the required options
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(describe(e, args));
  }
  return vm;
}

}  // namespace cli

void boost::validate(boost::any& v, const std::vector<std::string>& values, train::TaskHandle*,
                     int) {
  program_options::validators::check_first_occurrence(v);
  v = boost::any(cli::parse_task_option(program_options::validators::get_single_string(values)));
}
