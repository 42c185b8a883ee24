#include "serve/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

namespace serve {

namespace {

using Clock = std::chrono::steady_clock;

thread_local int t_socket = -1;
thread_local bool t_close_after = false;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

// Waits until the socket is ready for `events` or `deadline` passes, in slices of at most
// 100 ms so that a stopped server is noticed; false on the deadline, a stop or an error.
bool wait_for(int sock, short events, Clock::time_point deadline,
              const std::function<bool()>& stopped) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 || stopped()) return false;
    pollfd p{sock, events, 0};
    const int got = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
    if (got > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (got < 0 && errno != EINTR) return false;
  }
}

// Bytes received on a connection and not yet read: cpp-httplib reads a request's head a
// byte at a time, which straight off the socket cost a poll and a recv each (a 1-token
// request took 495 us of the server's CPU, 270-335 through this buffer: Zen 3). Kept for
// the connection, not the request, so that a pipelined next request's first bytes wait
// here for it.
struct ReceiveBuffer {
  char bytes[4096];
  size_t begin = 0, end = 0;
  size_t held() const { return end - begin; }
};

// The socket of one request: reads bounded by the request's deadline and byte budget and
// the idle time between bytes, writes by the write time.
class BoundedStream : public httplib::Stream {
 public:
  BoundedStream(int sock, ReceiveBuffer& received, const TransportLimits& limits,
                std::function<bool()> stopped)
      : sock_(sock),
        received_(received),
        limits_(limits),
        deadline_(after(limits.request_seconds)),
        budget_(limits.head_bytes + limits.body_bytes),
        stopped_(std::move(stopped)) {}

  bool is_readable() const override {
    return received_.held() > 0 || wait_for(sock_, POLLIN, read_deadline(), stopped_);
  }
  bool is_writable() const override {
    return wait_for(sock_, POLLOUT, after(limits_.write_seconds), [] { return false; });
  }
  // Up to `size` bytes, at most the request's budget: from what the buffer holds, else
  // one recv into it (the budget counts what is read, not what is received ahead)
  ssize_t read(char* ptr, size_t size) override {
    if (budget_ == 0) return -1;
    if (received_.held() == 0) {
      ssize_t n = -1;
      do {
        if (!is_readable()) return -1;
        n = ::recv(sock_, received_.bytes, sizeof(received_.bytes), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      received_.begin = 0, received_.end = static_cast<size_t>(n);
    }
    const size_t n = std::min({size, budget_, received_.held()});
    std::memcpy(ptr, received_.bytes + received_.begin, n);
    received_.begin += n;
    budget_ -= n;
    return static_cast<ssize_t>(n);
  }
  // Sent at once where the socket takes it (a streamed token's write is one send, not a
  // poll and a send), else waited for at most the write time
  ssize_t write(const char* ptr, size_t size) override {
    size_t sent = 0;
    while (sent < size) {
      const ssize_t n = ::send(sock_, ptr + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!is_writable()) return -1;
      } else {
        return -1;
      }
    }
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(::getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  Clock::time_point read_deadline() const {
    return std::min(deadline_, after(limits_.idle_seconds));
  }
  void address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t length = sizeof(a);
    char text[INET6_ADDRSTRLEN] = "";
    port = 0;
    if (get(sock_, reinterpret_cast<sockaddr*>(&a), &length) != 0) return;
    if (a.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
      inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
      port = ntohs(v4->sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
      inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }

  int sock_;
  ReceiveBuffer& received_;
  TransportLimits limits_;
  Clock::time_point deadline_;
  size_t budget_;
  std::function<bool()> stopped_;
};

}  // namespace

BoundedPool::BoundedPool(int workers, size_t queued) : queued_(queued) {
  for (int i = 0; i < workers; ++i)
    threads_.emplace_back([this] {
      for (;;) {
        std::function<void()> job;
        {
          std::unique_lock lock(mutex_);
          ready_.wait(lock, [&] { return shutdown_ || !jobs_.empty(); });
          if (jobs_.empty()) return;  // shut down, nothing left
          job = std::move(jobs_.front());
          jobs_.pop_front();
        }
        room_.notify_one();
        job();
      }
    });
}

void BoundedPool::enqueue(std::function<void()> fn) {
  {
    std::unique_lock lock(mutex_);
    room_.wait(lock, [&] { return jobs_.size() < queued_ || shutdown_; });
    jobs_.push_back(std::move(fn));
  }
  ready_.notify_one();
}

void BoundedPool::shutdown() {
  {
    std::lock_guard lock(mutex_);
    shutdown_ = true;
  }
  ready_.notify_all();
  room_.notify_all();
  for (std::thread& t : threads_) t.join();
}

BoundedServer::BoundedServer(const TransportLimits& limits) : limits_(limits) {
  new_task_queue = [limits] { return new BoundedPool(limits.workers, limits.queued_connections); };
  set_payload_max_length(limits.body_bytes);
  set_socket_options([this](socket_t sock) {  // the listening socket, before its bind
    const int on = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    listening_ = sock;
  });
}

bool BoundedServer::widen_backlog() const {
  return listening_ != INVALID_SOCKET && ::listen(listening_, limits_.backlog) == 0;
}

// cpp-httplib's request loop (process_request) over our stream: a fresh deadline and byte
// budget for each request of a kept-alive connection.
bool BoundedServer::process_and_close_socket(socket_t sock) {
  t_socket = sock;
  const int on = 1;  // a streamed token is sent at once, not held for the next one's bytes
  ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  const auto stopped = [this] { return !is_running(); };
  bool ok = true;
  ReceiveBuffer received;
  for (size_t served = 0; served < limits_.keep_alive_requests && is_running(); ++served) {
    if (served > 0 && received.held() == 0 &&
        !wait_for(sock, POLLIN, after(limits_.idle_seconds), stopped))
      break;
    BoundedStream stream(sock, received, limits_, stopped);
    t_close_after = false;
    bool closed = false;
    const bool last = served + 1 == limits_.keep_alive_requests;
    ok = process_request(stream, last, closed, [](httplib::Request&) {});
    if (!ok || closed || t_close_after) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  t_socket = -1;
  return ok;
}

bool client_gone() {
  if (t_socket < 0) return false;
  pollfd p{t_socket, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  char byte;
  return ::recv(t_socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

void close_after_response() {
  t_close_after = true;
}

}  // namespace serve
