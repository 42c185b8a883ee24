#include "io/checkpoint_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "autograd/quant/packed_weight.h"
#include "base/utf8.h"
#include "data/tokenizer_file.h"
#include "io/checkpoint.h"
#include "io/hdf5.h"
#include "io/item_sections.h"
#include "io/root_attributes.h"
#include "io/tokenizer_section.h"

namespace io::detail {

namespace {

using h5::check;
using h5::check_status;
using h5::Handle;

constexpr int kMaxGroupDepth = 32;
constexpr uint64_t kTinyFill = 64 << 10;       // bytes a dataset may leave to fill values
constexpr uint64_t kMaxChunkBytes = 16 << 20;  // a chunk may exceed its dataset up to this
constexpr size_t kPieceBytes = 4 << 20;        // read, checked and sent at a time
constexpr size_t kMaxLinkValue = 64 << 10;     // the target of a soft or external link

// A problem with the file in a message that already names the file.
struct Refusal : std::runtime_error {
  using std::runtime_error::runtime_error;
};

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  return b != 0 && a > std::numeric_limits<uint64_t>::max() / b
             ? std::numeric_limits<uint64_t>::max()
             : a * b;
}

std::string human_bytes(uint64_t n) {
  if (n < (1 << 20)) return fmt::format("{} bytes", n);
  if (n < (uint64_t{1} << 30)) return fmt::format("{:.1f} MB", n / 1e6);
  return fmt::format("{:.1f} GB", n / 1e9);
}

// ------------------------------------------------------------------ the catalog of a file
enum class Kind { group, dataset, datatype, refused, broken };

// One link of the file and, for a dataset, what its storage showed before any data is read.
struct Entry {
  std::string path, name;
  Kind kind = Kind::broken;
  std::string why;  // refused or broken: the reason
  std::vector<hsize_t> dims, chunk;
  bool null_space = false;
  uint64_t numel = 0, type_size = 0;
  H5T_class_t type_class = H5T_NO_CLASS;
  int fletcher32 = -1;      // its index in the filter pipeline, -1 when absent
  std::string no_checksum;  // why its data carries no checksum ("" when it does)
  std::optional<std::pair<Verdict, std::string>> verdict;
};

class Catalog {
 public:
  size_t add(const std::string& parent, const std::string& name) {
    Entry e;
    e.name = name;
    e.path = parent == "/" ? "/" + name : parent + "/" + name;
    by_path_.emplace(e.path, entries_.size());
    children_[parent].push_back(entries_.size());
    entries_.push_back(std::move(e));
    return entries_.size() - 1;
  }
  Entry& at(size_t i) { return entries_[i]; }
  const Entry& at(size_t i) const { return entries_[i]; }
  size_t size() const { return entries_.size(); }
  static constexpr size_t npos = static_cast<size_t>(-1);
  size_t index(const std::string& path) const {
    auto it = by_path_.find(path);
    return it == by_path_.end() ? npos : it->second;
  }
  const Entry* find(const std::string& path) const {
    const size_t i = index(path);
    return i == npos ? nullptr : &entries_[i];
  }
  std::vector<size_t> children(const std::string& group) const {
    auto it = children_.find(group);
    return it == children_.end() ? std::vector<size_t>{} : it->second;
  }
  uint64_t declared = 0;  // bytes all datasets' elements take, at least 4 each

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> by_path_;
  std::unordered_map<std::string, std::vector<size_t>> children_;
};

struct Walk {
  Catalog& catalog;
  ReadSink& sink;
  uint64_t file_bytes;
  std::set<haddr_t> groups_seen = {};
};

void refuse(Entry& e, std::string why) {
  e.kind = Kind::refused, e.why = std::move(why);
}

std::string link_value(hid_t group, H5_index_t order, hsize_t i, size_t size) {
  if (size == 0 || size > kMaxLinkValue) return {};
  std::string value(size, '\0');
  if (H5Lget_val_by_idx(group, ".", order, H5_ITER_INC, i, value.data(), size, h5::link_access()) <
      0) {
    h5::last_error();
    return {};
  }
  return value;
}

// Why a link that is not a hard link is refused, saying where it points (never following it).
std::string describe_link(hid_t group, H5_index_t order, hsize_t i, const H5L_info_t& link) {
  const char* rule = "; a checkpoint may hold data only, and attograd follows no links";
  const std::string value = link_value(group, order, i, link.u.val_size);
  if (link.type == H5L_TYPE_SOFT)
    return fmt::format("is a soft link to '{}'{}", printable(value.substr(0, value.find('\0'))),
                       rule);
  if (link.type == H5L_TYPE_EXTERNAL) {
    unsigned flags = 0;
    const char *file = nullptr, *object = nullptr;
    if (value.empty() ||
        H5Lunpack_elink_val(value.data(), value.size(), &flags, &file, &object) < 0)
      return fmt::format("is an external link (to another file){}", rule);
    return fmt::format("is an external link to '{}' in the file '{}'{}",
                       printable(object ? object : ""), printable(file ? file : ""), rule);
  }
  return fmt::format("is a user-defined link (class {}){}", static_cast<int>(link.type), rule);
}

// Fletcher32, deflate and shuffle only: any other filter would need code (or a plugin) that
// attograd does not have.
std::string check_filters(hid_t dcpl, Entry& e) {
  const int n = H5Pget_nfilters(dcpl);
  if (n < 0) throw std::runtime_error("cannot list its filters");
  for (int i = 0; i < n; ++i) {
    unsigned flags = 0, config = 0;
    size_t values = 0;
    char name[256] = "";
    const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &values, nullptr,
                                           sizeof name, name, &config);
    if (id == H5Z_FILTER_FLETCHER32) {
      e.fletcher32 = i;
    } else if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE) {
      h5::last_error();
      return fmt::format(
          "uses HDF5 filter {} ('{}'), which attograd does not read (only deflate, shuffle "
          "and Fletcher32)",
          id, printable(name));
    }
  }
  return "";
}

