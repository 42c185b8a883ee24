// `attograd gradcheck`: the float64 central-difference check of every gradcheck case of
// the op table (autograd/op_cases.h), one line per case. The Catch2 suite runs the same
// cases; this is the proof a user can run anywhere.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "autograd/autograd.h"
#include "autograd/op_cases.h"
#include "base/error_text.h"
#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "train/console.h"

namespace cli {

namespace {

struct GradcheckFlags {
  std::optional<double> eps, atol, rtol;  // unset: each case's own tolerance
  std::string filter;                     // only cases whose name contains this
  int threads = ag::kDefaultThreads;
};

GradcheckFlags parse_gradcheck_flags(const Args& args, bool& help) {
  GradcheckFlags flags;
  po::options_description desc("gradcheck options");
  desc.add_options()("help,h", "show this help")("eps", po::value<double>(),
                                                 "central difference step, for every case")(
      "atol", po::value<double>(), "absolute tolerance, for every case")(
      "rtol", po::value<double>(), "relative tolerance, for every case")(
      "filter", po::value(&flags.filter), "only the cases whose name contains this")(
      "threads", po::value(&flags.threads)->default_value(ag::kDefaultThreads), "threads");
  auto vm = parse_options(args, desc);
  help = vm.count("help") > 0;
  if (vm.count("eps")) flags.eps = vm["eps"].as<double>();
  if (vm.count("atol")) flags.atol = vm["atol"].as<double>();
  if (vm.count("rtol")) flags.rtol = vm["rtol"].as<double>();
  if (!(flags.eps.value_or(1) > 0) || !(flags.atol.value_or(0) >= 0) ||
      !(flags.rtol.value_or(0) >= 0))
    throw UsageError("--eps must be positive and --atol, --rtol non-negative");
  if (flags.threads < 1)
    throw UsageError(fmt::format("--threads must be >= 1, got {}", flags.threads));
  return flags;
}

// `base` with the flags given on the command line in place of its values.
ag::GradcheckOptions overridden(ag::GradcheckOptions base, const GradcheckFlags& flags) {
  base.eps = flags.eps.value_or(base.eps);
  base.atol = flags.atol.value_or(base.atol);
  base.rtol = flags.rtol.value_or(base.rtol);
  return base;
}

// Empty where a case is checked with the tolerances in the header, else its own.
std::string note(const ag::GradcheckOptions& o, const ag::GradcheckOptions& header) {
  if (o.eps == header.eps && o.atol == header.atol && o.rtol == header.rtol) return "";
  return fmt::format("  (eps {:g}, atol {:g}, rtol {:g})", o.eps, o.atol, o.rtol);
}

}  // namespace

int gradcheck_command(const Args& args) {
  GradcheckFlags flags;
  try {
    bool help = false;
    flags = parse_gradcheck_flags(args, help);
    if (help) {
      fmt::print(
          "usage: attograd gradcheck [--eps E --atol A --rtol R] [--filter TEXT] [--threads N]\n");
      return 0;
    }
  } catch (const UsageError& e) {
    train::noticef("attograd gradcheck: error: {}\n",
                   base::printable(base::without_error_prefix(e.what())));
    return 2;
  }
  ag::set_num_threads(flags.threads);
  std::vector<const ag::OpCase*> cases;
  for (const ag::OpCase& c : ag::op_cases())
    if (c.gradcheck() && c.name.find(flags.filter) != std::string::npos) cases.push_back(&c);
  size_t width = 4;
  for (const ag::OpCase* c : cases) width = std::max(width, c->name.size());

  const ag::GradcheckOptions header = overridden(ag::Tolerance{}.gradcheck_options(), flags);
  fmt::print(
      "float64 central differences over the op cases of autograd/op_cases.h; pass when\n"
      "|analytic - numeric| <= atol + rtol |numeric|, with eps {:g}, atol {:g}, rtol {:g} "
      "unless noted\n\n{:<{}} {:>9} {:>12}\n",
      header.eps, header.atol, header.rtol, "case", width, "entries", "max error");
  int failed = 0;
  for (const ag::OpCase* c : cases) {
    const ag::GradcheckOptions options = overridden(c->tolerance.gradcheck_options(), flags);
    ag::GradcheckResult r = ag::gradcheck_case(*c, &options);
    fmt::print("{:<{}} {:>9} {:>12.2e} {:>4}{}\n", c->name, width, r.checked, r.error,
               r.ok ? "ok" : "FAIL", note(options, header));
    if (!r.ok) {
      fmt::print("    {}\n", r.message);
      ++failed;
    }
  }
  fmt::print("\n{} passed, {} failed\n", cases.size() - failed, failed);
  return failed ? 1 : 0;
}

}  // namespace cli
