#include "io/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "io/atomic_file.h"
#include "io/hdf5.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTOGRAD_HAS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(ATTOGRAD_HAS_ASAN)
extern "C" void __sanitizer_set_death_callback(void (*callback)(void));
#endif

namespace io {

namespace {

using h5::check;
using h5::check_status;
using h5::Handle;

// The file is built in memory (HDF5's core driver) and written with POSIX calls, so a
// full disk or an unwritable folder is an errno message and never a half-written file.
std::string checkpoint_image(const Checkpoint& c) {
  Handle fapl = check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
  check_status(H5Pset_fapl_core(fapl, 1 << 20, /*backing_store=*/0), "H5Pset_fapl_core");
  Handle file = check(H5Fcreate("checkpoint-image.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "H5Fcreate");

  h5::write_attr_string(file, "format", kFormatName);
  h5::write_attr_int(file, "format_version", kFormatVersion);
  h5::write_attr_string(file, "config", c.config.dump());
  h5::write_attr_int(file, "step", c.step);

  Handle model = h5::create_group(file, "model");
  for (const auto& [name, t] : c.model) h5::write_tensor(model, name, t);

  if (c.optimizer) {
    Handle opt = h5::create_group(file, "optimizer");
    h5::write_attr_string(opt, "type", c.optimizer->type);
    for (const auto& [key, value] : c.optimizer->scalars) {
      if (key == "step")
        h5::write_attr_int(opt, key, static_cast<int64_t>(value));
      else
        h5::write_attr_double(opt, key, value);
    }
    // "m/<param>" becomes dataset <param> in sub-group m, made in the order first seen
    for (const auto& [name, t] : c.optimizer->tensors) {
      const auto slash = name.find('/');
      if (slash != std::string::npos && !h5::exists(opt, name.substr(0, slash)))
        h5::create_group(opt, name.substr(0, slash));
      h5::write_tensor(opt, name, t);
    }
  }

  Handle tok = h5::create_group(file, "tokenizer");
  h5::write_attr_string(tok, "type", c.tokenizer.type);
  if (c.tokenizer.type == "char") h5::write_u32(tok, "vocab", c.tokenizer.vocab);

  if (!c.rng.empty()) {
    Handle rng = h5::create_group(file, "rng");
    h5::write_attr_string(rng, "algorithm", "xoshiro256** (four uint64 words)");
    for (const auto& [name, state] : c.rng)
      h5::write_u64(rng, name, std::vector<uint64_t>(state.begin(), state.end()));
  }

  check_status(H5Fflush(file, H5F_SCOPE_GLOBAL), "H5Fflush");
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  if (size < 0) check_status(-1, "H5Fget_file_image");
  std::string bytes(static_cast<size_t>(size), '\0');
  if (H5Fget_file_image(file, bytes.data(), bytes.size()) != size) check_status(-1, "H5Fget_file_image");
  return bytes;
}

Handle open_image(const std::string& bytes, const std::string& source) {
  // HDF5's signature, at offset 0 (or 512, 1024, ... after a user block)
  static const std::string kSignature("\x89HDF\r\n\x1a\n", 8);
  bool signed_file = false;
  for (size_t at = 0; at + 8 <= bytes.size() && !signed_file; at = at ? at * 2 : 512)
    signed_file = bytes.compare(at, 8, kSignature) == 0;
  if (!signed_file)
    throw CheckpointError(fmt::format("'{}' is not an HDF5 file ({} bytes, no HDF5 signature)",
                                      source, bytes.size()));
  Handle fapl = check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
  check_status(H5Pset_fapl_core(fapl, 1 << 20, 0), "H5Pset_fapl_core");
  check_status(H5Pset_file_image(fapl, const_cast<char*>(bytes.data()), bytes.size()), "H5Pset_file_image");
  const hid_t file = H5Fopen("checkpoint-image.h5", H5F_ACC_RDONLY, fapl);
  if (file < 0) {
    const std::string why = h5::last_error();
    throw CheckpointError(fmt::format("'{}' is a damaged or truncated HDF5 file ({})", source,
                                      why.empty() ? "HDF5 cannot open it" : why));
  }
  return Handle(file);
}

// Datasets of a group (and, one level down, of its sub-groups as "sub/name").
void for_each_dataset(hid_t group, const std::string& group_path, bool descend,
                      const std::function<void(const std::string&)>& fn) {
  for (const std::string& name : h5::member_names(group)) {
    if (h5::is_dataset(group, name)) {
      fn(name);
    } else if (descend && h5::is_group(group, name)) {
      Handle sub = check(H5Gopen2(group, name.c_str(), H5P_DEFAULT), fmt::format("opening {}/{}", group_path, name));
      for_each_dataset(sub, group_path + "/" + name, false,
                       [&](const std::string& leaf) { fn(name + "/" + leaf); });
    } else {
      throw std::runtime_error(fmt::format("{}/{} is not a dataset", group_path, name));
    }
  }
}

void read_model(hid_t file, Checkpoint& c) {
  if (!h5::is_group(file, "model")) throw std::runtime_error("it has no /model group");
  Handle model = check(H5Gopen2(file, "model", H5P_DEFAULT), "opening /model");
  for_each_dataset(model, "/model", false, [&](const std::string& name) {
    c.model.emplace_back(name, h5::read_float_tensor(model, name, "/model/" + name));
  });
}

void read_optimizer(hid_t file, Checkpoint& c) {
  if (!h5::exists(file, "optimizer")) return;
  if (!h5::is_group(file, "optimizer")) throw std::runtime_error("/optimizer is not a group");
  Handle opt = check(H5Gopen2(file, "optimizer", H5P_DEFAULT), "opening /optimizer");
  OptimizerSection s;
  s.type = h5::read_attr_string(opt, "type", "/optimizer");
  for (const std::string& key : h5::attr_names(opt)) {
    if (key == "type") continue;
    if (h5::attr_is_string(opt, key)) continue;  // notes a foreign writer may add
    s.scalars.emplace_back(key, h5::read_attr_double(opt, key, "/optimizer"));
  }
  for_each_dataset(opt, "/optimizer", true, [&](const std::string& name) {
    s.tensors.emplace_back(name, h5::read_float_tensor(opt, name, "/optimizer/" + name));
  });
  c.optimizer = std::move(s);
}

void read_tokenizer(hid_t file, Checkpoint& c) {
  if (!h5::is_group(file, "tokenizer")) throw std::runtime_error("it has no /tokenizer group");
  Handle tok = check(H5Gopen2(file, "tokenizer", H5P_DEFAULT), "opening /tokenizer");
  c.tokenizer.type = h5::read_attr_string(tok, "type", "/tokenizer");
  if (c.tokenizer.type != "char") return;
  if (!h5::is_dataset(tok, "vocab"))
    throw std::runtime_error("/tokenizer has type 'char' but no 'vocab' dataset");
  std::vector<hsize_t> dims;
  auto v = h5::read_int_values(tok, "vocab", "/tokenizer/vocab", 0, 0x10FFFF, &dims);
  if (dims.size() != 1) throw std::runtime_error("/tokenizer/vocab must be one-dimensional");
  c.tokenizer.vocab.assign(v.begin(), v.end());
}

void read_rng(hid_t file, Checkpoint& c) {
  if (!h5::exists(file, "rng")) return;
  if (!h5::is_group(file, "rng")) throw std::runtime_error("/rng is not a group");
  Handle rng = check(H5Gopen2(file, "rng", H5P_DEFAULT), "opening /rng");
  for_each_dataset(rng, "/rng", false, [&](const std::string& name) {
    std::vector<hsize_t> dims;
    auto words = h5::read_u64_values(rng, name, "/rng/" + name, &dims);
    if (dims.size() != 1 || words.size() != 4)
      throw std::runtime_error(fmt::format("/rng/{} must hold 4 uint64 words, it holds {}", name, words.size()));
    if (words[0] == 0 && words[1] == 0 && words[2] == 0 && words[3] == 0)
      throw std::runtime_error(fmt::format("/rng/{} is all zeros, not a valid generator state", name));
    c.rng.emplace_back(name, ag::Generator::State{words[0], words[1], words[2], words[3]});
  });
}

std::string read_checkpoint_file(const std::string& path) {
  try {
    return read_whole_file(path);
  } catch (const std::exception& e) {
    throw CheckpointError(e.what());
  }
}

Checkpoint read_checkpoint_image(const std::string& bytes, const std::string& source) {
  h5::silence_library_errors();
  Handle file = open_image(bytes, source);
  Checkpoint c;
  c.source = source;
  try {
    if (!h5::attr_exists(file, "format"))
      throw CheckpointError(fmt::format(
          "'{}' is an HDF5 file but not an attograd checkpoint (no root attribute 'format')", source));
    const std::string format = h5::read_attr_string(file, "format", "the root");
    if (format != kFormatName)
      throw CheckpointError(fmt::format("'{}' is not an attograd checkpoint: its format is '{}', not '{}'",
                                        source, format, kFormatName));
    const int64_t version = h5::read_attr_int(file, "format_version", "the root");
    if (version != kFormatVersion)
      throw CheckpointError(fmt::format("'{}' has checkpoint format version {}; this attograd reads version {}",
                                        source, version, kFormatVersion));
    const std::string config = h5::read_attr_string(file, "config", "the root");
    c.config = nlohmann::json::parse(config, nullptr, /*allow_exceptions=*/false);
    if (!c.config.is_object())
      throw CheckpointError(fmt::format("'{}': root attribute 'config' is not a JSON object: '{}'", source,
                                        config.substr(0, 80)));
    c.step = h5::attr_exists(file, "step") ? h5::read_attr_int(file, "step", "the root") : 0;
    if (c.step < 0) throw CheckpointError(fmt::format("'{}': step {} is negative", source, c.step));
    read_model(file, c);
    read_optimizer(file, c);
    read_tokenizer(file, c);
    read_rng(file, c);
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    throw CheckpointError(fmt::format("'{}': {}", source, e.what()));
  }
  return c;
}

VerifyReport verify_checkpoint_image(const std::string& bytes, const std::string& path) {
  h5::silence_library_errors();
  Handle file = open_image(bytes, path);
  VerifyReport r;
  std::function<void(hid_t, const std::string&)> walk = [&](hid_t group, const std::string& prefix) {
    std::vector<std::string> names;
    try {
      names = h5::member_names(group);
    } catch (const std::exception& e) {
      r.failures.push_back(fmt::format("{}: {}", prefix.empty() ? "/" : prefix, e.what()));
      return;
    }
    for (const std::string& name : names) {
      const std::string full = prefix + "/" + name;
      try {
        if (h5::is_group(group, name)) {
          Handle sub = check(H5Gopen2(group, name.c_str(), H5P_DEFAULT), "opening " + full);
          walk(sub, full);
        } else if (h5::is_dataset(group, name)) {
          r.checked.push_back(full);
          Handle dset = check(H5Dopen2(group, name.c_str(), H5P_DEFAULT), "opening " + full);
          h5::read_all(dset, full);
        }
      } catch (const std::exception& e) {
        r.failures.push_back(e.what());  // names the object already
      }
    }
  };
  Handle root = check(H5Gopen2(file, "/", H5P_DEFAULT), "opening the root group");
  walk(root, "");
  return r;
}

constexpr int kSanitizerExit = 70;  // the probe child's exit status after a sanitizer report

// libhdf5 (1.10) is not hardened against hostile files: a damaged chunk index can make it
// read out of bounds and crash (our fuzzer found such files in seconds). So a file is
// first read in a forked child: if the library crashes there, the parent reports the file
// as damaged instead of dying; if the child survives, the same deterministic read is safe
// in this process. The second read costs what the first did (milliseconds per MB). The
// same goes for a file that makes the library loop forever: the child is given a time
// limit.
void survive_probe_read(const std::string& source, size_t bytes_hint,
                        const std::function<void()>& read) {
  if (std::getenv("ATTOGRAD_NO_PROBE_READ")) return;  // e.g. under a debugger
  // the child holds the write end of a pipe until it exits, however it exits, so the
  // parent wakes the moment it is done rather than polling
  int done[2];
  if (::pipe2(done, O_CLOEXEC) != 0) return;  // no pipe to spare: read directly
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {  // no child to spare: read directly
    ::close(done[0]), ::close(done[1]);
    return;
  }
  if (pid == 0) {
    ::close(done[0]);
    // die of the crash, so the parent sees it: no handler of a debugger, fuzzer or
    // sanitizer may turn it into a report of this (child) process
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) std::signal(sig, SIG_DFL);
#if defined(__SANITIZE_ADDRESS__) || defined(ATTOGRAD_HAS_ASAN)
    __sanitizer_set_death_callback([] { ::_exit(kSanitizerExit); });
#endif
    try {
      read();
    } catch (...) {
    }
    ::_exit(0);  // the parent reads again and gets the same error, if any
  }
  ::close(done[1]);
  // a damaged file can also send the library into an endless loop: give the read a
  // generous time for its size, then give up on the file
  const double limit_s = 3.0 + static_cast<double>(bytes_hint) / 50e6;  // 1 GB: 23 s
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  bool finished = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd wait_for_exit{done[0], POLLIN, 0};
    const int r = ::poll(&wait_for_exit, 1, static_cast<int>(left.count()));
    if (r > 0) {
      finished = true;
      break;
    }
    if (r < 0 && errno != EINTR) {
      finished = true;  // cannot time it: wait for the child as it is
      break;
    }
  }
  ::close(done[0]);
  if (!finished) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return;
  }
  if (!finished)
    throw CheckpointError(fmt::format(
        "'{}' is damaged: the HDF5 library did not finish reading it in {:.0f} s", source, limit_s));
  if (WIFSIGNALED(status))
    throw CheckpointError(fmt::format(
        "'{}' is damaged: the HDF5 library crashed reading it (signal {}, {})", source,
        WTERMSIG(status), strsignal(WTERMSIG(status))));
  if (WIFEXITED(status) && WEXITSTATUS(status) == kSanitizerExit)
    throw CheckpointError(fmt::format(
        "'{}' is damaged: the HDF5 library crashed reading it (a memory error caught by the sanitizer)",
        source));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw CheckpointError(fmt::format("'{}' is damaged: the HDF5 library failed reading it (exit status {})",
                                      source, WIFEXITED(status) ? WEXITSTATUS(status) : -1));
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  h5::silence_library_errors();
  std::string bytes;
  try {
    bytes = checkpoint_image(ckpt);
  } catch (const std::exception& e) {
    throw CheckpointError(fmt::format("cannot build checkpoint '{}': {}", path, e.what()));
  }
  try {
    write_file_atomically(path, bytes);
  } catch (const std::exception& e) {
    throw CheckpointError(e.what());
  }
}

Checkpoint load_checkpoint_image(const std::string& bytes, const std::string& source) {
  survive_probe_read(source, bytes.size(), [&] { read_checkpoint_image(bytes, source); });
  return read_checkpoint_image(bytes, source);
}

VerifyReport verify_checkpoint(const std::string& path) {
  const std::string bytes = read_checkpoint_file(path);
  survive_probe_read(path, bytes.size(), [&] { verify_checkpoint_image(bytes, path); });
  return verify_checkpoint_image(bytes, path);
}

Checkpoint load_checkpoint(const std::string& path) {
  return load_checkpoint_image(read_checkpoint_file(path), path);
}

void load_model_weights(const Checkpoint& ckpt, nn::Module& model) {
  try {
    model.load_state_dict(ckpt.model);
  } catch (const std::exception& e) {
    throw CheckpointError(fmt::format("'{}' does not fit the model: {}", ckpt.source, e.what()));
  }
}

}  // namespace io