void read_shape(hid_t dset, Entry& e) {
  Handle space = check(H5Dget_space(dset), "reading its shape");
  e.null_space = H5Sget_simple_extent_type(space) == H5S_NULL;
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > H5S_MAX_RANK) throw std::runtime_error("it has an unreadable shape");
  e.dims.resize(static_cast<size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space, e.dims.data(), nullptr);
  e.numel = e.null_space ? 0 : 1;
  for (hsize_t d : e.dims) e.numel = saturating_mul(e.numel, d);
  Handle type = check(H5Dget_type(dset), "reading its type");
  e.type_class = H5Tget_class(type);
  e.type_size = H5Tget_size(type);
  if (e.type_size == 0) throw std::runtime_error("it has an unreadable type");
}

std::string described_size(const Entry& e, uint64_t bytes) {
  return fmt::format("declares {} elements of {} bytes ({})", h5::dims_str(e.dims), e.type_size,
                     human_bytes(bytes));
}

// A chunked dataset must store every chunk: missing ones read as fill values, so a file of a
// few kilobytes could declare 40 GB. Its chunks must not dwarf it either (each is allocated
// whole to be read).
std::string check_chunks(hid_t dset, hid_t dcpl, Entry& e, uint64_t bytes) {
  e.chunk.resize(e.dims.size());
  if (H5Pget_chunk(dcpl, static_cast<int>(e.chunk.size()), e.chunk.data()) !=
      static_cast<int>(e.dims.size()))
    throw std::runtime_error("cannot read its chunk shape");
  uint64_t chunk_bytes = e.type_size, grid = 1;
  for (size_t d = 0; d < e.dims.size(); ++d) {
    if (e.chunk[d] == 0) return "has chunks of size 0";
    chunk_bytes = saturating_mul(chunk_bytes, e.chunk[d]);
    grid = saturating_mul(grid, (e.dims[d] + e.chunk[d] - 1) / e.chunk[d]);
  }
  if (chunk_bytes > std::max(bytes, kMaxChunkBytes))
    return fmt::format("{} in chunks of {} each", described_size(e, bytes),
                       human_bytes(chunk_bytes));
  hsize_t stored = 0;
  Handle space = check(H5Dget_space(dset), "reading its shape");
  check_status(H5Dget_num_chunks(dset, space, &stored), "counting its chunks");
  if (stored >= grid || bytes <= kTinyFill) return "";
  return fmt::format("{} in {} chunks but stores {} of them (the rest would be fill values)",
                     described_size(e, bytes), grid, stored);
}

// What a dataset declares must be in the file: a refusal when it would be made up from fill
// values; damage (thrown) when its header contradicts itself, which libhdf5 1.10 does not
// check before it reads past the data (a crash).
std::string check_storage(hid_t dset, hid_t dcpl, H5D_layout_t layout, Entry& e,
                          uint64_t file_bytes) {
  const uint64_t bytes = saturating_mul(e.numel, e.type_size);
  if (layout == H5D_CHUNKED) return e.numel == 0 ? "" : check_chunks(dset, dcpl, e, bytes);
  if (e.numel == 0) return "";
  const hsize_t stored = H5Dget_storage_size(dset);
  if (layout == H5D_COMPACT && stored != bytes)  // compact data lies whole in its header
    throw std::runtime_error(
        fmt::format("it {} but its header holds {} bytes", described_size(e, bytes), stored));
  if (layout == H5D_COMPACT) return "";
  if (stored < bytes && bytes > kTinyFill)
    return fmt::format("{} but stores {}", described_size(e, bytes),
                       stored ? human_bytes(stored) : "none of it");
  const haddr_t at = stored ? H5Dget_offset(dset) : 0;
  if (stored && (at == HADDR_UNDEF || at > file_bytes || stored > file_bytes - at))
    throw std::runtime_error(
        fmt::format("its data lies past the end of the file ({} bytes)", file_bytes));
  return "";
}

