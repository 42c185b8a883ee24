// io/: HDF5 checkpoints round-trip bit for bit; they are written atomically; truncated,
// bit-flipped, foreign and hand-made files and mismatched shapes are rejected with the
// name of the file and of the offending object.
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/atomic_file.h"
#include "io/checkpoint.h"
#include "io/files.h"
#include "io/hdf5.h"
#include "io/root_attributes.h"
#include "nn/gpt.h"
#include "optim/optim.h"
#include "support.h"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using ag_test::TempDir;

nn::GPTConfig tiny() {
  return ag_test::gpt_config(7, 5, 8, 2, 1, 0.1);
}

// A checkpoint with every section filled: weights after one AdamW step, its moments, a
// char vocabulary, two generator states.
io::Checkpoint full_checkpoint(const nn::GPT& model) {
  auto groups = optim::decay_groups(model.named_parameters(), 0.1);
  optim::AdamW opt(groups, 1e-2);
  ag::Generator gen(5);
  for (auto& p : model.parameters()) p.set_grad(ag::randn(p.shape(), gen));
  opt.step();
  io::Checkpoint c;
  c.config = {{"vocab_size", 7},     {"context_length", 5}, {"d_model", 8},   {"n_heads", 2},
              {"n_layers", 1},       {"d_ff", 32},          {"dropout", 0.1}, {"qkv_bias", false},
              {"tie_weights", true}, {"lr", 1e-2}};
  c.step = 1;
  c.model = model.named_parameters();
  auto st = opt.state();
  c.optimizer = st;
  c.tokenizer.type = "char";
  c.tokenizer.vocab = {'\n', ' ', 'a', 'b', 'c', 0xE9, 0x1F642};
  c.rng = {{"data", ag::Generator(1).state()}, {"dropout", ag::Generator(2).state()}};
  c.data_identity = "sha256:0123456789abcdef";
  c.best_validation = io::BestValidation{"val_loss", 1.2345678901234567, 40, 2};
  return c;
}

bool checkpoint_same_bits(const ag::Tensor& a, const ag::Tensor& b) {
  if (a.shape() != b.shape()) return false;
  ag::Tensor x = a.to(ag::DType::Float32).contiguous(), y = b.to(ag::DType::Float32).contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), 4 * x.numel()) == 0;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Builds a small HDF5 file by hand (for files attograd would never write).
template <typename Body>
void hand_made(const std::string& path, Body body) {
  io::h5::silence_library_errors();
  io::h5::Handle f =
      io::h5::check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), path);
  body(f.get());
}

}  // namespace

TEST_CASE("a checkpoint round trip keeps every tensor bit for bit") {
  TempDir dir;
  nn::GPT model(tiny(), 3);
  io::Checkpoint c = full_checkpoint(model);
  io::save_checkpoint(dir.file("run.h5"), c);
  io::Checkpoint back = io::load_checkpoint(dir.file("run.h5"));

  REQUIRE(back.source == dir.file("run.h5"));
  REQUIRE(back.config == c.config);
  REQUIRE(back.step == 1);
  REQUIRE(back.model.size() == c.model.size());
  for (size_t i = 0; i < c.model.size(); ++i) {
    INFO(c.model[i].first);
    REQUIRE(back.model[i].first == c.model[i].first);  // registration order is kept
    REQUIRE(checkpoint_same_bits(back.model[i].second, c.model[i].second));
  }
  REQUIRE(back.optimizer);
  REQUIRE(back.optimizer->type == "adamw");
  REQUIRE(back.optimizer->tensors.size() == c.optimizer->tensors.size());
  for (size_t i = 0; i < c.optimizer->tensors.size(); ++i) {
    INFO(c.optimizer->tensors[i].first);
    REQUIRE(back.optimizer->tensors[i].first == c.optimizer->tensors[i].first);
    REQUIRE(
        checkpoint_same_bits(back.optimizer->tensors[i].second, c.optimizer->tensors[i].second));
  }
  for (const auto& [key, value] : c.optimizer->scalars) {
    INFO(key);
    auto it = std::find_if(back.optimizer->scalars.begin(), back.optimizer->scalars.end(),
                           [&key = key](auto& kv) { return kv.first == key; });
    REQUIRE(it != back.optimizer->scalars.end());
    REQUIRE(it->second == value);
  }
  REQUIRE(back.tokenizer.type == "char");
  REQUIRE(back.tokenizer.vocab == c.tokenizer.vocab);
  REQUIRE(back.rng == c.rng);
  REQUIRE(back.best_validation == c.best_validation);
  REQUIRE(back.data_identity == c.data_identity);
  REQUIRE(back.warnings.empty());

  SECTION("and inspect verifies every dataset and loads it in one pass") {
    const io::Inspection inspection = io::inspect_checkpoint(dir.file("run.h5"));
    REQUIRE(inspection.report.all_checked());
    REQUIRE(inspection.report.checked.size() == c.model.size() + c.optimizer->tensors.size() + 3);
    REQUIRE(inspection.checkpoint);
    REQUIRE(inspection.checkpoint->config == c.config);
    REQUIRE(inspection.load_error.empty());
  }
  SECTION("and the weights load into a fresh model") {
    nn::GPT other(tiny(), 99);
    io::load_model_weights(back, other);
    for (size_t i = 0; i < c.model.size(); ++i)
      REQUIRE(checkpoint_same_bits(other.parameters()[i], c.model[i].second));
  }
}

