#pragma once
// Internal to serve/: cpp-httplib's server with the bounds a server facing other programs
// needs and that library leaves to its user. HTTP itself (request lines, headers, chunked
// bodies, keep-alive) is parsed by cpp-httplib; what is ours is the socket it reads:
//   - a request's head and body must arrive within `request_seconds` of its first byte, and
//     no more than `head_bytes` + the body bound: a client that sends a byte now and then
//     (slowloris) is cut off at the deadline, however often it sends
//   - a wait between bytes longer than `idle_seconds` ends the connection, and so does
//     a write the client does not take within `write_seconds`
//   - connections wait for a worker in a queue of at most `queued_connections`; past it the
//     accepting thread waits, and the kernel's backlog (`backlog` connections, where
//     cpp-httplib asks for 5) holds (or refuses) the rest
//   - the port is this server's alone: SO_REUSEADDR (a restart binds at once), never the
//     SO_REUSEPORT that cpp-httplib sets, under which a second server on the same port
//     started and took a share of the connections
//   - stop() ends idle and half-read connections at once; a handler in flight finishes
//   - the socket is read through a buffer kept for the connection (cpp-httplib reads a
//     head a byte at a time), and a write is sent before any wait for the socket
// A handler may ask whether its client is still there (client_gone: the peer closed its end)
// and that its connection be closed after the response (close_after_response).
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace serve {

struct TransportLimits {
  double request_seconds = 10;  // a request's head and body, from its first byte
  double idle_seconds = 5;      // between bytes, and a kept-alive connection's next request
  double write_seconds = 10;    // a write the client does not take
  size_t head_bytes = 64 * 1024;
  size_t body_bytes = 1 << 20;
  int workers = 16;
  size_t queued_connections = 64;
  // Connections the kernel completes before the accepting thread takes them. cpp-httplib's
  // 5 overflowed when 8 clients connected at once while the decoder's threads held both
  // cores: a SYN dropped, and that client's first token came after TCP's 1 s retry.
  int backlog = 128;
  size_t keep_alive_requests = 100;
};

// Workers taking accepted connections from a bounded queue.
class BoundedPool : public httplib::TaskQueue {
 public:
  BoundedPool(int workers, size_t queued);
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  std::mutex mutex_;
  std::condition_variable ready_, room_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t queued_;
  bool shutdown_ = false;
};

class BoundedServer : public httplib::Server {
 public:
  explicit BoundedServer(const TransportLimits& limits);
  // After bind_to_port (whose listen asked for cpp-httplib's backlog): the limits' backlog
  bool widen_backlog() const;

 private:
  bool process_and_close_socket(socket_t sock) override;
  TransportLimits limits_;
  socket_t listening_ = INVALID_SOCKET;
};

// For a handler, about the connection it answers (on this thread).
bool client_gone();
void close_after_response();

}  // namespace serve
