#include "io/hdf5.h"

#include <H5PLpublic.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "autograd/ops.h"
#include "autograd/quant/packed_weight.h"

namespace io::h5 {

void Handle::reset() {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE: H5Fclose(id_); break;
    case H5I_GROUP: H5Gclose(id_); break;
    case H5I_DATASET: H5Dclose(id_); break;
    case H5I_DATASPACE: H5Sclose(id_); break;
    case H5I_DATATYPE: H5Tclose(id_); break;
    case H5I_ATTR: H5Aclose(id_); break;
    case H5I_GENPROP_LST: H5Pclose(id_); break;
    default: H5Idec_ref(id_); break;
  }
  id_ = -1;
}

void silence_library_errors() {
  static const bool once = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)once;
}

namespace {

struct StackReason {
  std::string innermost;
  int err = 0;  // errno in a driver's "... errno = N, ..." entry; 0 when none says one
};

herr_t keep_innermost(unsigned, const H5E_error2_t* err, void* out) {
  // walked from the API call inwards: the last entry is the root cause
  if (!err->desc || !*err->desc) return 0;
  auto* reason = static_cast<StackReason*>(out);
  reason->innermost = err->desc;
  // the file drivers' message for a failed read, write or truncate names the errno so
  const char* tag = std::strstr(err->desc, "errno = ");
  if (tag) reason->err = std::atoi(tag + std::strlen("errno = "));
  return 0;
}

StackReason take_reason() {
  StackReason reason;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost, &reason);
  H5Eclear2(H5E_DEFAULT);
  return reason;
}

[[noreturn]] void throw_failure(const std::string& what) {
  const StackReason reason = take_reason();
  if (reason.err > 0)
    throw IoError(fmt::format("{}: {}", what, std::strerror(reason.err)), reason.err);
  throw std::runtime_error(
      reason.innermost.empty() ? what : fmt::format("{}: {}", what, reason.innermost));
}

}  // namespace

std::string last_error() {
  return take_reason().innermost;
}

Handle check(hid_t id, const std::string& what) {
  if (id < 0) throw_failure(what);
  return Handle(id);
}

void check_status(herr_t status, const std::string& what) {
  if (status < 0) throw_failure(what);
}

// ------------------------------------------------------------------ files in memory
std::string memory_file_name() {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("/dev/null/attograd-image-{}-{}", ::getpid(), counter++);
}

namespace {

// Objects record no creation or modification times: a checkpoint's bytes are a function of
// its contents alone, so the same state saved twice (or saved and built in memory) gives
// the same file, whatever the clock read between the two.
Handle untimed_file_creation() {
  Handle fcpl = check(H5Pcreate(H5P_FILE_CREATE), "H5Pcreate");
  check_status(H5Pset_obj_track_times(fcpl, 0), "H5Pset_obj_track_times");
  return fcpl;
}

}  // namespace

Handle create_memory_file() {
  Handle fapl = check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
  check_status(H5Pset_fapl_core(fapl, 1 << 20, /*backing_store=*/0), "H5Pset_fapl_core");
  Handle fcpl = untimed_file_creation();
  return check(H5Fcreate(memory_file_name().c_str(), H5F_ACC_TRUNC, fcpl, fapl), "H5Fcreate");
}

std::string image(hid_t file) {
  check_status(H5Fflush(file, H5F_SCOPE_GLOBAL), "H5Fflush");
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  if (size < 0) check_status(-1, "H5Fget_file_image");
  std::string bytes(static_cast<size_t>(size), '\0');
  if (H5Fget_file_image(file, bytes.data(), bytes.size()) != size)
    check_status(-1, "H5Fget_file_image");
  return bytes;
}

// ------------------------------------------------------------------ files through a descriptor
Handle create_file_on(int fd) {
  Handle fapl = check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
  check_status(H5Pset_fapl_sec2(fapl), "H5Pset_fapl_sec2");
  // its flock() would conflict with the caller's lock on the same file
  check_status(H5Pset_file_locking(fapl, /*use_file_locking=*/0, /*ignore_when_disabled=*/1),
               "H5Pset_file_locking");
  check_status(H5Pset_fclose_degree(fapl, H5F_CLOSE_SEMI), "H5Pset_fclose_degree");
  const std::string name = fmt::format("/proc/self/fd/{}", fd);
  Handle fcpl = untimed_file_creation();
  return check(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, fcpl, fapl), "H5Fcreate");
}

