// io/ reads a checkpoint as hostile data: files written by tests/make_hostile_h5.c that
// point outside themselves (external storage, external, soft and user-defined links, virtual
// datasets), lie about their sizes, nest their JSON 100,000 deep or hold NaN weights are
// refused by name, and nothing outside them is ever read; weights without checksums load
// but verify as unchecked; the forked reader survives a library that spins, stalls or
// crashes, and a large file on a slow machine is never called damaged.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/atomic_file.h"
#include "io/checkpoint.h"
#include "io/checkpoint_builder.h"
#include "io/files.h"
#include "io/hdf5.h"
#include "io/read_child.h"
#include "io/read_frames.h"
#include "support.h"
#include "train/train.h"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace io {
bool operator==(const VerifyReport& a, const VerifyReport& b) {
  return a.checked == b.checked && a.failures == b.failures && a.unchecked == b.unchecked &&
         a.refused == b.refused;
}
}  // namespace io

namespace {

const std::string kSecret = "TOP SECRET: no checkpoint may ever pull this file into its weights.\n";

// A fresh folder with the named hostile files in it (and the secret file they aim at).
struct Hostile {
  ag_test::TempDir temp;
  const fs::path& dir = temp.path;
  explicit Hostile(const std::vector<std::string>& files) {
    temp.write("secret.txt", kSecret);
    if (files.empty()) return;
    std::string command =
        fmt::format("'{}' '{}' '{}'", ATTOGRAD_MAKE_HOSTILE_H5, dir.string(), secret());
    for (const auto& f : files) command += " " + f;
    REQUIRE(std::system(command.c_str()) == 0);
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
  std::string secret() const { return (dir / "secret.txt").string(); }
};

std::string load_error(const std::string& path, const io::LoadOptions& options = {}) {
  try {
    io::load_checkpoint(path, options);
  } catch (const io::CheckpointError& e) {
    return e.what();
  }
  return "(it loaded)";
}

// Refused by name, by every way of reading it, and nothing of it loaded.
void require_refused(const std::string& path, const std::string& object, const std::string& why) {
  INFO(path);
  const std::string error = load_error(path);
  REQUIRE_THAT(error, Contains(path) && Contains(object) && Contains(why));
  REQUIRE_THAT(load_error(path, {.allow_non_finite = true}), Contains(object));
  REQUIRE_THROWS_WITH(io::parse_checkpoint_in_process(base::read_input_file(path, "file"), path),
                      Contains(object));
  const io::Inspection inspection = io::inspect_checkpoint(path);
  REQUIRE_FALSE(inspection.checkpoint);
  REQUIRE(inspection.load_error == error);
  const io::VerifyReport report = io::verify_checkpoint(path);
  REQUIRE_FALSE(report.all_checked());
  REQUIRE(report.refused.size() == 1);
  REQUIRE_THAT(report.refused[0], Contains(object) && Contains(why));
  REQUIRE(report == inspection.report);
}

io::Checkpoint small_checkpoint(int64_t step) {
  io::Checkpoint c;
  c.step = step;
  c.model = {{"w", ag::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})}};
  c.tokenizer.type = "byte";
  return c;
}

// Runs in a temporary folder, back where it was afterwards.
struct InFolder {
  fs::path before = fs::current_path();
  explicit InFolder(const fs::path& dir) { fs::current_path(dir); }
  ~InFolder() { fs::current_path(before); }
};

}  // namespace

TEST_CASE("a dataset with external storage is refused and the file it names is never read") {
  Hostile h({"external_storage.h5"});
  require_refused(h.file("external_storage.h5"), "/model/tok_emb.weight", "outside the checkpoint");
  REQUIRE_THAT(load_error(h.file("external_storage.h5")),
               Contains(h.secret()) && !Contains("TOP SECRET"));
}

TEST_CASE("an external link is refused without being followed") {
  Hostile h({"secret.h5", "external_link.h5", "external_link_fifo.h5"});
  require_refused(h.file("external_link.h5"), "/model/tok_emb.weight",
                  "external link to '/data' in the file 'secret.h5'");
  // aimed at a FIFO: a reader that opened it would wait there for a writer forever
  REQUIRE(::mkfifo(h.file("fifo.h5").c_str(), 0600) == 0);
  io::detail::ChildLimits quick;
  quick.stall_wall_s = 10;
  REQUIRE_THROWS_WITH(io::detail::load_checkpoint(h.file("external_link_fifo.h5"), {}, quick),
                      Contains("external link to '/data' in the file 'fifo.h5'"));
}