TEST_CASE("a saved checkpoint has the bytes of the same checkpoint built in memory") {
  // the save streams into its file; the file built whole in memory is what saves wrote before
  TempDir dir;
  nn::GPT model(ag_test::gpt_config(300, 16, 64, 2, 2, 0.0), 3);  // tok_emb: 75 KB, 1 chunk
  io::Checkpoint c = full_checkpoint(model);
  ag::Generator gen(9);
  c.model.emplace_back("big", ag::randn({1500, 300}, gen));
  c.tokenizer = {"bpe", {}, {{104, 105}, {256, 33}}, "\\p{L}+|.", {}, {}};
  const std::string path = dir.file("run.h5");
  io::save_checkpoint(path, c);
  const std::string saved = base::read_input_file(path, "file", 1 << 30);
  REQUIRE(saved.size() > 1800000);  // "big" is two chunks of about 1 MiB
  REQUIRE(saved == io::checkpoint_image(c));
  REQUIRE(io::verify_checkpoint(path).all_checked());
}

TEST_CASE("a weights-only checkpoint loads without optimizer or generator state") {
  TempDir dir;
  nn::GPT model(tiny(), 3);
  io::Checkpoint c;
  c.config = {{"d_model", 8}};
  c.model = model.named_parameters();
  c.tokenizer.type = "byte";
  io::save_checkpoint(dir.file("w.h5"), c);
  io::Checkpoint back = io::load_checkpoint(dir.file("w.h5"));
  REQUIRE_FALSE(back.optimizer);
  REQUIRE(back.rng.empty());
  REQUIRE(back.tokenizer.type == "byte");
  REQUIRE(back.model.size() == c.model.size());
}

TEST_CASE("LoadOptions::into reads weights straight into the given tensors of their shape") {
  TempDir dir;
  const nn::GPT saved(tiny(), 3);
  io::save_checkpoint(dir.file("c.h5"), full_checkpoint(saved));
  nn::GPT model(tiny(), 4);  // other weights, to be replaced in place
  nn::StateDict into = model.named_parameters();
  const ag::Tensor wrong_shape = ag::zeros({2, 2});
  into.front().second = wrong_shape;  // not of the file's shape: read into a tensor of its own
  const io::Checkpoint back =
      io::load_checkpoint(dir.file("c.h5"), {.weights_only = true, .into = &into});
  REQUIRE_FALSE(back.optimizer);
  const nn::StateDict want = saved.named_parameters(), got = model.named_parameters();
  REQUIRE(back.model.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].first);
    REQUIRE(back.model[i].first == want[i].first);
    REQUIRE(checkpoint_same_bits(back.model[i].second, want[i].second));
    if (i == 0) {
      REQUIRE(back.model[i].second.const_data<float>() != got[i].second.const_data<float>());
      REQUIRE(wrong_shape.const_data<float>()[0] == 0.0f);
    } else {
      REQUIRE(back.model[i].second.const_data<float>() == got[i].second.const_data<float>());
      REQUIRE(checkpoint_same_bits(got[i].second, want[i].second));
    }
  }
}