namespace {

// libhdf5 gives free space at the end of a file back when it closes it, while the image of a
// memory file (taken at a flush) keeps it, as zeros, its end recorded in the superblock; and
// the space reserve_space() took beyond the file's end stays unless cut. The file is cut or
// extended (with zeros) to the image's end and that end recorded, so that a file written
// through a descriptor has the bytes of the image: those of every checkpoint saved before
// saves were streamed. Only a version 0 superblock with 8-byte addresses is touched (what
// create_file_on makes): its end-of-file address is at byte 40.
void restore_image_end(int fd, uint64_t image_end) {
  unsigned char head[48];
  if (::pread(fd, head, sizeof head, 0) != sizeof head) throw IoError("pread", errno ? errno : EIO);
  if (std::memcmp(head, "\x89HDF\r\n\x1a\n", 8) != 0 || head[8] != 0 || head[13] != 8) return;
  uint64_t recorded = 0;
  for (int b = 7; b >= 0; --b) recorded = recorded << 8 | head[40 + b];
  if (recorded > image_end) return;  // never cut what the file says it holds
  if (::ftruncate(fd, static_cast<off_t>(image_end)) != 0) throw IoError("ftruncate", errno);
  if (recorded == image_end) return;
  unsigned char end[8];
  for (int b = 0; b < 8; ++b) end[b] = static_cast<unsigned char>(image_end >> (8 * b));
  if (::pwrite(fd, end, sizeof end, 40) != sizeof end) throw IoError("pwrite", errno ? errno : EIO);
}

}  // namespace

void reserve_space(int fd, uint64_t bytes) {
  if (::fallocate(fd, 0, 0, static_cast<off_t>(bytes)) == 0) return;
  const int err = errno;
  // a file system without fallocate: written as it comes, as before
  if (err != EOPNOTSUPP && err != ENOSYS) throw IoError("fallocate", err);
}

void close_file(Handle& file, int fd) {
  const hid_t id = file.get();
  check_status(H5Fflush(id, H5F_SCOPE_GLOBAL), "H5Fflush");
  haddr_t image_end = 0;
  check_status(H5Fget_eoa(id, &image_end), "H5Fget_eoa");
  const herr_t closed = H5Fclose(id);
  (void)file.release();
  check_status(closed, "H5Fclose");
  restore_image_end(fd, image_end);
}

// libhdf5 copies a file image into the property list and again into the open file unless
// its callbacks hand out the caller's buffer instead; reading never writes to it, so the
// one buffer serves every "copy" (a 1 GB checkpoint costs 1 GB, not 3).
struct ImageFile::Borrowed {
  const void* data;
  size_t size;
};

namespace {

void* borrowed_malloc(size_t size, H5FD_file_image_op_t, void* udata) {
  const auto* b = static_cast<const ImageFile::Borrowed*>(udata);
  return size == b->size ? const_cast<void*>(b->data) : nullptr;
}
void* borrowed_memcpy(void* dest, const void* src, size_t size, H5FD_file_image_op_t, void* udata) {
  const auto* b = static_cast<const ImageFile::Borrowed*>(udata);
  return dest == src && src == b->data && size == b->size ? dest : nullptr;
}
void* refuse_realloc(void*, size_t, H5FD_file_image_op_t, void*) {
  return nullptr;
}
herr_t keep_buffer(void*, H5FD_file_image_op_t, void*) {
  return 0;
}
void* share_udata(void* udata) {
  return udata;
}  // ImageFile owns it and outlives the file
herr_t keep_udata(void*) {
  return 0;
}

}  // namespace

ImageFile::ImageFile(std::string_view bytes) : borrowed_(new Borrowed{bytes.data(), bytes.size()}) {
  // a filter id in a file must never make libhdf5 dlopen() a library
  static const bool plugins_off = H5PLset_loading_state(0) >= 0;
  (void)plugins_off;
  Handle fapl = check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
  check_status(H5Pset_fapl_core(fapl, 1 << 20, /*backing_store=*/0), "H5Pset_fapl_core");
  check_status(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG), "H5Pset_fclose_degree");
  H5FD_file_image_callbacks_t callbacks = {borrowed_malloc, borrowed_memcpy, refuse_realloc,
                                           keep_buffer,     share_udata,     keep_udata,
                                           borrowed_};
  check_status(H5Pset_file_image_callbacks(fapl, &callbacks), "H5Pset_file_image_callbacks");
  check_status(H5Pset_file_image(fapl, const_cast<char*>(bytes.data()), bytes.size()),
               "H5Pset_file_image");
  file_ = H5Fopen(memory_file_name().c_str(), H5F_ACC_RDONLY, fapl);
}

