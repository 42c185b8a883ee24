#pragma once
// Command-line and config-file options with Boost.Program_options. Option names are the
// config keys with '-' for '_' (--d-model); a config file (--config run.cfg) uses the
// same names in INI syntax (`d-model = 128`, `d_model = 128` works too; `#` or `;` starts a
// comment, and a value in double quotes keeps them, with \" and \\ escaped), and the
// command line wins over the file. An option that collects values (composing: report's
// --metrics) may repeat, in the file and on the command line, and keeps every value. Every
// problem is a UsageError with one line that names the option, the value and, for a file,
// the line.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/choice.h"
#include "train/config.h"

namespace cli {

namespace po = boost::program_options;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The name among `names` that a misspelt `name` is closest to (insertions, deletions,
// substitutions and swaps of neighbours: within 1 for names of up to 4 characters, else
// 2), or "" when none is that close: for "did you mean" in usage errors.
std::string closest_name(const std::string& name, const std::vector<std::string>& names);
// " (did you mean 'NAME'?)" for the closest of `names` (closest_name), else "".
std::string did_you_mean(const std::string& name, const std::vector<std::string>& names);

// A value with its default shown in --help as it would be typed: 0.1, not Boost's
// 0.10000000000000001.
template <typename T>
po::typed_value<T>* value_with_default(T* field, const T& value) {
  return po::value(field)->default_value(value, fmt::format("{}", value));
}

// A choice's value from its name (base/choice.h), or a UsageError naming the values and the
// one a misspelling is closest to.
template <base::Choice E>
E parse_choice_option(const std::string& text) {
  if (const std::optional<E> v = base::find_choice<E>(text)) return *v;
  const std::vector<std::string> names = base::choice_names<E>();
  throw UsageError(base::choice_error(base::ChoiceNames<E>::key, names, text) +
                   did_you_mean(text, names));
}
// The task named `text` (train/task.h), or a UsageError as above.
train::TaskHandle parse_task_option(const std::string& text);

// A config key as its option name: d_model -> d-model.
std::string option_name(std::string key);

// Parses args (without the program and subcommand names) against desc, reading
// --config FILE when desc has a "config" option. Returns the merged variables. With
// `positional`, bare arguments are that option's values (`sample run.h5` is `sample
// --checkpoint run.h5`): one of them, or with positional_count -1 any number.
po::variables_map parse_options(const std::vector<std::string>& args,
                                const po::options_description& desc,
                                const char* positional = nullptr, int positional_count = 1);

}  // namespace cli

// Boost.Program_options parses an option's value with the validate() it finds for the
// value's type: choices and tasks parse by their own tables, once, here at the edge.
namespace boost {
template <base::Choice E>
void validate(boost::any& v, const std::vector<std::string>& values, E*, int) {
  program_options::validators::check_first_occurrence(v);
  v = boost::any(
      cli::parse_choice_option<E>(program_options::validators::get_single_string(values)));
}
// A choice that may be left unset (--chat-format: absent, the checkpoint's or the task's).
template <base::Choice E>
void validate(boost::any& v, const std::vector<std::string>& values, std::optional<E>*, int) {
  program_options::validators::check_first_occurrence(v);
  v = boost::any(std::optional<E>(
      cli::parse_choice_option<E>(program_options::validators::get_single_string(values))));
}
void validate(boost::any& v, const std::vector<std::string>& values, train::TaskHandle*, int);
}  // namespace boost