TEST_CASE("a checkpoint is replaced whole and leaves no temporary file") {
  TempDir dir;
  nn::GPT model(tiny(), 3);
  io::Checkpoint c = full_checkpoint(model);
  io::save_checkpoint(dir.file("run.h5"), c);
  c.step = 2;
  io::save_checkpoint(dir.file("run.h5"), c);
  REQUIRE(io::load_checkpoint(dir.file("run.h5")).step == 2);
  int files = 0;
  for (auto& e : fs::directory_iterator(dir.path)) {
    INFO(e.path());
    ++files;
  }
  REQUIRE(files == 1);
}

TEST_CASE("a failed write names the path and keeps the previous checkpoint") {
  TempDir dir;
  nn::GPT model(tiny(), 3);
  io::Checkpoint c = full_checkpoint(model);
  const std::string path = dir.file("run.h5");
  io::save_checkpoint(path, c);
  const std::string before = base::read_input_file(path, "file");

  SECTION("a folder that does not exist") {
    REQUIRE_THROWS_WITH(io::save_checkpoint(dir.file("no/such/dir/run.h5"), c),
                        Contains("no/such/dir/run.h5") && Contains("No such file or directory"));
  }
  SECTION("a file-size limit, as a full disk would stop the write") {
    // RLIMIT_FSIZE makes write() fail with EFBIG part-way, like ENOSPC on a full disk
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = {4096, old.rlim_max};
    setrlimit(RLIMIT_FSIZE, &small);
    c.step = 99;
    std::string error;
    try {
      io::save_checkpoint(path, c);
    } catch (const io::CheckpointError& e) {
      error = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
    REQUIRE_THAT(error, Contains("run.h5") && Contains("File too large"));
    REQUIRE(base::read_input_file(path, "file") == before);
    REQUIRE(io::load_checkpoint(path).step == 1);
    int files = 0;
    for (auto& e : fs::directory_iterator(dir.path)) (void)e, ++files;
    REQUIRE(files == 1);  // the partial temporary file was removed
  }
  SECTION("a target that is a folder") {
    fs::create_directories(dir.file("taken.h5"));
    REQUIRE_THROWS_WITH(io::save_checkpoint(dir.file("taken.h5"), c), Contains("taken.h5"));
  }
}

TEST_CASE("files that are not HDF5 or are cut short are rejected by name") {
  TempDir dir;
  write_bytes(dir.file("text.h5"), "just some text, not HDF5\n");
  REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("text.h5")),
                      Contains("text.h5") && Contains("not an HDF5 file"));
  write_bytes(dir.file("empty.h5"), "");
  REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("empty.h5")), Contains("not an HDF5 file"));
  REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("missing.h5")),
                      Contains("missing.h5") && Contains("No such file"));

  nn::GPT model(tiny(), 3);
  io::save_checkpoint(dir.file("good.h5"), full_checkpoint(model));
  const std::string good = base::read_input_file(dir.file("good.h5"), "file");
  for (size_t keep : {size_t{8}, size_t{600}, good.size() / 2, good.size() - 1}) {
    INFO("kept " << keep << " of " << good.size() << " bytes");
    write_bytes(dir.file("cut.h5"), good.substr(0, keep));
    REQUIRE_THROWS_AS(io::load_checkpoint(dir.file("cut.h5")), io::CheckpointError);
    REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("cut.h5")), Contains("cut.h5"));
  }
}