ImageFile::~ImageFile() {
  if (file_ >= 0) H5Fclose(file_);
  delete borrowed_;
}

// ------------------------------------------------------------------ reading from elsewhere
namespace {

// An external link is never followed: its traversal callback fails.
herr_t refuse_external_link(const char*, const char*, const char*, const char*, unsigned*, hid_t,
                            void*) {
  return -1;
}

hid_t make_access(hid_t cls) {
  const hid_t plist = H5Pcreate(cls);
  if (plist < 0 || H5Pset_elink_cb(plist, refuse_external_link, nullptr) < 0) return -1;
  if (cls == H5P_DATASET_ACCESS) {
    // names under a non-folder: no external or virtual source file can be found through them
    H5Pset_efile_prefix(plist, "/dev/null/no-external-files");
    H5Pset_virtual_prefix(plist, "/dev/null/no-virtual-sources");
  }
  return plist;
}

}  // namespace

hid_t link_access() {
  static const hid_t plist = make_access(H5P_LINK_ACCESS);
  return plist;
}

hid_t dataset_access() {
  static const hid_t plist = make_access(H5P_DATASET_ACCESS);
  return plist;
}

hid_t group_access() {
  static const hid_t plist = make_access(H5P_GROUP_ACCESS);
  return plist;
}

// ------------------------------------------------------------------ writing
namespace {

// Chunks of at most ~1 MiB along the first dimension, each with its Fletcher32 sum, the rows
// shared evenly among them (HDF5 stores the last chunk whole: rows of blocks, 576 bytes for
// Q4_K's 1024 weights, cut at 1 MiB left a third of a [1024, 576] dataset's file empty). A
// dataset empty along its first dimension only ([0, 2]: a bpe tokenizer with no merges)
// carries the filter too: its first dimension is made growable (max_dims), as HDF5 allows
// no chunk larger than a fixed dimension.
Handle checksummed_layout(const std::vector<hsize_t>& dims, size_t elem_size,
                          std::vector<hsize_t>& max_dims) {
  Handle dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  check_status(H5Pset_obj_track_times(dcpl, 0), "H5Pset_obj_track_times");  // see above
  max_dims = dims;
  hsize_t row_elems = 1;
  for (size_t d = 1; d < dims.size(); ++d) row_elems *= dims[d];
  if (dims.empty() || row_elems == 0) return dcpl;  // scalars and rows of nothing: no chunks
  std::vector<hsize_t> chunk = dims;
  const hsize_t most = std::clamp<hsize_t>((1 << 20) / std::max<hsize_t>(row_elems * elem_size, 1),
                                           1, std::max<hsize_t>(dims[0], 1));
  const hsize_t chunks = (std::max<hsize_t>(dims[0], 1) + most - 1) / most;
  chunk[0] = (std::max<hsize_t>(dims[0], 1) + chunks - 1) / chunks;
  if (dims[0] == 0) max_dims[0] = H5S_UNLIMITED;
  check_status(H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()), "H5Pset_chunk");
  check_status(H5Pset_fletcher32(dcpl), "H5Pset_fletcher32");
  return dcpl;
}

void write_raw(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims,
               hid_t file_type, hid_t mem_type, size_t elem_size, const void* data) {
  const std::string what = fmt::format("writing dataset '{}'", name);
  std::vector<hsize_t> max_dims;
  Handle dcpl = checksummed_layout(dims, elem_size, max_dims);
  Handle space = check(
      dims.empty() ? H5Screate(H5S_SCALAR)
                   : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), max_dims.data()),
      what);
  Handle lcpl = check(H5Pcreate(H5P_LINK_CREATE), what);
  check_status(H5Pset_create_intermediate_group(lcpl, 1), what);
  Handle dset =
      check(H5Dcreate2(loc, name.c_str(), file_type, space, lcpl, dcpl, H5P_DEFAULT), what);
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  if (n > 0) check_status(H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), what);
}