std::string no_checksum_reason(H5D_layout_t layout, const Entry& e) {
  if (e.fletcher32 >= 0) return "";  // empty too: no chunk, so none without its checksum
  if (e.numel == 0) return "empty, nothing to check";
  if (e.dims.empty()) return "a scalar, which HDF5 cannot checksum";
  if (layout == H5D_CONTIGUOUS)
    return "no checksum (contiguous storage, as h5py writes by default)";
  if (layout == H5D_COMPACT) return "no checksum (compact storage)";
  return "no checksum (chunked without Fletcher32)";
}

// Everything about a dataset's storage that decides whether it may be read, before it is.
void describe_dataset(hid_t dset, Entry& e, Catalog& catalog, uint64_t file_bytes) {
  e.kind = Kind::dataset;
  Handle dcpl = check(H5Dget_create_plist(dset), "reading its storage properties");
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  if (layout == H5D_VIRTUAL)
    return refuse(
        e,
        "is a virtual dataset, whose data would come from other datasets, possibly in other files");
  const int external = H5Pget_external_count(dcpl);
  if (external != 0) {
    char name[4096] = "";
    off_t offset = 0;
    hsize_t size = 0;
    if (external < 0 || H5Pget_external(dcpl, 0, sizeof name, name, &offset, &size) < 0)
      h5::last_error();
    name[sizeof name - 1] = '\0';
    return refuse(
        e, fmt::format("keeps its data outside the checkpoint, in the file '{}'", printable(name)));
  }
  if (layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED && layout != H5D_COMPACT)
    return refuse(e, "has a storage layout attograd does not read");
  if (std::string why = check_filters(dcpl, e); !why.empty()) return refuse(e, why);
  read_shape(dset, e);
  if (std::string why = check_storage(dset, dcpl, layout, e, file_bytes); !why.empty())
    return refuse(e, why);
  e.no_checksum = no_checksum_reason(layout, e);
  const uint64_t in_memory = saturating_mul(e.numel, std::max<uint64_t>(e.type_size, 4));
  catalog.declared =
      std::min(catalog.declared, std::numeric_limits<uint64_t>::max() - in_memory) + in_memory;
}

void walk_group(hid_t group, const std::string& path, int depth, Walk& w);

void visit_group(hid_t parent, size_t at, const H5O_info_t& info, int depth, Walk& w) {
  Entry& e = w.catalog.at(at);
  if (depth >= kMaxGroupDepth)
    return refuse(e, fmt::format("is a group nested more than {} deep", kMaxGroupDepth));
  if (!w.groups_seen.insert(info.addr).second)
    return refuse(e, "is a second link to a group already seen (a loop or an alias)");
  e.kind = Kind::group;
  const std::string path = e.path;  // e moves as the catalog grows
  Handle g = check(H5Gopen2(parent, e.name.c_str(), h5::group_access()), "opening it");
  walk_group(g, path, depth + 1, w);
}

// A link's type is read before anything is opened by its name: a soft, external or
// user-defined link is refused without being followed.
void visit_link(hid_t group, H5_index_t order, hsize_t i, size_t at, int depth, Walk& w) {
  H5L_info_t link;
  check_status(H5Lget_info_by_idx(group, ".", order, H5_ITER_INC, i, &link, h5::link_access()),
               "reading the link");
  if (link.type != H5L_TYPE_HARD)
    return refuse(w.catalog.at(at), describe_link(group, order, i, link));
  H5O_info_t info;
  check_status(H5Oget_info_by_idx2(group, ".", order, H5_ITER_INC, i, &info, H5O_INFO_BASIC,
                                   h5::link_access()),
               "reading what it links to");
  Entry& e = w.catalog.at(at);
  if (info.type == H5O_TYPE_GROUP) return visit_group(group, at, info, depth, w);
  if (info.type == H5O_TYPE_NAMED_DATATYPE) {
    e.kind = Kind::datatype;  // a type definition: nothing to read
  } else if (info.type == H5O_TYPE_DATASET) {
    Handle dset = check(H5Dopen2(group, e.name.c_str(), h5::dataset_access()), "opening it");
    describe_dataset(dset, e, w.catalog, w.file_bytes);
  } else {
    refuse(e, "is an object of a kind HDF5 does not name");
  }
}

void walk_group(hid_t group, const std::string& path, int depth, Walk& w) {
  H5G_info_t info;
  check_status(H5Gget_info(group, &info), fmt::format("listing {}", printable(path)));
  const H5_index_t order = h5::link_order(group);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    size_t at = 0;
    try {
      at = w.catalog.add(path, h5::link_name(group, order, i));
    } catch (const std::exception& e) {
      at = w.catalog.add(path, fmt::format("(link {})", i));
      w.catalog.at(at).why = e.what();
      continue;
    }
    try {
      visit_link(group, order, i, at, depth, w);
    } catch (const std::exception& e) {
      w.catalog.at(at).kind = Kind::broken, w.catalog.at(at).why = e.what();
    }
    w.sink.progress(1);
  }
}

void walk_file(hid_t file, Walk& w) {
  H5O_info_t root;
  check_status(H5Oget_info2(file, &root, H5O_INFO_BASIC), "reading the root group");
  w.groups_seen.insert(root.addr);
  Handle g = check(H5Gopen2(file, "/", h5::group_access()), "opening the root group");
  walk_group(g, "/", 0, w);
}