TEST_CASE("a flipped bit in a weight is caught by its checksum and named") {
  TempDir dir;
  io::Checkpoint c;
  std::vector<float> pattern(64);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = 1000.0f + static_cast<float>(i);
  c.model = {{"probe.weight", ag::from_vector(pattern, {8, 8})}, {"other.bias", ag::zeros({3})}};
  c.tokenizer.type = "byte";
  io::save_checkpoint(dir.file("ok.h5"), c);
  std::string bytes = base::read_input_file(dir.file("ok.h5"), "file");
  const std::string needle(reinterpret_cast<const char*>(pattern.data()), 4 * pattern.size());
  const size_t at = bytes.find(needle);
  REQUIRE(at != std::string::npos);
  bytes[at + 100] ^= 0x04;
  write_bytes(dir.file("flipped.h5"), bytes);

  REQUIRE_THROWS_WITH(
      io::load_checkpoint(dir.file("flipped.h5")),
      Contains("flipped.h5") && Contains("/model/probe.weight") && Contains("Fletcher32"));
  io::VerifyReport r = io::verify_checkpoint(dir.file("flipped.h5"));
  REQUIRE(r.checked == std::vector<std::string>{"/model/other.bias"});
  REQUIRE(r.failures.size() == 1);
  REQUIRE_THAT(r.failures[0], Contains("/model/probe.weight") && Contains("checksum"));
  REQUIRE(r.unchecked.empty());
  REQUIRE(r.refused.empty());
  REQUIRE_FALSE(r.all_checked());
  REQUIRE(io::verify_checkpoint(dir.file("ok.h5")).all_checked());
}