void write_attr(hid_t loc, const std::string& name, hid_t type, const void* value) {
  const std::string what = fmt::format("writing attribute '{}'", name);
  if (H5Aexists(loc, name.c_str()) > 0) check_status(H5Adelete(loc, name.c_str()), what);
  Handle space = check(H5Screate(H5S_SCALAR), what);
  Handle attr = check(H5Acreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), what);
  check_status(H5Awrite(attr, type, value), what);
}

Handle utf8_string_type() {
  Handle type = check(H5Tcopy(H5T_C_S1), "H5Tcopy");
  check_status(H5Tset_size(type, H5T_VARIABLE), "H5Tset_size");
  check_status(H5Tset_cset(type, H5T_CSET_UTF8), "H5Tset_cset");
  return type;
}

}  // namespace

void write_tensor(hid_t loc, const std::string& name, const ag::Tensor& t) {
  ag::Tensor f = t.packing() ? ag::quant::unpacked(t, ag::DType::Float32)
                             : t.detach().to(ag::DType::Float32).contiguous();
  std::vector<hsize_t> dims(f.shape().begin(), f.shape().end());
  write_raw(loc, name, dims, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 4, f.raw_data());
}

void write_packed(hid_t loc, const std::string& name, const ag::Tensor& t) {
  const ag::quant::PackedFormat& f = *t.packing();
  const auto word = static_cast<size_t>(ag::quant::packed_word_bytes(f));
  if (word != 1 && word != 2)
    throw std::logic_error(fmt::format("write_packed: {} has words of {} bytes", f.name, word));
  const std::span<const uint8_t> bytes = ag::quant::packed_bytes(t);
  const int64_t rows = t.shape()[0], width = t.shape()[1];
  const auto columns = static_cast<hsize_t>(ag::quant::packed_row_bytes(f, width)) / word;
  write_raw(loc, name, {static_cast<hsize_t>(rows), columns},
            word == 2 ? H5T_STD_U16LE : H5T_STD_U8LE,
            word == 2 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT8, word, bytes.data());
  Handle dset = check(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), "opening " + name);
  write_attr_string(dset, "format", f.name);
  write_attr_ints(dset, "shape", {rows, width});
}

void write_u32(hid_t loc, const std::string& name, const std::vector<uint32_t>& v) {
  write_raw(loc, name, {v.size()}, H5T_STD_U32LE, H5T_NATIVE_UINT32, 4, v.data());
}

void write_u32_rows(hid_t loc, const std::string& name, const std::vector<uint32_t>& v,
                    size_t columns) {
  write_raw(loc, name, {v.size() / columns, columns}, H5T_STD_U32LE, H5T_NATIVE_UINT32, 4,
            v.data());
}

void write_u64(hid_t loc, const std::string& name, const std::vector<uint64_t>& v) {
  write_raw(loc, name, {v.size()}, H5T_STD_U64LE, H5T_NATIVE_UINT64, 8, v.data());
}

void write_attr_string(hid_t loc, const std::string& name, const std::string& value) {
  Handle type = utf8_string_type();
  const char* p = value.c_str();
  write_attr(loc, name, type, &p);
}

void write_attr_int(hid_t loc, const std::string& name, int64_t value) {
  write_attr(loc, name, H5T_NATIVE_INT64, &value);
}

void write_attr_double(hid_t loc, const std::string& name, double value) {
  write_attr(loc, name, H5T_NATIVE_DOUBLE, &value);
}

void write_attr_ints(hid_t loc, const std::string& name, const std::vector<int64_t>& values) {
  const std::string what = fmt::format("writing attribute '{}'", name);
  const hsize_t n = values.size();
  Handle space = check(H5Screate_simple(1, &n, nullptr), what);
  Handle attr =
      check(H5Acreate2(loc, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), what);
  check_status(H5Awrite(attr, H5T_NATIVE_INT64, values.data()), what);
}

Handle create_group(hid_t loc, const std::string& name) {
  Handle gcpl = check(H5Pcreate(H5P_GROUP_CREATE), "H5Pcreate");
  check_status(H5Pset_obj_track_times(gcpl, 0), "H5Pset_obj_track_times");  // see above
  check_status(H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
               "H5Pset_link_creation_order");
  return check(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT),
               fmt::format("creating group '{}'", name));
}