TEST_CASE("a soft link anywhere in the file is refused by name") {
  Hostile h({"soft_link.h5"});
  const std::string path = h.file("soft_link.h5");
  require_refused(path, "/notes/alias", "soft link to '/model/tok_emb.weight'");
  // the rest of the file is still verified
  REQUIRE(io::verify_checkpoint(path).checked == std::vector<std::string>{"/model/tok_emb.weight"});
}

TEST_CASE("a user-defined link is refused by name") {
  Hostile h({"user_link.h5"});
  require_refused(h.file("user_link.h5"), "/notes/custom", "user-defined link (class 187)");
}

TEST_CASE("a virtual dataset is refused by name") {
  Hostile h({"secret.h5", "virtual.h5"});
  require_refused(h.file("virtual.h5"), "/model/tok_emb.weight", "virtual dataset");
}

TEST_CASE("a dataset with a filter attograd does not know is refused by name") {
  Hostile h({"odd_filter.h5"});
  require_refused(h.file("odd_filter.h5"), "/model/tok_emb.weight", "HDF5 filter 32001");
}

TEST_CASE("a group that links back to the root is refused instead of walked forever") {
  Hostile h({"cycle.h5"});
  require_refused(h.file("cycle.h5"), "/notes/loop", "a second link to a group already seen");
}

TEST_CASE(
    "datasets that declare far more than they store are refused before anything is allocated") {
  Hostile h({"huge_unallocated.h5", "huge_contiguous.h5", "deflate_bomb.h5"});
  const auto start = std::chrono::steady_clock::now();
  require_refused(h.file("huge_unallocated.h5"), "/model/tok_emb.weight",
                  "(40.0 GB) in 10000 chunks but stores 0");
  require_refused(h.file("huge_contiguous.h5"), "/model/tok_emb.weight",
                  "(10.0 GB) but stores none of it");
  // 256 MB of zeros deflated to about a megabyte: more than 16 times the file's size
  const std::string bomb = h.file("deflate_bomb.h5");
  REQUIRE_THAT(load_error(bomb), Contains(bomb) && Contains("268.4 MB") &&
                                     Contains("may expand to (16 times its size"));
  REQUIRE(io::verify_checkpoint(bomb).refused.size() == 1);
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
}

TEST_CASE("a config nested 100000 deep is a clear error and not a stack overflow") {
  Hostile h({"deep_json.h5"});
  const std::string path = h.file("deep_json.h5");
  REQUIRE_THAT(load_error(path),
               Contains(path) && Contains("'config': JSON nested deeper than 8 levels"));
  REQUIRE_THROWS_WITH(io::parse_checkpoint_in_process(base::read_input_file(path, "file"), path),
                      Contains("deeper than 8"));
}

TEST_CASE("config JSON is bounded in depth and string length as it is parsed") {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  const std::string object_at_8 = "{\"a\": " + nested(7) + "}";
  REQUIRE(io::detail::parse_config_json(object_at_8, "x.h5").is_object());
  REQUIRE_THROWS_WITH(io::detail::parse_config_json("{\"a\": " + nested(8) + "}", "x.h5"),
                      Contains("'x.h5'") && Contains("deeper than 8"));
  // brackets inside strings are text, not nesting
  REQUIRE(io::detail::parse_config_json("{\"a\": \"" + std::string(500, '[') + "\\\"\"}", "x.h5")
              .is_object());
  REQUIRE_THROWS_WITH(
      io::detail::parse_config_json("{\"a\": \"" + std::string(2 << 20, 'x') + "\"}", "x.h5"),
      Contains("a string of more than"));
  REQUIRE_THROWS_WITH(io::detail::parse_config_json("[1, 2]", "x.h5"),
                      Contains("not a JSON object"));
  REQUIRE_THROWS_WITH(io::detail::parse_config_json("{\"a\": ", "x.h5"),
                      Contains("not valid JSON"));
}

