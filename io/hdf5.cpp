#include "io/hdf5.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "autograd/ops.h"

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
herr_t keep_innermost(unsigned, const H5E_error2_t* err, void* out) {
  // walked from the API call inwards: the last entry is the root cause
  if (err->desc && *err->desc) *static_cast<std::string*>(out) = err->desc;
  return 0;
}
}  // namespace

std::string last_error() {
  std::string msg;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost, &msg);
  H5Eclear2(H5E_DEFAULT);
  return msg;
}

Handle check(hid_t id, const std::string& what) {
  if (id < 0) {
    const std::string why = last_error();
    throw std::runtime_error(why.empty() ? what : fmt::format("{}: {}", what, why));
  }
  return Handle(id);
}

void check_status(herr_t status, const std::string& what) {
  if (status < 0) {
    const std::string why = last_error();
    throw std::runtime_error(why.empty() ? what : fmt::format("{}: {}", what, why));
  }
}

// ------------------------------------------------------------------ writing
namespace {

// Chunks of at most ~1 MiB along the first dimension, each with its Fletcher32 sum.
Handle checksummed_layout(const std::vector<hsize_t>& dims, size_t elem_size) {
  Handle dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  if (dims.empty() || n == 0) return dcpl;  // scalars and empty datasets cannot be chunked
  std::vector<hsize_t> chunk = dims;
  const hsize_t row_bytes = n / dims[0] * elem_size;
  chunk[0] = std::clamp<hsize_t>((1 << 20) / std::max<hsize_t>(row_bytes, 1), 1, dims[0]);
  check_status(H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()), "H5Pset_chunk");
  check_status(H5Pset_fletcher32(dcpl), "H5Pset_fletcher32");
  return dcpl;
}

void write_raw(hid_t loc, const std::string& name, const std::vector<hsize_t>& dims, hid_t file_type,
               hid_t mem_type, size_t elem_size, const void* data) {
  const std::string what = fmt::format("writing dataset '{}'", name);
  Handle space = check(dims.empty() ? H5Screate(H5S_SCALAR)
                                    : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                       what);
  Handle dcpl = checksummed_layout(dims, elem_size);
  Handle lcpl = check(H5Pcreate(H5P_LINK_CREATE), what);
  check_status(H5Pset_create_intermediate_group(lcpl, 1), what);
  Handle dset = check(H5Dcreate2(loc, name.c_str(), file_type, space, lcpl, dcpl, H5P_DEFAULT), what);
  check_status(H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), what);
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
  ag::Tensor f = t.detach().to(ag::DType::Float32).contiguous();
  std::vector<hsize_t> dims(f.shape().begin(), f.shape().end());
  write_raw(loc, name, dims, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 4, f.raw_data());
}

void write_u32(hid_t loc, const std::string& name, const std::vector<uint32_t>& v) {
  write_raw(loc, name, {v.size()}, H5T_STD_U32LE, H5T_NATIVE_UINT32, 4, v.data());
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

Handle create_group(hid_t loc, const std::string& name) {
  Handle gcpl = check(H5Pcreate(H5P_GROUP_CREATE), "H5Pcreate");
  check_status(H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
               "H5Pset_link_creation_order");
  return check(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT),
               fmt::format("creating group '{}'", name));
}

// ------------------------------------------------------------------ reading
bool exists(hid_t loc, const std::string& name) {
  const htri_t r = H5Lexists(loc, name.c_str(), H5P_DEFAULT);
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
  return check(H5Aopen(loc, name.c_str(), H5P_DEFAULT), fmt::format("attribute '{}' of {}", name, where));
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
  check_status(H5Aread(attr, mem_type, &value), fmt::format("reading attribute '{}' of {}", name, where));
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
  d.dset = check(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), fmt::format("opening {}", where));
  Handle space = check(H5Dget_space(d.dset), fmt::format("dataspace of {}", where));
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > 16) throw std::runtime_error(fmt::format("{} has an unsupported rank", where));
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

std::string dims_str(const std::vector<hsize_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

}  // namespace