// ------------------------------------------------------------------ reading
bool exists(hid_t loc, const std::string& name) {
  const htri_t r = H5Lexists(loc, name.c_str(), link_access());
  if (r < 0) last_error();
  return r > 0;
}

bool attr_exists(hid_t loc, const std::string& name) {
  const htri_t r = H5Aexists(loc, name.c_str());
  if (r < 0) last_error();
  return r > 0;
}

namespace {

Handle open_attr(hid_t loc, const std::string& name, const std::string& where) {
  if (!attr_exists(loc, name))
    throw std::runtime_error(fmt::format("attribute '{}' of {} is missing", name, where));
  return check(H5Aopen(loc, name.c_str(), H5P_DEFAULT),
               fmt::format("attribute '{}' of {}", name, where));
}

void require_single_value(hid_t attr, const std::string& name, const std::string& where) {
  Handle space = check(H5Aget_space(attr), fmt::format("attribute '{}' of {}", name, where));
  if (H5Sget_simple_extent_npoints(space) != 1)
    throw std::runtime_error(fmt::format("attribute '{}' of {} holds {} values, expected one", name,
                                         where, H5Sget_simple_extent_npoints(space)));
}

template <typename T>
T read_attr_number(hid_t loc, const std::string& name, const std::string& where, hid_t mem_type,
                   H5T_class_t want, const char* kind) {
  Handle attr = open_attr(loc, name, where);
  require_single_value(attr, name, where);
  Handle type = check(H5Aget_type(attr), fmt::format("attribute '{}' of {}", name, where));
  const H5T_class_t cls = H5Tget_class(type);
  if (cls != want && !(want == H5T_FLOAT && cls == H5T_INTEGER))
    throw std::runtime_error(fmt::format("attribute '{}' of {} is not {}", name, where, kind));
  T value{};
  check_status(H5Aread(attr, mem_type, &value),
               fmt::format("reading attribute '{}' of {}", name, where));
  return value;
}

struct DatasetInfo {
  Handle dset, type;
  std::vector<hsize_t> dims;
  hsize_t numel = 1;
  H5T_class_t cls = H5T_NO_CLASS;
};

DatasetInfo open_dataset(hid_t loc, const std::string& name, const std::string& where) {
  DatasetInfo d;
  d.dset = check(H5Dopen2(loc, name.c_str(), dataset_access()), fmt::format("opening {}", where));
  Handle space = check(H5Dget_space(d.dset), fmt::format("dataspace of {}", where));
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > H5S_MAX_RANK)
    throw std::runtime_error(fmt::format("{} has an unsupported rank", where));
  d.dims.resize(rank);
  if (rank > 0) H5Sget_simple_extent_dims(space, d.dims.data(), nullptr);
  for (hsize_t x : d.dims) {
    // refuse sizes whose byte count would overflow or exceed 16 GiB
    if (x != 0 && d.numel > (hsize_t{1} << 32) / x)
      throw std::runtime_error(fmt::format("{} is implausibly large", where));
    d.numel *= x;
  }
  d.type = check(H5Dget_type(d.dset), fmt::format("datatype of {}", where));
  d.cls = H5Tget_class(d.type);
  return d;
}

}  // namespace