TEST_CASE("a config that lies about the model's size is refused before a model is built") {
  Hostile h({"lying_shapes.h5"});
  const std::string path = h.file("lying_shapes.h5");
  const io::Checkpoint ckpt = io::load_checkpoint(path);  // small data: it loads
  REQUIRE(ckpt.config["d_model"] == 100000);
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_AS(train::model_from_checkpoint(ckpt), io::CheckpointError);
  REQUIRE_THROWS_WITH(train::model_from_checkpoint(ckpt), Contains(path));
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("NaN and infinite weights are named on load or loaded with a warning when allowed") {
  Hostile h({"nan_weights.h5"});
  const std::string path = h.file("nan_weights.h5");
  const std::string message = fmt::format(
      "'{}': /model/blocks.0.attn.W_query.weight holds 3 NaN and 1 infinite values (first at [0, "
      "5])",
      path);
  REQUIRE(load_error(path) == message);

  const io::Checkpoint shown = io::load_checkpoint(path, {.allow_non_finite = true});
  REQUIRE(shown.warnings == std::vector<std::string>{message});
  REQUIRE(shown.model.size() == 2);
  REQUIRE(std::isnan(shown.model[0].second.to_vector()[5]));

  const io::Inspection inspection = io::inspect_checkpoint(path, {.allow_non_finite = true});
  REQUIRE(inspection.checkpoint);
  REQUIRE(inspection.checkpoint->warnings == std::vector<std::string>{message});
  REQUIRE(
      inspection.report.all_checked());  // the checksums are fine: the values are what was saved
  REQUIRE(io::inspect_checkpoint(path).load_error == message);
}

TEST_CASE("optimizer state no optimiser could take is refused on load by name") {
  Hostile h({"negative_moments.h5", "negative_step.h5"});
  const std::string moments = h.file("negative_moments.h5"), step = h.file("negative_step.h5");
  const std::string negative = fmt::format(
      "'{}': /optimizer/v/w holds 2 negative values (first at [1, 0]: -0.25); a second moment "
      "is a running mean of squared gradients, never negative",
      moments);
  const std::string count = fmt::format(
      "'{}': /optimizer attribute 'step': the step count is -3; it must be a whole number from "
      "0 to 2^53",
      step);
  for (const auto& [path, message] : {std::pair{moments, negative}, std::pair{step, count}}) {
    INFO(path);
    REQUIRE(load_error(path) == message);
    REQUIRE(load_error(path, {.allow_non_finite = true}) == message);  // not a NaN to show
    REQUIRE_THROWS_WITH(io::parse_checkpoint_in_process(base::read_input_file(path, "f"), path),
                        message);
    REQUIRE(io::inspect_checkpoint(path).load_error == message);
    REQUIRE(io::verify_checkpoint(path).all_checked());  // its bytes are what was written
    // weights only: the state is not read, so it cannot be in the way
    REQUIRE(io::load_checkpoint(path, {.weights_only = true}).model.size() == 1);
  }
}

TEST_CASE("a frozen weight's blocks that do not add up are refused by name, before any is read") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"packed_wrong_bytes.h5",
       "/model/w holds [2, 33] of 1-byte words, but a [2, 32] weight in q8_0 blocks is [2, 34] "
       "of 1-byte words"},
      {"packed_unknown_format.h5",
       "/model/w has format 'q3_k', which is not one attograd holds a weight in (bf16, q8_0, "
       "q4_k, q4_0, q4_1, q5_0, q5_1, q5_k, q6_k)"},
      {"packed_partial_block.h5",
       "/model/w has rows of 48 weights, not a whole number of q8_0's blocks of 32"},
      {"packed_format_mismatch.h5",
       "/model/w holds [2, 144] of 1-byte words, but a [2, 256] weight in q6_k blocks is "
       "[2, 210] of 1-byte words"},
  };
  std::vector<std::string> names;
  for (const auto& [name, why] : cases) names.push_back(name);
  Hostile h(names);
  for (const auto& [name, why] : cases) {
    const std::string path = h.file(name), message = fmt::format("'{}': {}", path, why);
    INFO(path);
    REQUIRE(load_error(path) == message);
    REQUIRE(load_error(path, {.keep_packed = true}) == message);
    REQUIRE_THROWS_WITH(io::parse_checkpoint_in_process(base::read_input_file(path, "f"), path),
                        message);
    REQUIRE(io::inspect_checkpoint(path).load_error == message);
  }
}

