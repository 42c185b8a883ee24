// ag::TeamChooser, the policy of ag::AdaptiveThreads, on made-up step times: it keeps every
// thread on a quiet machine, gives one up when another program takes a core, and takes it
// back when the core is free again. (That the team never changes the bits is
// test_determinism.cpp's "a team of threads that changes between steps ...".)
#include <catch2/catch.hpp>
#include <functional>
#include <stdexcept>
#include <vector>

#include "autograd/adaptive_threads.h"

namespace {

// The teams of `steps` steps whose time is time(step, team).
std::vector<int> teams(ag::TeamChooser& chooser, int steps,
                       const std::function<double(int, int)>& time) {
  std::vector<int> out;
  for (int s = 0; s < steps; ++s) {
    out.push_back(chooser.next());
    chooser.observed(time(s, out.back()));
  }
  return out;
}

int count(const std::vector<int>& v, int team, size_t from = 0) {
  int n = 0;
  for (size_t i = from; i < v.size(); ++i) n += v[i] == team;
  return n;
}

// Quiet: two threads take 10 ms, one 17 ms (a core's share of the work plus a little).
double quiet(int team) {
  return team == 2 ? 10 : 17;
}
// One core busy with another program: the team of two waits for its slowed thread.
double loaded(int team) {
  return team == 2 ? 30 : 17;
}

}  // namespace

TEST_CASE("a quiet machine keeps every thread after one try of fewer") {
  ag::TeamChooser chooser(2);
  const auto t = teams(chooser, 100, [](int s, int team) { return s == 0 ? 50 : quiet(team); });
  REQUIRE(count(t, 1) == 1);  // the one try, early
  REQUIRE(count(t, 1, 5) == 0);
}

TEST_CASE("steps that vary a little never try fewer threads") {
  ag::TeamChooser chooser(2);
  const auto t =
      teams(chooser, 200, [](int s, int team) { return quiet(team) * (1 + 0.02 * (s % 7)); });
  REQUIRE(count(t, 1, 5) == 0);
}

TEST_CASE("a core taken by another program shrinks the team within a few steps") {
  ag::TeamChooser chooser(2);
  const auto t =
      teams(chooser, 60, [](int s, int team) { return s < 20 ? quiet(team) : loaded(team); });
  REQUIRE(count(t, 1, 5) > 0);
  REQUIRE(t[22] == 1);  // two slow steps show the drift; the next tries one thread, kept
  // while the core stays busy, tries of two threads come ever more rarely
  REQUIRE(count(t, 2, 30) <= 4);  // two tries, of two steps each
}

TEST_CASE("a machine busy from the start runs on fewer threads") {
  ag::TeamChooser chooser(2);
  const auto t = teams(chooser, 40, [](int, int team) { return loaded(team); });
  REQUIRE(count(t, 1, 5) >= 28);
}

TEST_CASE("the team grows back once the core is free again") {
  ag::TeamChooser chooser(2);
  const auto t =
      teams(chooser, 120, [](int s, int team) { return s < 60 ? loaded(team) : quiet(team); });
  REQUIRE(t[50] == 1);
  REQUIRE(count(t, 2, 100) == 20);  // back within kMaxReprobe steps, and staying
}

TEST_CASE("one thread asked for is one thread kept") {
  ag::TeamChooser chooser(1);
  REQUIRE(count(teams(chooser, 50, [](int, int team) { return loaded(team); }), 1) == 50);
  REQUIRE_THROWS_AS(ag::TeamChooser(0), std::invalid_argument);
}