std::string dims_str(const std::vector<hsize_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

std::string read_attr_string(hid_t loc, const std::string& name, const std::string& where,
                             size_t max_bytes) {
  Handle attr = open_attr(loc, name, where);
  require_single_value(attr, name, where);
  Handle type = check(H5Aget_type(attr), fmt::format("attribute '{}' of {}", name, where));
  if (H5Tget_class(type) != H5T_STRING)
    throw std::runtime_error(fmt::format("attribute '{}' of {} is not a string", name, where));
  const std::string what = fmt::format("reading attribute '{}' of {}", name, where);
  auto refuse_long = [&](size_t size) {
    if (size > max_bytes)
      throw std::runtime_error(
          fmt::format("attribute '{}' of {} is a string of {} bytes, more than the {} allowed",
                      name, where, size, max_bytes));
  };
  if (H5Tis_variable_str(type) > 0) {
    Handle mem = utf8_string_type();
    check_status(H5Tset_cset(mem, H5Tget_cset(type)), what);
    char* p = nullptr;
    check_status(H5Aread(attr, mem, &p), what);
    std::string s = p ? p : "";
    H5free_memory(p);
    refuse_long(s.size());
    return s;
  }
  const size_t size = H5Tget_size(type);
  if (size == 0) throw std::runtime_error(fmt::format("{}: bad string size", what));
  refuse_long(size);
  std::string s(size, '\0');
  check_status(H5Aread(attr, type, s.data()), what);
  s.resize(std::min(s.size(), s.find('\0')));          // fixed-length strings may be NUL-padded
  while (!s.empty() && s.back() == ' ') s.pop_back();  // or space-padded
  return s;
}

int64_t read_attr_int(hid_t loc, const std::string& name, const std::string& where) {
  return read_attr_number<int64_t>(loc, name, where, H5T_NATIVE_INT64, H5T_INTEGER, "an integer");
}

double read_attr_double(hid_t loc, const std::string& name, const std::string& where) {
  return read_attr_number<double>(loc, name, where, H5T_NATIVE_DOUBLE, H5T_FLOAT, "a number");
}

std::vector<int64_t> read_attr_ints(hid_t loc, const std::string& name, const std::string& where,
                                    size_t max_count) {
  Handle attr = open_attr(loc, name, where);
  const std::string what = fmt::format("attribute '{}' of {}", name, where);
  Handle space = check(H5Aget_space(attr), what);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n < 0 || static_cast<size_t>(n) > max_count)
    throw std::runtime_error(
        fmt::format("{} holds {} values, at most {} expected", what, n, max_count));
  Handle type = check(H5Aget_type(attr), what);
  if (H5Tget_class(type) != H5T_INTEGER)
    throw std::runtime_error(fmt::format("{} does not hold integers", what));
  std::vector<int64_t> values(static_cast<size_t>(n));
  if (n > 0) check_status(H5Aread(attr, H5T_NATIVE_INT64, values.data()), "reading " + what);
  return values;
}

std::vector<std::string> attr_names(hid_t loc) {
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  hsize_t idx = 0;
  check_status(H5Aiterate2(loc, H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &names),
               "listing attributes");
  return names;
}

bool attr_is_string(hid_t loc, const std::string& name) {
  Handle attr = check(H5Aopen(loc, name.c_str(), H5P_DEFAULT), fmt::format("attribute '{}'", name));
  Handle type = check(H5Aget_type(attr), fmt::format("attribute '{}'", name));
  return H5Tget_class(type) == H5T_STRING;
}

H5_index_t link_order(hid_t group) {
  Handle gcpl = check(H5Gget_create_plist(group), "H5Gget_create_plist");
  unsigned flags = 0;
  if (H5Pget_link_creation_order(gcpl, &flags) >= 0 && (flags & H5P_CRT_ORDER_INDEXED))
    return H5_INDEX_CRT_ORDER;
  last_error();
  return H5_INDEX_NAME;
}

std::string link_name(hid_t group, H5_index_t order, hsize_t i, size_t max_bytes) {
  const ssize_t len =
      H5Lget_name_by_idx(group, ".", order, H5_ITER_INC, i, nullptr, 0, link_access());
  if (len < 0) check_status(-1, "listing a group");
  if (static_cast<size_t>(len) > max_bytes)
    throw std::runtime_error(fmt::format("a link name of {} bytes (more than {})", len, max_bytes));
  std::string name(static_cast<size_t>(len) + 1, '\0');
  if (H5Lget_name_by_idx(group, ".", order, H5_ITER_INC, i, name.data(), name.size(),
                         link_access()) != len)
    check_status(-1, "listing a group");
  name.resize(static_cast<size_t>(len));
  return name;
}

namespace {

// Rows [row, row + rows) of a dataset: all of its other dimensions.
void read_rows(hid_t dset, hid_t file_space, hid_t mem_type, const std::vector<hsize_t>& dims,
               hsize_t row, hsize_t rows, void* out, const std::string& where) {
  std::vector<hsize_t> start(dims.size(), 0), count = dims;
  start[0] = row, count[0] = rows;
  check_status(
      H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
      fmt::format("selecting rows of {}", where));
  Handle mem_space =
      check(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), where);
  check_status(H5Dread(dset, mem_type, mem_space, file_space, H5P_DEFAULT, out),
               fmt::format("reading {}", where));
}