TEST_CASE("blocks of a weight the file's own config trains are refused where a model is built") {
  Hostile h({"packed_trained.h5"});
  const std::string path = h.file("packed_trained.h5");
  const io::Checkpoint ckpt = io::load_checkpoint(path);  // well-formed: read, dequantized
  REQUIRE(ckpt.packed.at("tok_emb.weight") == "q8_0");
  REQUIRE(ckpt.model[0].second.to_vector() == std::vector<double>(4 * 32, 0.0));
  REQUIRE_THROWS_WITH(train::model_from_checkpoint(ckpt),
                      fmt::format("'{}': /model/tok_emb.weight is held as q8_0 blocks, but the "
                                  "file's config trains it (only a frozen weight, under "
                                  "lora_rank or freeze, is held packed)",
                                  path));
}

TEST_CASE("weights exported without checksums load and verify names each as unchecked") {
  Hostile h({"h5py_weights.h5"});
  const std::string path = h.file("h5py_weights.h5");
  REQUIRE(io::load_checkpoint(path).model.size() == 2);
  const io::Inspection inspection = io::inspect_checkpoint(path);
  REQUIRE(inspection.checkpoint);
  const io::VerifyReport& r = inspection.report;
  REQUIRE(r.checked.empty());
  REQUIRE(r.failures.empty());
  REQUIRE(r.refused.empty());
  REQUIRE_FALSE(r.all_checked());
  REQUIRE(r.unchecked ==
          std::vector<std::string>{
              "/model/ln_f.bias: no checksum (contiguous storage, as h5py writes by default)",
              "/model/tok_emb.weight: no checksum (contiguous storage, as h5py writes by default)",
              "/notes/nothing: empty, nothing to check",
              "/notes/scale: a scalar, which HDF5 cannot checksum",
          });
  REQUIRE(r.datasets() == 4);
}

TEST_CASE("a FIFO or a device given as a checkpoint is refused without being read") {
  REQUIRE_THROWS_WITH(io::load_checkpoint("/dev/zero"),
                      Contains("'/dev/zero'") && Contains("a character device"));
  Hostile h({});
  REQUIRE(::mkfifo(h.file("pipe.h5").c_str(), 0600) == 0);
  REQUIRE_THROWS_WITH(io::load_checkpoint(h.file("pipe.h5")),
                      Contains("pipe.h5") && Contains("a FIFO"));
  REQUIRE_THROWS_WITH(io::verify_checkpoint(h.file("pipe.h5")), Contains("a FIFO"));
}

TEST_CASE("a file named like the old in-memory image in the working folder changes nothing") {
  Hostile h({});
  InFolder here(h.dir);
  SECTION("a file") {
    std::ofstream("checkpoint-image.h5") << "x\n";
  }
  SECTION("a FIFO, which the old name would have blocked on") {
    REQUIRE(::mkfifo("checkpoint-image.h5", 0600) == 0);
  }
  io::save_checkpoint("run.h5", small_checkpoint(7));
  REQUIRE(io::load_checkpoint("run.h5").step == 7);
  REQUIRE(io::verify_checkpoint("run.h5").checked == std::vector<std::string>{"/model/w"});
  REQUIRE(io::parse_checkpoint_in_process(base::read_input_file("run.h5", "file"), "run.h5").step ==
          7);
  struct stat st;
  REQUIRE(::lstat("checkpoint-image.h5", &st) == 0);
  REQUIRE((S_ISFIFO(st.st_mode) || st.st_size == 2));
}

TEST_CASE("two files in memory open at once keep their own contents") {
  io::h5::silence_library_errors();
  Hostile h({});
  io::save_checkpoint(h.file("a.h5"), small_checkpoint(1));
  io::save_checkpoint(h.file("b.h5"), small_checkpoint(2));
  const std::string a = base::read_input_file(h.file("a.h5"), "file"),
                    b = base::read_input_file(h.file("b.h5"), "file");
  io::h5::ImageFile fa(a), fb(b);
  REQUIRE(fa.get() >= 0);
  REQUIRE(fb.get() >= 0);
  REQUIRE(io::h5::read_attr_int(fa, "step", "a") == 1);
  REQUIRE(io::h5::read_attr_int(fb, "step", "b") == 2);
}

TEST_CASE("names from a file are escaped before they reach a message") {
  REQUIRE(io::detail::printable("ok \xc3\xa9") == "ok \xc3\xa9");
  REQUIRE(io::detail::printable("a\x1b[2Jb") == "a\\x1b[2Jb");
  REQUIRE(io::detail::printable("bad \xff byte") == "bad \\xff byte");
  REQUIRE(io::detail::printable("c1 \xc2\x9b control") == "c1 \\u{009b} control");
}

