#pragma once
// A thin layer over HDF5's C API for the checkpoint code: owned handles, errors that carry
// HDF5's own innermost reason, and typed reads and writes of datasets and attributes.
// Internal to io/; checkpoint.h is the public map.
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace io::h5 {

// Owns one hid_t and closes it with the right H5*close for its kind.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) reset(), id_ = o.id_, o.id_ = -1;
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }
  void reset();

 private:
  hid_t id_ = -1;
};

// Turns off HDF5's printing of its error stack (we report errors ourselves).
void silence_library_errors();
// The innermost description on HDF5's error stack ("data error detected by Fletcher32
// checksum"), then clears the stack; empty when nothing is there.
std::string last_error();

// Throws std::runtime_error("<what>: <HDF5's reason>") when id < 0; returns an owned id.
Handle check(hid_t id, const std::string& what);
void check_status(herr_t status, const std::string& what);

// ---- writing
// Float tensors are stored as float32; chunked with Fletcher32 when rank >= 1 and non-empty.
void write_tensor(hid_t loc, const std::string& name, const ag::Tensor& t);
void write_u32(hid_t loc, const std::string& name, const std::vector<uint32_t>& values);
void write_u64(hid_t loc, const std::string& name, const std::vector<uint64_t>& values);
void write_attr_string(hid_t loc, const std::string& name, const std::string& value);
void write_attr_int(hid_t loc, const std::string& name, int64_t value);
void write_attr_double(hid_t loc, const std::string& name, double value);
// A group that remembers the order its links were made, so readers list them in it.
Handle create_group(hid_t loc, const std::string& name);

// ---- reading (errors name `where`, the object's path in the file)
bool exists(hid_t loc, const std::string& name);
bool attr_exists(hid_t loc, const std::string& name);
std::string read_attr_string(hid_t loc, const std::string& name, const std::string& where);
int64_t read_attr_int(hid_t loc, const std::string& name, const std::string& where);
double read_attr_double(hid_t loc, const std::string& name, const std::string& where);
std::vector<std::string> attr_names(hid_t loc);
bool attr_is_string(hid_t loc, const std::string& name);

// Link names of a group, in creation order when the group tracks it, else by name.
std::vector<std::string> member_names(hid_t group);
bool is_dataset(hid_t loc, const std::string& name);
bool is_group(hid_t loc, const std::string& name);

ag::Tensor read_float_tensor(hid_t loc, const std::string& name, const std::string& where);
// Integer datasets, every value checked to lie in [lo, hi].
std::vector<int64_t> read_int_values(hid_t loc, const std::string& name, const std::string& where,
                                     int64_t lo, int64_t hi, std::vector<hsize_t>* dims = nullptr);
std::vector<uint64_t> read_u64_values(hid_t loc, const std::string& name, const std::string& where,
                                      std::vector<hsize_t>* dims = nullptr);
// Reads every element (so checksums are verified) and discards them.
void read_all(hid_t dataset, const std::string& where);

}  // namespace io::h5