// Rows per piece: about piece_bytes of them, a whole number of chunks along the first dimension.
hsize_t rows_per_piece(hid_t dset, const std::vector<hsize_t>& dims, size_t row_bytes,
                       size_t piece_bytes) {
  hsize_t rows = std::max<hsize_t>(1, piece_bytes / std::max<size_t>(row_bytes, 1));
  Handle dcpl = check(H5Dget_create_plist(dset), "H5Dget_create_plist");
  if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(dims.size());
    if (H5Pget_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()) ==
            static_cast<int>(dims.size()) &&
        chunk[0] > 0)
      rows = std::max<hsize_t>(1, rows / chunk[0]) * chunk[0];
  }
  return std::min(rows, dims[0]);
}

}  // namespace

void read_in_pieces(hid_t dset, hid_t mem_type, size_t mem_size, const std::string& where,
                    size_t piece_bytes, std::vector<char>& scratch,
                    const std::function<void(const void*, size_t)>& piece) {
  Handle space = check(H5Dget_space(dset), fmt::format("dataspace of {}", where));
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > H5S_MAX_RANK)
    throw std::runtime_error(fmt::format("{} has an unsupported rank", where));
  std::vector<hsize_t> dims(rank);
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  const bool vlen = H5Tis_variable_str(mem_type) > 0 || H5Tdetect_class(mem_type, H5T_VLEN) > 0;
  if (rank == 0) {
    scratch.resize(std::max(scratch.size(), mem_size));
    check_status(H5Dread(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, scratch.data()),
                 fmt::format("reading {}", where));
    piece(scratch.data(), 1);
    if (vlen) H5Dvlen_reclaim(mem_type, space, H5P_DEFAULT, scratch.data());
    return;
  }
  hsize_t row_elems = 1;
  for (int d = 1; d < rank; ++d) row_elems *= dims[d];
  if (dims[0] == 0 || row_elems == 0) return;
  const hsize_t rows = rows_per_piece(dset, dims, row_elems * mem_size, piece_bytes);
  // grown, never shrunk: fresh pages for every dataset would cost more than reading it
  scratch.resize(std::max<size_t>(scratch.size(), rows * row_elems * mem_size));
  for (hsize_t row = 0; row < dims[0]; row += rows) {
    const hsize_t n = std::min(rows, dims[0] - row);
    read_rows(dset, space, mem_type, dims, row, n, scratch.data(), where);
    piece(scratch.data(), n * row_elems);
    if (vlen) {
      std::vector<hsize_t> count = dims;
      count[0] = n;
      Handle mem_space = check(H5Screate_simple(rank, count.data(), nullptr), where);
      H5Dvlen_reclaim(mem_type, mem_space, H5P_DEFAULT, scratch.data());
    }
  }
}

std::vector<int64_t> read_int_values(hid_t loc, const std::string& name, const std::string& where,
                                     int64_t lo, int64_t hi, std::vector<hsize_t>* dims) {
  DatasetInfo d = open_dataset(loc, name, where);
  if (d.cls != H5T_INTEGER)
    throw std::runtime_error(fmt::format("{} {} does not hold integers", where, dims_str(d.dims)));
  if (H5Tget_sign(d.type) == H5T_SGN_NONE && H5Tget_size(d.type) == 8)
    throw std::runtime_error(fmt::format("{} is uint64, expected a narrower integer type", where));
  std::vector<int64_t> v(d.numel);
  if (d.numel > 0)
    check_status(H5Dread(d.dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
                 fmt::format("reading {}", where));
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < lo || v[i] > hi)
      throw std::runtime_error(
          fmt::format("{} element {} is {}, outside [{}, {}]", where, i, v[i], lo, hi));
  if (dims) *dims = d.dims;
  return v;
}

std::vector<uint64_t> read_u64_values(hid_t loc, const std::string& name, const std::string& where,
                                      std::vector<hsize_t>* dims) {
  DatasetInfo d = open_dataset(loc, name, where);
  if (d.cls != H5T_INTEGER || H5Tget_size(d.type) != 8 || H5Tget_sign(d.type) != H5T_SGN_NONE)
    throw std::runtime_error(fmt::format("{} {} is not uint64", where, dims_str(d.dims)));
  std::vector<uint64_t> v(d.numel);
  if (d.numel > 0)
    check_status(H5Dread(d.dset, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
                 fmt::format("reading {}", where));
  if (dims) *dims = d.dims;
  return v;
}

}  // namespace io::h5
