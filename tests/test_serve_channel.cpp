// serve::Channel, between the decoder's thread and a request's handler: tokens gather while
// the handler waits for its next write, and a choice's end cuts the wait short.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "serve/engine.h"

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST_CASE("a handler gathering tokens waits out its time and its choice's end wakes it",
          "[serve]") {
  serve::Channel channel(1);
  // tokens alone: the gathering lasts its whole time, and they all wait for the next write
  const auto start = Clock::now();
  std::thread decoder([&] {
    for (int64_t id = 0; id < 5; ++id) channel.push(serve::TokenEvent::token(0, id));
  });
  channel.gather_until(start + milliseconds(200));
  decoder.join();
  CHECK(Clock::now() - start >= milliseconds(200));
  serve::TokenEvent e;
  for (int64_t id = 0; id < 5; ++id) {
    REQUIRE(channel.pop(e, milliseconds(0)));
    CHECK(e.id == id);
  }
  CHECK_FALSE(channel.pop(e, milliseconds(0)));

  // the end of the choice: the gathering stops long before its time (a stream's last write
  // never waits)
  const auto again = Clock::now();
  std::thread ending([&] {
    std::this_thread::sleep_for(milliseconds(20));
    channel.push(serve::TokenEvent::token(0, 7));
    channel.push(serve::TokenEvent::end(0, serve::Finish::length));
  });
  channel.gather_until(again + std::chrono::seconds(30));
  ending.join();
  CHECK(Clock::now() - again < std::chrono::seconds(10));
  REQUIRE(channel.pop(e, milliseconds(0)));
  CHECK(e.id == 7);
  REQUIRE(channel.pop(e, milliseconds(0)));
  CHECK(e.finish == serve::Finish::length);
  // an end already queued: no wait at all
  channel.push(serve::TokenEvent::end(0, serve::Finish::stop));
  const auto queued = Clock::now();
  channel.gather_until(queued + std::chrono::seconds(30));
  CHECK(Clock::now() - queued < std::chrono::seconds(10));
}

TEST_CASE("a handler waiting for its first token is woken by it", "[serve]") {
  serve::Channel channel(1);
  const auto start = Clock::now();
  std::thread decoder([&] {
    std::this_thread::sleep_for(milliseconds(20));
    channel.push(serve::TokenEvent::token(0, 3));
  });
  serve::TokenEvent e;
  REQUIRE(channel.pop(e, milliseconds(30000)));
  decoder.join();
  CHECK(e.id == 3);
  CHECK(Clock::now() - start < std::chrono::seconds(10));
}