// ------------------------------------------------------------------ reading what was checked
struct Context {
  hid_t file;
  const std::string& source;
  Catalog& catalog;
  ReadSink& sink;
  bool verify;
  bool optimizer;                  // /optimizer is loaded
  std::vector<char> scratch = {};  // one piece of a dataset, reused for the next
};

// Chunks that carry no Fletcher32 sum although the dataset has the filter: HDF5 lets each
// chunk record which filters it skipped, and those chunks are read unchecked.
uint64_t chunks_skipping_checksum(Context& c, hid_t dset, const Entry& e) {
  if (e.chunk.empty() || e.numel == 0) return 0;
  std::vector<hsize_t> at(e.dims.size(), 0);
  uint64_t skipped = 0, seen = 0;
  for (;;) {
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(dset, at.data(), &mask, &addr, &size) < 0)
      check_status(-1, "reading its chunk index");
    if (addr != HADDR_UNDEF && (mask & (1u << e.fletcher32))) ++skipped;
    if (++seen % 1024 == 0) c.sink.progress(1024);
    size_t d = e.dims.size();
    while (d > 0 && (at[d - 1] += e.chunk[d - 1]) >= e.dims[d - 1]) at[--d] = 0;
    if (d == 0) return skipped;
  }
}

std::pair<Verdict, std::string> checksum_verdict(Context& c, const Entry& e) {
  if (!e.no_checksum.empty()) return {Verdict::unchecked, e.no_checksum};
  Handle dset = check(H5Dopen2(c.file, e.path.c_str(), h5::dataset_access()), "opening it");
  if (const uint64_t n = chunks_skipping_checksum(c, dset, e))
    return {Verdict::unchecked, fmt::format("{} of its chunks skip their Fletcher32 checksum", n)};
  return {Verdict::checked, ""};
}

// The reason without the "reading <path>: " the message starts with.
std::string reason_only(const std::string& what, const std::string& path) {
  const std::string prefix = "reading " + printable(path) + ": ";
  return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
}

// Runs read on the dataset catalogued at `at`, recording its verdict when verifying.
template <typename Read>
void judged(Context& c, size_t at, Read&& read) {
  try {
    read();
  } catch (const std::exception& e) {
    if (c.verify)
      c.catalog.at(at).verdict = {Verdict::failed, reason_only(e.what(), c.catalog.at(at).path)};
    throw;
  }
  if (c.verify) c.catalog.at(at).verdict = checksum_verdict(c, c.catalog.at(at));
}

void stream_tensor(Context& c, Section section, const std::string& name, size_t at) {
  const Entry& e = c.catalog.at(at);
  const std::string where = printable(e.path);
  if (e.type_class != H5T_FLOAT)
    throw std::runtime_error(fmt::format(
        "{} holds {} values, expected floats{}", where,
        e.type_class == H5T_INTEGER ? "integer" : "non-numeric",
        section == Section::model ? " (or a frozen weight's blocks, with a 'format' attribute)"
                                  : ""));
  if (e.null_space)
    throw std::runtime_error(fmt::format("{} has no shape (an HDF5 null dataspace)", where));
  Handle dset = check(H5Dopen2(c.file, e.path.c_str(), h5::dataset_access()), "opening " + where);
  c.sink.begin_tensor(section, name, std::vector<uint64_t>(e.dims.begin(), e.dims.end()));
  judged(c, at, [&] {
    h5::read_in_pieces(dset, H5T_NATIVE_FLOAT, sizeof(float), where, kPieceBytes, c.scratch,
                       [&](const void* p, size_t n) {
                         c.sink.tensor_data(p, n);
                         c.sink.progress(n * sizeof(float));
                       });
  });
  c.sink.end_tensor();
}