TEST_CASE("a 100 MB checkpoint loads whole within the progress-based limit") {
  Hostile h({});
  io::Checkpoint c = small_checkpoint(3);
  ag::Generator gen(11);
  for (int i = 0; i < 25; ++i)
    c.model.emplace_back(fmt::format("big.{}", i), ag::randn({1024, 1024}, gen));
  io::save_checkpoint(h.file("big.h5"), c);
  REQUIRE(fs::file_size(h.file("big.h5")) > 100'000'000);
  const io::Checkpoint back = io::load_checkpoint(h.file("big.h5"));
  REQUIRE(back.model.size() == c.model.size());
  for (size_t i = 0; i < c.model.size(); ++i)
    REQUIRE(back.model[i].second.to_vector() == c.model[i].second.to_vector());
  const io::Inspection inspection = io::inspect_checkpoint(h.file("big.h5"));
  REQUIRE(inspection.checkpoint);
  REQUIRE(inspection.report.checked.size() == 26);
  REQUIRE(inspection.report.all_checked());
}

TEST_CASE("a reader held up by a slow machine is waited for and not called damaged") {
  Hostile h({});
  io::save_checkpoint(h.file("run.h5"), small_checkpoint(5));
  io::detail::ChildLimits limits;
  std::thread resume;
  // stopped for 4 s before it reads anything: longer than the old wall-clock limit of 3 s,
  // but the child uses no CPU while it waits, so no progress is missed
  limits.on_start = [&](pid_t pid) {
    ::kill(pid, SIGSTOP);
    resume = std::thread([pid] {
      std::this_thread::sleep_for(std::chrono::seconds(4));
      ::kill(pid, SIGCONT);
    });
  };
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(io::detail::load_checkpoint(h.file("run.h5"), {}, limits).step == 5);
  resume.join();
  REQUIRE(std::chrono::steady_clock::now() - start >= std::chrono::seconds(4));
}

TEST_CASE("a reader that spins stalls or crashes is reported as a damaged file") {
  Hostile h({});
  const std::string path = h.file("run.h5");
  io::save_checkpoint(path, small_checkpoint(5));
  io::detail::ChildLimits limits;
  limits.stall_cpu_s = 1;
  const auto start = std::chrono::steady_clock::now();
  SECTION("spins: caught by its CPU time") {
    limits.stall_wall_s = 30;  // a busy machine may give it half a core: 1 s of CPU in 2 s
    limits.in_child = [] {
      for (;;) asm volatile("");  // a loop the compiler must keep
    };
    REQUIRE_THROWS_WITH(io::detail::load_checkpoint(path, {}, limits),
                        Contains(path) &&
                            Contains("is damaged: the HDF5 library did not finish reading it") &&
                            Contains("no progress in 1 s of CPU time"));
  }
  SECTION("waits for ever: caught by the wall clock") {
    limits.stall_wall_s = 2;
    limits.in_child = [] { ::pause(); };
    REQUIRE_THROWS_WITH(io::detail::load_checkpoint(path, {}, limits),
                        Contains("no progress in 2 s)"));
  }
  SECTION("crashes") {
    limits.in_child = [] { std::raise(SIGSEGV); };
    REQUIRE_THROWS_WITH(io::detail::load_checkpoint(path, {}, limits),
                        Contains("the HDF5 library crashed reading it (signal 11"));
  }
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("the reader ignores the signals the trainer handles") {
  Hostile h({});
  io::save_checkpoint(h.file("run.h5"), small_checkpoint(5));
  io::detail::ChildLimits limits;
  // the default action of each would end the child: it must have set them aside
  limits.in_child = [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) std::raise(sig);
  };
  struct sigaction none = {}, saved[4];
  none.sa_handler = SIG_DFL;
  const int sigs[4] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
  for (int i = 0; i < 4; ++i) ::sigaction(sigs[i], &none, &saved[i]);
  const auto loaded = io::detail::load_checkpoint(h.file("run.h5"), {}, limits);
  for (int i = 0; i < 4; ++i) ::sigaction(sigs[i], &saved[i], nullptr);
  REQUIRE(loaded.step == 5);
}