TEST_CASE("HDF5 files that are not attograd checkpoints are rejected with the reason") {
  TempDir dir;
  using namespace io::h5;
  SECTION("no format attribute") {
    hand_made(dir.file("foreign.h5"), [](hid_t f) { create_group(f, "data"); });
    REQUIRE_THROWS_WITH(
        io::load_checkpoint(dir.file("foreign.h5")),
        Contains("foreign.h5") && Contains("not an attograd checkpoint") && Contains("'format'"));
  }
  SECTION("another format") {
    hand_made(dir.file("other.h5"), [](hid_t f) { write_attr_string(f, "format", "keras"); });
    REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("other.h5")), Contains("'keras'"));
  }
  SECTION("a newer version") {
    hand_made(dir.file("v2.h5"), [](hid_t f) {
      write_attr_string(f, "format", io::kFormatName);
      write_attr_int(f, "format_version", 2);
    });
    REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("v2.h5")), Contains("version 2"));
  }
  auto valid_root = [](hid_t f, const std::string& config) {
    write_attr_string(f, "format", io::kFormatName);
    write_attr_int(f, "format_version", 1);
    write_attr_string(f, "config", config);
    write_attr_int(f, "step", 0);
  };
  SECTION("config that is not JSON") {
    hand_made(dir.file("badjson.h5"), [&](hid_t f) { valid_root(f, "{d_model: 8"); });
    REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("badjson.h5")),
                        Contains("'config'") && Contains("JSON"));
  }
  SECTION("no /model group") {
    hand_made(dir.file("nomodel.h5"), [&](hid_t f) { valid_root(f, "{}"); });
    REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("nomodel.h5")), Contains("/model"));
  }
  SECTION("integer weights") {
    hand_made(dir.file("ints.h5"), [&](hid_t f) {
      valid_root(f, "{}");
      Handle m = create_group(f, "model");
      write_u32(m, "tok_emb.weight", {1, 2, 3});
    });
    REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("ints.h5")),
                        Contains("/model/tok_emb.weight") && Contains("integer"));
  }
  SECTION("a vocabulary entry that is not a code point") {
    hand_made(dir.file("vocab.h5"), [&](hid_t f) {
      valid_root(f, "{}");
      create_group(f, "model");
      Handle t = create_group(f, "tokenizer");
      write_attr_string(t, "type", "char");
      write_u32(t, "vocab", {97, 0x200000});
    });
    REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("vocab.h5")),
                        Contains("/tokenizer/vocab") && Contains("element 1"));
  }
  SECTION("a generator state of the wrong size") {
    hand_made(dir.file("rng.h5"), [&](hid_t f) {
      valid_root(f, "{}");
      create_group(f, "model");
      Handle t = create_group(f, "tokenizer");
      write_attr_string(t, "type", "byte");
      Handle r = create_group(f, "rng");
      write_u64(r, "data", {1, 2, 3});
    });
    REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("rng.h5")),
                        Contains("/rng/data") && Contains("4 uint64"));
  }
  SECTION("a generator state that is not integers, all zeros, or a group") {
    const auto rng_file = [&](const std::string& name, auto&& fill) {
      hand_made(dir.file(name), [&](hid_t f) {
        valid_root(f, "{}");
        create_group(f, "model");
        Handle t = create_group(f, "tokenizer");
        write_attr_string(t, "type", "byte");
        Handle r = create_group(f, "rng");
        fill(r);
      });
      return dir.file(name);
    };
    REQUIRE_THROWS_WITH(
        io::load_checkpoint(rng_file(
            "floats.h5",
            [](hid_t r) {
              write_tensor(r, "data", ag::from_vector(std::vector<float>{1, 2, 3, 4}, {4}));
            })),
        Contains("/rng/data") && Contains("integers"));
    REQUIRE_THROWS_WITH(io::load_checkpoint(rng_file("zeros.h5",
                                                     [](hid_t r) {
                                                       write_u64(r, "data", {0, 0, 0, 0});
                                                     })),
                        Contains("/rng/data") && Contains("all zeros"));
    REQUIRE_THROWS_WITH(
        io::load_checkpoint(rng_file("group.h5", [](hid_t r) { create_group(r, "data"); })),
        Contains("/rng/data") && Contains("not a dataset"));
  }
  SECTION("a best validation that is not finite, before step 0 or of no metric") {
    const auto best_file = [&](const std::string& name, double value, int64_t step,
                               const std::string& metric) {
      hand_made(dir.file(name), [&](hid_t f) {
        valid_root(f, "{}");
        create_group(f, "model");
        Handle t = create_group(f, "tokenizer");
        write_attr_string(t, "type", "byte");
        Handle b = create_group(f, "best_validation");
        write_attr_string(b, "metric", metric);
        write_attr_double(b, "value", value);
        write_attr_int(b, "step", step);
        write_attr_int(b, "evaluations_since", 0);
      });
      return dir.file(name);
    };
    REQUIRE_THROWS_WITH(io::load_checkpoint(best_file("nan.h5", NAN, 3, "val_loss")),
                        Contains("/best_validation/value") && Contains("not finite"));
    REQUIRE_THROWS_WITH(io::load_checkpoint(best_file("step.h5", 1.5, -3, "val_loss")),
                        Contains("/best_validation/step") && Contains("negative"));
    REQUIRE_THROWS_WITH(io::load_checkpoint(best_file("metric.h5", 1.5, 3, "")),
                        Contains("/best_validation/metric") && Contains("empty"));
    REQUIRE(io::load_checkpoint(best_file("good.h5", 1.5, 3, "val_loss")).best_validation ==
            io::BestValidation{"val_loss", 1.5, 3, 0});
  }
  SECTION("fixed-length string attributes are read too (as some writers make them)") {
    hand_made(dir.file("fixed.h5"), [&](hid_t f) {
      Handle type = check(H5Tcopy(H5T_C_S1), "type");
      H5Tset_size(type, 32);
      Handle space = check(H5Screate(H5S_SCALAR), "space");
      char buf[32] = "attograd-checkpoint";
      Handle a = check(H5Acreate2(f, "format", type, space, H5P_DEFAULT, H5P_DEFAULT), "attr");
      H5Awrite(a, type, buf);
      write_attr_int(f, "format_version", 1);
      write_attr_string(f, "config", "{}");
      create_group(f, "model");
      Handle t = create_group(f, "tokenizer");
      write_attr_string(t, "type", "byte");
    });
    REQUIRE(io::load_checkpoint(dir.file("fixed.h5")).model.empty());
  }
}

TEST_CASE("weights of another shape are rejected by name and the model is left as it was") {
  TempDir dir;
  nn::GPTConfig bigger = tiny();
  bigger.vocab_size = 9;
  nn::GPT source(bigger, 1), target(tiny(), 2);
  io::Checkpoint c;
  c.model = source.named_parameters();
  c.tokenizer.type = "byte";
  io::save_checkpoint(dir.file("big.h5"), c);
  io::Checkpoint back = io::load_checkpoint(dir.file("big.h5"));
  const auto before = target.parameters()[0].to_vector();
  REQUIRE_THROWS_WITH(
      io::load_model_weights(back, target),
      Contains("big.h5") && Contains("tok_emb.weight") && Contains("[9, 8]") && Contains("[7, 8]"));
  REQUIRE(target.parameters()[0].to_vector() == before);

  SECTION("a missing parameter is named") {
    io::Checkpoint partial = back;
    partial.model = target.named_parameters();
    partial.model.pop_back();
    REQUIRE_THROWS_WITH(io::load_model_weights(partial, target),
                        Contains("missing") && Contains("ln_f.bias"));
  }
  SECTION("an unexpected parameter is named") {
    io::Checkpoint extra = back;
    extra.model = target.named_parameters();
    extra.model.emplace_back("lm_head.weight", ag::zeros({7, 8}));
    REQUIRE_THROWS_WITH(io::load_model_weights(extra, target),
                        Contains("unexpected") && Contains("lm_head.weight"));
  }
}