std::string read_attr_string(hid_t loc, const std::string& name, const std::string& where) {
  Handle attr = open_attr(loc, name, where);
  require_single_value(attr, name, where);
  Handle type = check(H5Aget_type(attr), fmt::format("attribute '{}' of {}", name, where));
  if (H5Tget_class(type) != H5T_STRING)
    throw std::runtime_error(fmt::format("attribute '{}' of {} is not a string", name, where));
  const std::string what = fmt::format("reading attribute '{}' of {}", name, where);
  if (H5Tis_variable_str(type) > 0) {
    Handle mem = utf8_string_type();
    check_status(H5Tset_cset(mem, H5Tget_cset(type)), what);
    char* p = nullptr;
    check_status(H5Aread(attr, mem, &p), what);
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  const size_t size = H5Tget_size(type);
  if (size == 0 || size > (1u << 30)) throw std::runtime_error(fmt::format("{}: bad string size", what));
  std::string s(size, '\0');
  check_status(H5Aread(attr, type, s.data()), what);
  s.resize(std::min(s.size(), s.find('\0')));  // fixed-length strings may be NUL-padded
  while (!s.empty() && s.back() == ' ') s.pop_back();  // or space-padded
  return s;
}

int64_t read_attr_int(hid_t loc, const std::string& name, const std::string& where) {
  return read_attr_number<int64_t>(loc, name, where, H5T_NATIVE_INT64, H5T_INTEGER, "an integer");
}

double read_attr_double(hid_t loc, const std::string& name, const std::string& where) {
  return read_attr_number<double>(loc, name, where, H5T_NATIVE_DOUBLE, H5T_FLOAT, "a number");
}

std::vector<std::string> attr_names(hid_t loc) {
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  hsize_t idx = 0;
  check_status(H5Aiterate2(loc, H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &names), "listing attributes");
  return names;
}

bool attr_is_string(hid_t loc, const std::string& name) {
  Handle attr = check(H5Aopen(loc, name.c_str(), H5P_DEFAULT), fmt::format("attribute '{}'", name));
  Handle type = check(H5Aget_type(attr), fmt::format("attribute '{}'", name));
  return H5Tget_class(type) == H5T_STRING;
}

std::vector<std::string> member_names(hid_t group) {
  H5_index_t index = H5_INDEX_NAME;
  Handle gcpl = check(H5Gget_create_plist(group), "H5Gget_create_plist");
  unsigned flags = 0;
  if (H5Pget_link_creation_order(gcpl, &flags) >= 0 && (flags & H5P_CRT_ORDER_INDEXED))
    index = H5_INDEX_CRT_ORDER;
  H5G_info_t info;
  check_status(H5Gget_info(group, &info), "listing a group");
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len = H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (len < 0) check_status(-1, "listing a group");
    std::string name(static_cast<size_t>(len) + 1, '\0');
    H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT);
    name.resize(static_cast<size_t>(len));
    names.push_back(std::move(name));
  }
  return names;
}

namespace {
H5I_type_t object_type(hid_t loc, const std::string& name) {
  if (!exists(loc, name)) return H5I_BADID;
  const hid_t obj = H5Oopen(loc, name.c_str(), H5P_DEFAULT);
  if (obj < 0) {
    last_error();
    return H5I_BADID;
  }
  Handle owned(obj);
  return H5Iget_type(obj);
}
}  // namespace

bool is_dataset(hid_t loc, const std::string& name) { return object_type(loc, name) == H5I_DATASET; }
bool is_group(hid_t loc, const std::string& name) { return object_type(loc, name) == H5I_GROUP; }

ag::Tensor read_float_tensor(hid_t loc, const std::string& name, const std::string& where) {
  DatasetInfo d = open_dataset(loc, name, where);
  if (d.cls != H5T_FLOAT)
    throw std::runtime_error(fmt::format("{} holds {} values, expected floats", where,
                                         d.cls == H5T_INTEGER ? "integer" : "non-numeric"));
  ag::Shape shape(d.dims.begin(), d.dims.end());
  ag::Tensor t = ag::empty(shape, ag::DType::Float32);
  if (d.numel > 0)
    check_status(H5Dread(d.dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw_data()),
                 fmt::format("reading {}", where));
  return t;
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
      throw std::runtime_error(fmt::format("{} element {} is {}, outside [{}, {}]", where, i, v[i], lo, hi));
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

void read_all(hid_t dataset, const std::string& where) {
  Handle type = check(H5Dget_type(dataset), fmt::format("datatype of {}", where));
  Handle space = check(H5Dget_space(dataset), fmt::format("dataspace of {}", where));
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  const size_t size = H5Tget_size(type);
  if (n < 0 || size == 0) throw std::runtime_error(fmt::format("{} has a bad shape or type", where));
  if (n == 0) return;
  if (H5Tis_variable_str(type) > 0 || H5Tdetect_class(type, H5T_VLEN) > 0) {
    // variable-length data lives on the heap: read it through the library and reclaim it
    std::vector<char> buf(static_cast<size_t>(n) * size);
    check_status(H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), fmt::format("reading {}", where));
    H5Dvlen_reclaim(type, space, H5P_DEFAULT, buf.data());
    return;
  }
  if (static_cast<double>(n) * size > 16.0 * (1 << 30))
    throw std::runtime_error(fmt::format("{} is implausibly large", where));
  std::vector<char> buf(static_cast<size_t>(n) * size);
  check_status(H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), fmt::format("reading {}", where));
}

}  // namespace io::h5
