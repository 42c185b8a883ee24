#include "io/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "autograd/quant/packed_weight.h"
#include "base/atomic_file.h"
#include "base/posix_file.h"
#include "io/checkpoint_builder.h"
#include "io/checkpoint_reader.h"
#include "io/hdf5.h"
#include "io/item_sections.h"
#include "io/read_child.h"
#include "io/root_attributes.h"
#include "io/tokenizer_section.h"

namespace io {

namespace {

using h5::Handle;

void write_optimizer(hid_t file, const optim::OptimizerState& s) {
  Handle opt = h5::create_group(file, "optimizer");
  h5::write_attr_string(opt, "type", s.type);
  for (const auto& [key, value] : s.scalars) {
    if (key == "step")
      h5::write_attr_int(opt, key, static_cast<int64_t>(value));
    else
      h5::write_attr_double(opt, key, value);
  }
  // "m/<param>" becomes dataset <param> in sub-group m, made in the order first seen
  for (const auto& [name, t] : s.tensors) {
    const auto slash = name.find('/');
    if (slash != std::string::npos && !h5::exists(opt, name.substr(0, slash)))
      h5::create_group(opt, name.substr(0, slash));
    h5::write_tensor(opt, name, t);
  }
}

// The root attributes in kRootAttributes' order; an optional one only when it holds
// something other than its default.
void write_root(hid_t file, const Checkpoint& c) {
  static const Checkpoint defaults;
  for (const detail::RootAttribute& a : detail::kRootAttributes) {
    const bool optional = a.presence == detail::Presence::optional;
    if (a.integer()) {
      const int64_t value = detail::integer_in(a, c);
      if (!optional || value != detail::integer_in(a, defaults))
        h5::write_attr_int(file, a.name, value);
    } else {
      const std::string value = detail::text_in(a, c);
      if (!optional || value != detail::text_in(a, defaults))
        h5::write_attr_string(file, a.name, value);
    }
  }
}

// An integer dataset of a section, in its row's element type ([N, columns] for a rank-2 row).
void write_integers(hid_t group, const detail::Item& it, const std::string& name,
                    const std::vector<uint64_t>& wide) {
  if (it.dtype == detail::DType::uint64) return h5::write_u64(group, name, wide);
  const std::vector<uint32_t> values(wide.begin(), wide.end());
  if (it.rank == 2)
    h5::write_u32_rows(group, name, values, it.dims[1]);
  else
    h5::write_u32(group, name, values);
}

// /tokenizer: each item its row says the type holds, in the rows' order (the type, then
// what rebuilds it exactly: a char vocabulary, bpe merges and the split pattern; gpt2 also
// its byte order and special tokens).
void write_tokenizer(hid_t file, const TokenizerSection& t) {
  using detail::Section;
  // a string attribute ends at its first NUL: a pattern holding one would come back cut
  const auto kind = base::find_choice<data::TokenizerKind>(t.type);
  if (kind && data::encodes_by_merges(*kind) && t.split_pattern.find('\0') != std::string::npos)
    throw std::invalid_argument("the bpe split pattern holds a NUL byte (write it as \\x00)");
  Handle tok = h5::create_group(file, detail::layout(Section::tokenizer).group);
  detail::for_each_tokenizer_item(
      t, detail::TextFor::file, /*also_misplaced=*/false,
      [&](size_t row, const std::string& text) {
        h5::write_attr_string(tok, detail::item(Section::tokenizer, row).name, text);
      },
      [&](size_t row, const std::vector<uint64_t>&, const std::vector<uint64_t>& wide) {
        const detail::Item& it = detail::item(Section::tokenizer, row);
        write_integers(tok, it, it.name, wide);
      });
}

// A section of items alone (item_sections.h): its rows' notes for a person, then each item
// of c, an attribute or a dataset as its row's kind says.
void write_item_section(hid_t file, const detail::ItemSection& s, const Checkpoint& c) {
  Handle group = h5::create_group(file, detail::layout(s.section).group);
  for (const detail::Item& it : detail::layout(s.section).items)
    if (it.note) h5::write_attr_string(group, it.name, it.note);
  s.items(c, [&](size_t row, const std::string& given, const detail::ItemValue& value) {
    const detail::Item& it = detail::item(s.section, row);
    const std::string name = detail::item_name(s.section, row, given);
    if (const auto* text = std::get_if<std::string>(&value))
      h5::write_attr_string(group, name, *text);
    else if (const auto* integer = std::get_if<int64_t>(&value))
      h5::write_attr_int(group, name, *integer);
    else if (const auto* real = std::get_if<double>(&value))
      h5::write_attr_double(group, name, *real);
    else
      write_integers(group, it, name, std::get<detail::Integers>(value).values);
  });
}

// More than the file of c can take: every dataset's bytes, its chunks' checksums (at most one
// chunk per row) and 64 KiB of metadata each, and 1 MiB besides.
uint64_t size_bound(const Checkpoint& c) {
  uint64_t bytes = 1 << 20;
  auto dataset = [&bytes](uint64_t data, uint64_t rows) { bytes += data + 4 * rows + (64 << 10); };
  auto tensors = [&](const nn::StateDict& named) {
    for (const auto& [name, t] : named)
      dataset(t.packing() ? ag::quant::packed_bytes(t).size() + 256  // + its attributes
                          : 4 * static_cast<uint64_t>(t.numel()),
              t.dim() > 0 ? t.shape()[0] : 1);
  };
  tensors(c.model);
  if (c.optimizer) tensors(c.optimizer->tensors);
  dataset(4 * c.tokenizer.vocab.size(), c.tokenizer.vocab.size());
  dataset(8 * c.tokenizer.merges.size(), c.tokenizer.merges.size());
  for (const detail::ItemSection& s : detail::item_sections())
    s.items(c, [&](size_t, const std::string& name, const detail::ItemValue& value) {
      bytes += name.size();
      if (const auto* text = std::get_if<std::string>(&value)) bytes += text->size();
      if (const auto* d = std::get_if<detail::Integers>(&value))
        dataset(8 * d->values.size(), d->dims.empty() ? 1 : d->dims[0]);
    });
  return bytes + c.config.dump().size() + c.tokenizer.split_pattern.size() + c.history.size() +
         c.run_id.size() + c.run_name.size();
}

// Everything a checkpoint holds, written into an open file; every object it opens is closed
// when it returns. Tensors are written from the caller's own storage, chunk by chunk.
void write_contents(hid_t file, const Checkpoint& c) {
  write_root(file, c);
  {
    Handle model = h5::create_group(file, "model");
    // a frozen weight held packed as its blocks (docs/checkpoint.md#model), not inflated
    for (const auto& [name, t] : c.model)
      t.packing() ? h5::write_packed(model, name, t) : h5::write_tensor(model, name, t);
  }
  if (c.optimizer) write_optimizer(file, *c.optimizer);

  write_tokenizer(file, c.tokenizer);

  for (const detail::ItemSection& s : detail::item_sections())
    if (s.held(c)) write_item_section(file, s, c);
}

// ------------------------------------------------------------------ reading
// The checkpoint file, open: only a regular file is read (a FIFO would block the reader and
// a device like /dev/zero never end); neither is ever opened.
struct OpenFile {
  base::UniqueFd fd;
  uint64_t size = 0;
  explicit OpenFile(const std::string& path) {
    const std::string cannot = fmt::format("cannot read '{}'", path);
    struct stat st;
    try {
      fd = base::open_regular(path, "'" + path + "'", &st);
    } catch (const base::FileError& e) {
      if (e.kind == base::FileError::Kind::not_regular)
        throw CheckpointError(
            fmt::format("{}: it is {}, not a file", cannot, base::file_kind(e.mode)));
      throw CheckpointError(fmt::format("{}: {}", cannot, std::strerror(e.err)));
    }
    size = static_cast<uint64_t>(st.st_size);
  }
  detail::ReadInput input() const { return {fd.get(), nullptr, size}; }
};

// Reads input into builder: in a forked child, or in this process under ATTOGRAD_NO_PROBE_READ
// (a debugger follows one process more easily). Throws when the file cannot be read at all.
void read_into(detail::CheckpointBuilder& builder, const detail::ReadInput& input,
               const std::string& source, detail::ReadRequest request,
               const detail::ChildLimits& limits) {
  if (std::getenv("ATTOGRAD_NO_PROBE_READ")) {
    detail::FileBytes owned;
    try {
      if (!input.bytes) owned = detail::read_open_file(input.fd, input.size, builder);
    } catch (const std::runtime_error& e) {
      throw CheckpointError(fmt::format("cannot read '{}': {}", source, e.what()));
    }
    detail::read_checkpoint_image(input.bytes ? std::string_view(*input.bytes) : owned.view(),
                                  source, request, builder);
  } else {
    detail::read_in_child(input, source, request, builder, limits);
  }
  if (!builder.fatal_error().empty()) throw CheckpointError(builder.fatal_error());
}

Checkpoint finish_load(detail::CheckpointBuilder& builder) {
  if (!builder.load_failure().empty()) throw CheckpointError(builder.load_failure());
  return builder.take_checkpoint();
}

Checkpoint load(const detail::ReadInput& input, const std::string& source,
                const LoadOptions& options, const detail::ChildLimits& limits) {
  const detail::ReadRequest request{/*load=*/true, /*verify=*/false,
                                    /*optimizer=*/!options.weights_only};
  detail::CheckpointBuilder builder(source, options, request, input.size);
  read_into(builder, input, source, request, limits);
  return finish_load(builder);
}

}  // namespace

namespace detail {

Checkpoint load_checkpoint(const std::string& path, const LoadOptions& options,
                           const ChildLimits& limits) {
  const OpenFile file(path);
  return load(file.input(), path, options, limits);
}

}  // namespace detail

std::string checkpoint_image(const Checkpoint& ckpt) {
  h5::silence_library_errors();
  Handle file = h5::create_memory_file();
  write_contents(file, ckpt);
  return h5::image(file);
}

// Written straight into the temporary file (HDF5's sec2 driver on its descriptor), a chunk at
// a time: a save needs no memory beyond the state it writes (a 124M-parameter run's 1.5 GB
// of weights and moments were built whole in memory and then copied, 3 GB, before).
void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  h5::silence_library_errors();
  try {
    base::write_file_atomically(path, [&](int fd) {
      try {
        Handle file = h5::create_file_on(fd);
        h5::reserve_space(fd, size_bound(ckpt));  // a full disk fails here, not in libhdf5
        write_contents(file, ckpt);
        h5::close_file(file, fd);
      } catch (const h5::IoError& e) {  // a full disk: said as the operating system says it
        throw CheckpointWriteError(
            base::os_error(fmt::format("cannot write '{}'", path), e.err).what());
      } catch (const std::exception& e) {
        throw CheckpointWriteError(fmt::format("cannot build checkpoint '{}': {}", path, e.what()));
      }
    });
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {  // the temporary file, its fsync or the rename
    throw CheckpointWriteError(e.what());
  }
}

Checkpoint load_checkpoint(const std::string& path, const LoadOptions& options) {
  return detail::load_checkpoint(path, options, {});
}

Checkpoint load_checkpoint_image(const std::string& bytes, const std::string& source,
                                 const LoadOptions& options) {
  return load({-1, &bytes, bytes.size()}, source, options, {});
}

Checkpoint parse_checkpoint_in_process(const std::string& bytes, const std::string& source,
                                       const LoadOptions& options) {
  const detail::ReadRequest request{/*load=*/true, /*verify=*/false};
  detail::CheckpointBuilder builder(source, options, request, bytes.size());
  detail::read_checkpoint_image(bytes, source, request, builder);
  if (!builder.fatal_error().empty()) throw CheckpointError(builder.fatal_error());
  return finish_load(builder);
}

VerifyReport verify_checkpoint(const std::string& path) {
  const OpenFile file(path);
  const detail::ReadRequest request{/*load=*/false, /*verify=*/true};
  detail::CheckpointBuilder builder(path, {}, request, file.size);
  read_into(builder, file.input(), path, request, {});
  return builder.take_report();
}

Inspection inspect_checkpoint(const std::string& path, const LoadOptions& options) {
  const OpenFile file(path);
  const detail::ReadRequest request{/*load=*/true, /*verify=*/true};
  detail::CheckpointBuilder builder(path, options, request, file.size);
  read_into(builder, file.input(), path, request, {});
  Inspection result;
  result.report = builder.take_report();
  if (builder.load_failure().empty())
    result.checkpoint = builder.take_checkpoint();
  else
    result.load_error = builder.load_failure();
  return result;
}

bool is_gradient_dump(const Checkpoint& ckpt) {
  const auto it = ckpt.config.find("contents");
  return it != ckpt.config.end() && *it == kGradientDumpContents;
}

void load_model_weights(const Checkpoint& ckpt, nn::Module& model) {
  try {
    model.load_state_dict(ckpt.model);
  } catch (const std::exception& e) {
    throw CheckpointError(fmt::format("'{}' does not fit the model: {}", ckpt.source, e.what()));
  }
}

}  // namespace io