TEST_CASE("micro_batches is kept when recorded and absent when not") {
  TempDir dir;
  nn::GPT model(tiny(), 3);
  io::Checkpoint c = full_checkpoint(model);
  io::save_checkpoint(dir.file("none.h5"), c);
  REQUIRE(io::load_checkpoint(dir.file("none.h5")).micro_batches == -1);
  c.micro_batches = 12;
  io::save_checkpoint(dir.file("twelve.h5"), c);
  REQUIRE(io::load_checkpoint(dir.file("twelve.h5")).micro_batches == 12);
}

TEST_CASE("micro_batches below the step is refused by name") {
  TempDir dir;
  nn::GPT model(tiny(), 3);
  io::Checkpoint c = full_checkpoint(model);
  c.step = 5;
  c.micro_batches = 4;  // every step takes at least one micro-batch
  io::save_checkpoint(dir.file("bad.h5"), c);
  REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("bad.h5")),
                      Contains("micro_batches 4 is less than step 5") && Contains("bad.h5"));
}

// The root attributes' table (io/root_attributes.h) drives these: a row added to it is
// written, read back, bounded and required by the same code, and checked here unchanged.
TEST_CASE("every integer root attribute round-trips and a value below its bound is refused") {
  using io::detail::kRootAttributes;
  TempDir dir;
  nn::GPT model(tiny(), 3);
  for (const auto& a : kRootAttributes) {
    const auto* field = std::get_if<int64_t io::Checkpoint::*>(&a.value);
    if (!field) continue;
    INFO(a.name);
    io::Checkpoint c = full_checkpoint(model);
    c.step = 5;
    const int64_t bound = a.limits.at_least_of ? c.step : a.limits.at_least;
    c.*(*field) = bound + 3;
    io::save_checkpoint(dir.file("good.h5"), c);
    REQUIRE(io::load_checkpoint(dir.file("good.h5")).*(*field) == bound + 3);
    c.*(*field) = bound - 1;
    io::save_checkpoint(dir.file("below.h5"), c);
    REQUIRE_THROWS_WITH(io::load_checkpoint(dir.file("below.h5")),
                        Contains("'" + dir.file("below.h5") + "'") &&
                            Contains(fmt::format("root attribute {} {}", a.name, bound - 1)));
  }
}

TEST_CASE("a file without a required root attribute is refused naming it") {
  using io::detail::kRootAttributes;
  using io::detail::Presence;
  TempDir dir;
  const io::Checkpoint defaults;
  for (size_t missing = 0; missing < kRootAttributes.size(); ++missing) {
    if (kRootAttributes[missing].presence != Presence::required) continue;
    INFO(kRootAttributes[missing].name);
    hand_made(dir.file("lacking.h5"), [&](hid_t f) {
      for (size_t row = 0; row < kRootAttributes.size(); ++row) {
        const auto& a = kRootAttributes[row];
        if (row == missing || a.presence == Presence::optional) continue;
        if (a.integer())
          io::h5::write_attr_int(f, a.name, io::detail::integer_in(a, defaults));
        else
          io::h5::write_attr_string(f, a.name, io::detail::text_in(a, defaults));
      }
      io::h5::create_group(f, "model");
      io::h5::Handle t = io::h5::create_group(f, "tokenizer");
      io::h5::write_attr_string(t, "type", "byte");
    });
    REQUIRE_THROWS_WITH(
        io::load_checkpoint(dir.file("lacking.h5")),
        Contains(dir.file("lacking.h5")) &&
            Contains(fmt::format("no root attribute '{}'", kRootAttributes[missing].name)));
  }
}