// The names of the packed formats, for a message.
std::string packed_format_names() {
  std::vector<std::string> names;
  for (const ag::quant::PackedFormat& f : ag::quant::packed_formats()) names.emplace_back(f.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// A frozen weight's blocks: its format one of the packed formats' table, its shape
// [rows, width] with rows a whole number of blocks, and the dataset exactly those rows'
// blocks in the format's words; all checked before anything is read.
const ag::quant::PackedFormat& packed_layout(hid_t dset, const Entry& e,
                                             std::vector<uint64_t>& shape) {
  const std::string where = printable(e.path);
  const std::string name = h5::read_attr_string(dset, "format", where, 16);
  const ag::quant::PackedFormat* f = ag::quant::packed_format_named(name);
  if (!f)
    throw std::runtime_error(
        fmt::format("{} has format '{}', which is not one attograd holds "
                    "a weight in ({})",
                    where, printable(name), packed_format_names()));
  const std::vector<int64_t> dims = h5::read_attr_ints(dset, "shape", where, 2);
  if (dims.size() != 2 || dims[0] < 0 || dims[1] <= 0 || dims[0] > (int64_t{1} << 40) ||
      dims[1] > (int64_t{1} << 40))
    throw std::runtime_error(fmt::format("{} has shape [{}], not a matrix's [rows, width]", where,
                                         fmt::join(dims, ", ")));
  if (!ag::quant::fits(*f, dims[1]))
    throw std::runtime_error(
        fmt::format("{} has rows of {} weights, not a whole number of {}'s blocks of {}", where,
                    dims[1], f->name, f->elements));
  const auto word = static_cast<uint64_t>(ag::quant::packed_word_bytes(*f));
  const uint64_t row_bytes = static_cast<uint64_t>(ag::quant::packed_row_bytes(*f, dims[1]));
  const uint64_t want = saturating_mul(static_cast<uint64_t>(dims[0]), row_bytes);
  const uint64_t have = saturating_mul(e.numel, e.type_size);
  if (e.type_size != word || e.dims.size() != 2 || e.dims[0] != static_cast<uint64_t>(dims[0]) ||
      have != want)
    throw std::runtime_error(fmt::format(
        "{} holds {} of {}-byte words, but a [{}, {}] weight in {} blocks is [{}, {}] of "
        "{}-byte words",
        where, h5::dims_str(e.dims), e.type_size, dims[0], dims[1], f->name, dims[0],
        row_bytes / word, word));
  shape = {static_cast<uint64_t>(dims[0]), static_cast<uint64_t>(dims[1])};
  return *f;
}

// A frozen weight held as blocks (packed_layout): its format, then its bytes.
void stream_packed(Context& c, const std::string& name, size_t at) {
  const Entry& e = c.catalog.at(at);
  const std::string where = printable(e.path);
  Handle dset = check(H5Dopen2(c.file, e.path.c_str(), h5::dataset_access()), "opening " + where);
  std::vector<uint64_t> shape;
  const ag::quant::PackedFormat& f = packed_layout(dset, e, shape);
  const size_t word = static_cast<size_t>(ag::quant::packed_word_bytes(f));
  c.sink.attribute(Section::model, kPackedFormatRow, name, std::string(f.name));
  c.sink.begin_dataset(Section::model, kPackedRow, name, shape);
  judged(c, at, [&] {
    h5::read_in_pieces(dset, word == 2 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT8, word, where,
                       kPieceBytes, c.scratch, [&](const void* p, size_t n) {
                         c.sink.dataset_data(p, n * word);
                         c.sink.progress(n * word);
                       });
  });
  c.sink.end_dataset();
}

// The root attributes, row by row as kRootAttributes lists them: each present one (or
// the default of a defaulted one) is checked, then sent.
void load_root(Context& c) {
  Checkpoint so_far;  // the integers read, for bounds that name an earlier row
  for (size_t row = 0; row < kRootAttributes.size(); ++row) {
    const RootAttribute& a = kRootAttributes[row];
    const bool present = h5::attr_exists(c.file, a.name);
    if (!present && a.presence == Presence::required)
      throw Refusal(missing_root_attribute(row, c.source));
    if (!present && a.presence == Presence::optional) continue;
    if (a.integer()) {
      const int64_t value =
          present ? h5::read_attr_int(c.file, a.name, "the root") : integer_in(a, so_far);
      if (std::string why = root_integer_problem(row, value, so_far, c.source); !why.empty())
        throw Refusal(why);
      if (auto* field = std::get_if<int64_t Checkpoint::*>(&a.value)) so_far.** field = value;
      c.sink.root_integer(row, value);
      continue;
    }
    const std::string value =
        present ? h5::read_attr_string(c.file, a.name, "the root", a.limits.max_bytes)
                : text_in(a, Checkpoint{});
    if (std::string why = root_text_problem(row, value, c.source); !why.empty()) throw Refusal(why);
    c.sink.root_text(row, value);
  }
  c.sink.end_section(Section::root);
}

const Entry& require_dataset(Context& c, size_t at) {
  const Entry& e = c.catalog.at(at);
  if (e.kind != Kind::dataset)
    throw std::runtime_error(fmt::format("{} is not a dataset", printable(e.path)));
  return e;
}

// The section's group as its layout says: a required one must be there, and whatever is
// there must be a group. nullptr when an optional section is absent.
const Entry* find_section(Context& c, Section section) {
  const SectionLayout& l = layout(section);
  const Entry* group = c.catalog.find(fmt::format("/{}", l.group));
  if (l.required && (!group || group->kind != Kind::group))
    throw std::runtime_error(fmt::format("it has no /{} group", l.group));
  if (group && group->kind != Kind::group)
    throw std::runtime_error(fmt::format("/{} is not a group", l.group));
  return group;
}

Handle open_section(Context& c, Section section) {
  const std::string group = layout(section).group;
  return check(H5Gopen2(c.file, group.c_str(), h5::group_access()), "opening /" + group);
}

// Whether a dataset carries a `format` attribute (a frozen weight's blocks).
bool has_format(Context& c, const Entry& e) {
  Handle dset =
      check(H5Dopen2(c.file, e.path.c_str(), h5::dataset_access()), "opening " + printable(e.path));
  return h5::attr_exists(dset, "format");
}

void load_model(Context& c) {
  find_section(c, Section::model);
  for (size_t at : c.catalog.children("/model")) {
    const Entry& e = require_dataset(c, at);
    if (e.type_class == H5T_INTEGER && has_format(c, e))
      stream_packed(c, e.name, at);
    else
      stream_tensor(c, Section::model, e.name, at);
  }
  c.sink.end_section(Section::model);
}

void load_optimizer(Context& c) {
  if (!find_section(c, Section::optimizer)) return;
  Handle g = open_section(c, Section::optimizer);
  const size_t type_row = row_of(Section::optimizer, "type");
  c.sink.attribute(
      Section::optimizer, type_row, "",
      h5::read_attr_string(g, "type", "/optimizer", item(Section::optimizer, type_row).max_length));
  const size_t setting = any_name_row(Section::optimizer, ItemKind::real);
  for (const std::string& key : h5::attr_names(g)) {
    if (key == "type" || h5::attr_is_string(g, key)) continue;  // notes a foreign writer may add
    c.sink.attribute(Section::optimizer, setting, key, h5::read_attr_double(g, key, "/optimizer"));
  }
  // datasets directly in /optimizer, or one level down ("m/<param>")
  for (size_t at : c.catalog.children("/optimizer")) {
    const Entry& e = c.catalog.at(at);
    if (e.kind != Kind::group) {
      stream_tensor(c, Section::optimizer, require_dataset(c, at).name, at);
      continue;
    }
    const std::string sub = e.name;
    for (size_t leaf : c.catalog.children(e.path))
      stream_tensor(c, Section::optimizer, sub + "/" + require_dataset(c, leaf).name, leaf);
  }
  c.sink.end_section(Section::optimizer);
}

// The dataset /tokenizer/<name>, which the type requires.
size_t tokenizer_dataset(Context& c, const std::string& type, const char* name) {
  const size_t at = c.catalog.index(fmt::format("/tokenizer/{}", name));
  if (at == Catalog::npos || c.catalog.at(at).kind != Kind::dataset)
    throw std::runtime_error(
        fmt::format("/tokenizer has type '{}' but no '{}' dataset", printable(type), name));
  return at;
}

// A tokenizer dataset's shape against its row, before it is read: the message says what the
// shape means.
void check_tokenizer_shape(const Entry& e, const Item& it) {
  const auto shape = [&](const char* expected) {
    return std::runtime_error(fmt::format("{} has shape {}, expected {}", printable(e.path),
                                          h5::dims_str(e.dims), expected));
  };
  if (it.rank == 2 && (e.dims.size() != 2 || e.dims[1] != it.dims[1]))
    throw shape("[M, 2] (a (left, right) pair per merge)");
  if (it.rank == 2 && e.type_class != H5T_INTEGER)
    throw std::runtime_error(
        fmt::format("{} does not hold integers (expected uint32 ids)", printable(e.path)));
  if (it.rank == 2 && e.dims[0] > it.max_length)
    throw std::runtime_error(
        fmt::format("{} holds {} merges, more than the {} of the largest vocabulary ({} ids)",
                    printable(e.path), e.dims[0], it.max_length, data::kMaxBpeVocabSize));
  if (it.dims[0] != 0 && (e.dims.size() != 1 || e.dims[0] != it.dims[0]))
    throw shape("[256] (the byte of each of ids 0-255)");
  if (it.rank == 1 && it.dims[0] == 0 && e.numel > it.max_length)
    throw std::runtime_error(fmt::format("{} has {} entries, more than there are code points",
                                         printable(e.path), e.numel));
}

// A tokenizer dataset the type holds: its shape checked against its row, then its values,
// each within the row's bound (int64 in the file is read too, and bounded the same).
std::vector<uint64_t> read_tokenizer_dataset(Context& c, hid_t g, const std::string& type,
                                             const Item& it, std::vector<uint64_t>& dims) {
  const size_t at = tokenizer_dataset(c, type, it.name);
  check_tokenizer_shape(c.catalog.at(at), it);
  std::vector<hsize_t> read_dims;
  std::vector<int64_t> values;
  const std::string where = fmt::format("/tokenizer/{}", it.name);
  judged(c, at, [&] {
    values =
        h5::read_int_values(g, it.name, where, 0, static_cast<int64_t>(it.max_value), &read_dims);
  });
  if (read_dims.size() != it.rank)
    throw std::runtime_error(fmt::format("{} must be one-dimensional", where));
  dims.assign(read_dims.begin(), read_dims.end());
  return {values.begin(), values.end()};
}

std::string read_tokenizer_text(hid_t g, const Item& it) {
  const std::string text = h5::read_attr_string(g, it.name, "/tokenizer", it.max_length);
  if (std::string_view(it.name) != "special_tokens") return text;
  try {
    parse_special_tokens_json(text);  // what the builder parses again
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(
        fmt::format("/tokenizer attribute 'special_tokens': {}", printable(e.what())));
  }
  return text;
}

// /tokenizer: its type, then each item its row says that type holds, in the rows' order.
void load_tokenizer(Context& c) {
  find_section(c, Section::tokenizer);
  Handle g = open_section(c, Section::tokenizer);
  const auto items = layout(Section::tokenizer).items;
  const size_t type_row = row_of(Section::tokenizer, "type");
  TokenizerSection section;
  section.type = h5::read_attr_string(g, "type", "/tokenizer", items[type_row].max_length);
  for (size_t row = 0; row < items.size(); ++row) {
    if (row == type_row || !held_for(items[row], section.type)) continue;
    if (optional_for(items[row], section.type) && !h5::attr_exists(g, items[row].name)) continue;
    if (items[row].kind == ItemKind::text) {
      set_tokenizer_text(section, row, read_tokenizer_text(g, items[row]));
      continue;
    }
    std::vector<uint64_t> dims;
    set_tokenizer_integers(section, row,
                           read_tokenizer_dataset(c, g, section.type, items[row], dims));
  }
  c.sink.tokenizer(section);
}

// Whether a row of the section has this name for its own (a row of any name takes the rest).
bool row_named(Section section, const std::string& name) {
  const auto items = layout(section).items;
  return std::any_of(items.begin(), items.end(), [&](const Item& i) { return named(i, name); });
}

// The datasets a row of an item section stands for: its own (which must be there), or every
// other one of the group.
std::vector<size_t> row_datasets(Context& c, Section section, const Item& it) {
  const std::string group = fmt::format("/{}", layout(section).group);
  if (it.name) {
    const size_t at = c.catalog.index(fmt::format("{}/{}", group, it.name));
    if (at == Catalog::npos)
      throw std::runtime_error(fmt::format("{} has no '{}' dataset", group, it.name));
    return {at};
  }
  std::vector<size_t> out;
  for (size_t at : c.catalog.children(group))
    if (!row_named(section, c.catalog.at(at).name)) out.push_back(at);
  return out;
}

// A dataset of integers of an item section: its shape checked against its row, then its
// values, each within the row's bound.
void send_integers(Context& c, hid_t g, Section section, size_t row, size_t at) {
  const Entry& e = require_dataset(c, at);
  const Item& it = item(section, row);
  const std::string where = printable(e.path), name = e.name;
  if (e.type_class != H5T_INTEGER)
    throw std::runtime_error(fmt::format("{} does not hold integers", where));
  if (it.rank == 1 && it.dims[0] != 0 && (e.dims.size() != 1 || e.numel != it.dims[0]))
    throw std::runtime_error(fmt::format("{} must hold {} {} values, it holds {}", where,
                                         it.dims[0], dtype_name(it.dtype), e.numel));
  Integers d{{e.dims.begin(), e.dims.end()}, {}};
  if (std::string why = dataset_problem(section, row, it.name ? "" : name, d.dims); !why.empty())
    throw std::runtime_error(printable(why));
  judged(c, at, [&] {
    if (it.dtype == DType::uint64) {
      d.values = h5::read_u64_values(g, name, where);
    } else {  // read bounded by the row
      const auto wide = h5::read_int_values(g, name, where, 0, static_cast<int64_t>(it.max_value));
      d.values.assign(wide.begin(), wide.end());
    }
  });
  if (it.dtype == DType::uint64)
    for (uint64_t v : d.values)
      if (v > it.max_value)
        throw std::runtime_error(fmt::format("{} holds {}, more than {}", where, v, it.max_value));
  c.sink.integers(section, row, it.name ? "" : name, d.dims, d.values);
}

// The attributes a row of an item section stands for: its own when the group has it, or
// every other one of the row's kind (text or a number).
void send_attributes(hid_t g, Context& c, Section section, size_t row) {
  const Item& it = item(section, row);
  const std::string where = fmt::format("/{}", layout(section).group);
  const auto send = [&](const std::string& key, const std::string& name) {
    if (it.kind == ItemKind::text)
      c.sink.attribute(section, row, name, h5::read_attr_string(g, key, where, it.max_length));
    else if (it.kind == ItemKind::integer)
      c.sink.attribute(section, row, name, h5::read_attr_int(g, key, where));
    else
      c.sink.attribute(section, row, name, h5::read_attr_double(g, key, where));
  };
  if (it.name) {
    if (h5::attr_exists(g, it.name)) send(it.name, "");
    return;
  }
  for (const std::string& key : h5::attr_names(g))
    if (!row_named(section, key) && h5::attr_is_string(g, key) == (it.kind == ItemKind::text))
      send(key, key);
}

// A section of items alone (item_sections.h): each row in order, a row's note skipped (it is
// for a person), then its end.
void load_item_section(Context& c, Section section) {
  if (!find_section(c, section)) return;
  Handle g = open_section(c, section);
  const auto items = layout(section).items;
  for (size_t row = 0; row < items.size(); ++row) {
    if (items[row].note) continue;
    if (items[row].kind != ItemKind::dataset) {
      send_attributes(g, c, section, row);
      continue;
    }
    for (size_t at : row_datasets(c, section, items[row])) send_integers(c, g, section, row, at);
  }
  c.sink.end_section(section);
}

void load_sections(Context& c) {
  try {
    load_root(c);
    load_model(c);
    if (c.optimizer) load_optimizer(c);
    load_tokenizer(c);
    for (const ItemSection& s : item_sections()) load_item_section(c, s.section);
  } catch (const Refusal& e) {
    c.sink.load_error(e.what());
  } catch (const std::exception& e) {
    c.sink.load_error(fmt::format("'{}': {}", c.source, e.what()));
  }
}

// Every dataset the load did not read, read now in pieces for its verdict.
void verify_rest(Context& c) {
  for (size_t at = 0; at < c.catalog.size(); ++at) {
    const Entry& e = c.catalog.at(at);
    if (e.kind != Kind::dataset || e.verdict) continue;
    const std::string path = e.path, where = printable(path);
    try {
      judged(c, at, [&] {
        Handle dset = check(H5Dopen2(c.file, path.c_str(), h5::dataset_access()), "opening it");
        Handle type = check(H5Dget_type(dset), "reading its type");
        h5::read_in_pieces(dset, type, H5Tget_size(type), where, kPieceBytes, c.scratch,
                           [&](const void*, size_t n) { c.sink.progress(n); });
      });
    } catch (const std::exception&) {
      // the verdict says what failed
    }
  }
}

void send_verdicts(Context& c) {
  for (size_t at = 0; at < c.catalog.size(); ++at) {
    const Entry& e = c.catalog.at(at);
    const std::string path = printable(e.path);
    if (e.kind == Kind::refused) c.sink.verdict(Verdict::refused, path, e.why);
    if (e.kind == Kind::broken) c.sink.verdict(Verdict::failed, path, "cannot be read: " + e.why);
    if (e.kind == Kind::dataset && e.verdict)
      c.sink.verdict(e.verdict->first, path, e.verdict->second);
  }
}

// The first object that makes the file unloadable, in a message naming the file and it.
std::string first_problem(const Catalog& catalog, const std::string& source) {
  for (size_t at = 0; at < catalog.size(); ++at) {
    const Entry& e = catalog.at(at);
    if (e.kind == Kind::refused)
      return fmt::format("'{}': {} {}", source, printable(e.path), e.why);
    if (e.kind == Kind::broken)
      return fmt::format("'{}' is damaged: {} cannot be read ({})", source, printable(e.path),
                         e.why);
  }
  return "";
}

bool has_hdf5_signature(std::string_view bytes) {
  // at offset 0, or 512, 1024, ... after a user block
  constexpr std::string_view kSignature("\x89HDF\r\n\x1a\n", 8);
  for (size_t at = 0; at + 8 <= bytes.size(); at = at ? at * 2 : 512)
    if (bytes.compare(at, 8, kSignature) == 0) return true;
  return false;
}

// Why the file as a whole declares more data than it may, or "".
std::string over_budget(const Catalog& catalog, uint64_t file_bytes) {
  if (catalog.declared <= data_budget(file_bytes)) return "";
  return fmt::format(
      "its datasets declare {} of data, more than the {} a file of {} may expand to ({} times its "
      "size plus {})",
      human_bytes(catalog.declared), human_bytes(data_budget(file_bytes)), human_bytes(file_bytes),
      kMaxExpansion, human_bytes(kExpansionSlack));
}

// Everything is checked before anything is read: the load starts only on a file with no
// refused or broken object and no more data than its size allows.
void read_opened(hid_t file, std::string_view bytes, const std::string& source, ReadRequest request,
                 ReadSink& sink) {
  Catalog catalog;
  Walk walk{catalog, sink, bytes.size()};
  walk_file(file, walk);
  Context c{file, source, catalog, sink, request.verify, request.optimizer};
  const std::string too_big = over_budget(catalog, bytes.size());
  std::string problem = first_problem(catalog, source);
  if (problem.empty() && !too_big.empty()) problem = fmt::format("'{}': {}", source, too_big);
  if (request.load && !problem.empty()) sink.load_error(problem);
  if (request.load && problem.empty()) load_sections(c);
  if (!request.verify) return;
  if (!too_big.empty())
    sink.verdict(Verdict::refused, "/", too_big);
  else
    verify_rest(c);
  send_verdicts(c);
}

}  // namespace

void read_checkpoint_image(std::string_view bytes, const std::string& source, ReadRequest request,
                           ReadSink& sink) {
  h5::silence_library_errors();
  try {
    if (!has_hdf5_signature(bytes)) {
      sink.fatal(fmt::format("'{}' is not an HDF5 file ({} bytes, no HDF5 signature)", source,
                             bytes.size()));
    } else if (h5::ImageFile file(bytes); file.get() < 0) {
      const std::string why = h5::last_error();
      sink.fatal(fmt::format("'{}' is a damaged or truncated HDF5 file ({})", source,
                             why.empty() ? "HDF5 cannot open it" : why));
    } else {
      read_opened(file, bytes, source, request, sink);
    }
  } catch (const std::exception& e) {
    sink.fatal(fmt::format("'{}' is a damaged HDF5 file ({})", source, e.what()));
  }
  sink.done();
}

}  // namespace io::detail