TEST_CASE("a stream that no correct reader sends is refused") {
  using io::detail::CheckpointBuilder;
  using io::detail::Section;
  using io::detail::StreamError;
  CheckpointBuilder b("x.h5", {}, {true, true}, 1000);
  const float values[4] = {1, 2, 3, 4};
  SECTION("values outside a tensor") {
    REQUIRE_THROWS_AS(b.tensor_data(values, 1), StreamError);
  }
  SECTION("more values than the shape holds") {
    b.begin_tensor(Section::model, "w", {3});
    REQUIRE_THROWS_AS(b.tensor_data(values, 4), StreamError);
  }
  SECTION("an end before all values came") {
    b.begin_tensor(Section::model, "w", {3});
    b.tensor_data(values, 2);
    REQUIRE_THROWS_AS(b.end_tensor(), StreamError);
  }
  SECTION("a tensor larger than a file of this size can hold") {
    REQUIRE_THROWS_AS(b.begin_tensor(Section::model, "w", {1 << 20, 1 << 20}), StreamError);
    REQUIRE_THROWS_AS(b.begin_tensor(Section::model, "w", {uint64_t{1} << 40, uint64_t{1} << 40}),
                      StreamError);
  }
  const size_t config = io::detail::root_row("config"), step = io::detail::root_row("step");
  SECTION("a second config") {
    b.root_text(config, "{}");
    REQUIRE_THROWS_AS(b.root_text(config, "{}"), StreamError);
  }
  SECTION("anything after the end") {
    b.load_error("'x.h5': no");
    b.done();
    REQUIRE_THROWS_AS(b.root_integer(step, 1), StreamError);
  }
  SECTION("an end with no config, step or tokenizer") {
    REQUIRE_THROWS_AS(b.done(), StreamError);
  }
}

TEST_CASE("frames from a corrupted reader are refused and never crash the parent") {
  using io::detail::CheckpointBuilder;
  using io::detail::FrameReader;
  // what a child sends for a small checkpoint, loaded and verified
  Hostile h({});
  io::Checkpoint ckpt = small_checkpoint(5);
  // a bpe tokenizer: flipped merges, counts and pattern bytes are replayed too
  ckpt.tokenizer = {"bpe", {}, {{104, 101}, {256, 108}}, "\\s+|\\S+", {}, {}};
  io::save_checkpoint(h.file("run.h5"), ckpt);
  const std::string file = base::read_input_file(h.file("run.h5"), "file");
  const io::detail::ReadRequest both{true, true};
  std::string stream;
  {
    std::FILE* tmp = std::tmpfile();
    REQUIRE(tmp);
    io::detail::FrameWriter writer(fileno(tmp), 99);
    io::detail::read_checkpoint_image(file, "run.h5", both, writer);
    stream.resize(static_cast<size_t>(std::ftell(tmp)));
    std::rewind(tmp);
    REQUIRE(std::fread(stream.data(), 1, stream.size(), tmp) == stream.size());
    std::fclose(tmp);
  }
  // fed in pieces of `step` bytes; true when the stream ended whole
  auto replay = [&](const std::string& s, size_t step, CheckpointBuilder& b) {
    FrameReader reader(b);
    for (size_t at = 0; at < s.size(); at += step) {
      const size_t n = std::min(step, s.size() - at);
      std::memcpy(reader.space(n), s.data() + at, n);
      reader.commit(n);
    }
    return reader.done();
  };
  CheckpointBuilder whole("run.h5", {}, both, file.size());
  REQUIRE(replay(stream, 7, whole));
  const io::Checkpoint back = whole.take_checkpoint();
  REQUIRE(back.model.size() == 1);
  REQUIRE(back.tokenizer.merges == ckpt.tokenizer.merges);
  REQUIRE(whole.take_report().checked == std::vector<std::string>{"/model/w", "/tokenizer/merges"});

  int refused = 0;
  for (size_t at = 0; at < stream.size(); ++at) {
    for (const char flip : {'\x01', '\x80', '\xff'}) {
      std::string bad = stream;
      bad[at] = static_cast<char>(bad[at] ^ flip);
      CheckpointBuilder b("run.h5", {}, both, file.size());
      try {
        replay(bad, 1 + at % 13, b);
      } catch (const io::detail::StreamError&) {
        ++refused;
      }
    }
    CheckpointBuilder cut("run.h5", {}, both, file.size());
    REQUIRE_FALSE(replay(stream.substr(0, at), 64, cut));  // a stream cut short never ends
  }
  REQUIRE(refused > 0);
}
