#pragma once
// A thin layer over HDF5's C API for the checkpoint code: owned handles, errors that carry
// HDF5's own innermost reason, files that live in memory, typed reads and writes of datasets
// and attributes, and the property lists that keep a hostile file from reaching outside
// itself. Internal to io/; checkpoint.h is the public map.
#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
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
  // Gives up ownership without closing (the caller has closed it, or will).
  hid_t release() {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }

 private:
  hid_t id_ = -1;
};

// Turns off HDF5's printing of its error stack (we report errors ourselves).
void silence_library_errors();
// The innermost description on HDF5's error stack ("data error detected by Fletcher32
// checksum"), then clears the stack; empty when nothing is there.
std::string last_error();

// A failed read or write of the file itself (a full disk): errno as the driver reported it.
struct IoError : std::runtime_error {
  IoError(const std::string& message, int err) : std::runtime_error(message), err(err) {}
  int err;
};

// Throws std::runtime_error("<what>: <HDF5's reason>") when id < 0, an IoError when the reason
// is the operating system's; returns an owned id.
Handle check(hid_t id, const std::string& what);
void check_status(herr_t status, const std::string& what);

// ---- files in memory
// The core driver open()s the name it is given even when it is handed the bytes (to refuse
// a file that exists, and, when creating, to read one), so a real name would let a file
// planted in the working folder break every save and load or be read by them. These names
// lie under /dev/null, which is not a folder, so no file can have them; each is new, because
// libhdf5 takes two open files of one name for the same file.
std::string memory_file_name();
// An empty file in memory, written with the usual calls; image() then takes its bytes.
Handle create_memory_file();
std::string image(hid_t file);

// ---- files written through a descriptor
// A new file written through fd, an empty regular file open for reading and writing (libhdf5
// opens files by name: it gets fd's /proc/self/fd name, so it writes exactly the file the
// caller made), with libhdf5's own locking off (the caller holds the file's lock). Its bytes
// are those image() would give for the same calls on a create_memory_file(), but only the
// chunk being written is ever in memory.
Handle create_file_on(int fd);
// Takes `bytes` of disk for fd's file beyond what it holds now (fallocate; skipped where the
// file system cannot), so that a full disk or a file-size limit is an IoError here, before
// libhdf5 writes anything that could fail: libhdf5 1.10 cannot close a file whose writes
// failed, and crashes at exit on it. close_file cuts what was not used.
void reserve_space(int fd, uint64_t bytes);
// Closes a file made by create_file_on(fd), flushing everything, and leaves it with the bytes
// image() gives (libhdf5 cuts the free space at its end on closing; the image keeps it as
// zeros). Every object opened in it must be closed already. Throws (an IoError for a full
// disk) when anything could not be written.
void close_file(Handle& file, int fd);

// A file opened read-only on bytes in memory without copying them; the bytes must outlive
// it. Closing it closes every object opened in it (so nothing can read the bytes later).
class ImageFile {
 public:
  explicit ImageFile(std::string_view bytes);
  ~ImageFile();
  ImageFile(const ImageFile&) = delete;
  ImageFile& operator=(const ImageFile&) = delete;
  // Negative, with HDF5's reason on its error stack, when the bytes are not a readable file.
  hid_t get() const { return file_; }
  operator hid_t() const { return file_; }
  struct Borrowed;  // what libhdf5's image callbacks hand out instead of copies

 private:
  Borrowed* borrowed_ = nullptr;
  hid_t file_ = -1;
};

// ---- reading files from elsewhere
// Property lists that make libhdf5 refuse to follow an external link, and no filter plugin
// ever loaded: the second line of defence, after the reader's own check of every link and
// dataset (checkpoint_reader.cpp), against a file that points outside itself.
hid_t link_access();     // H5Lexists, H5Lget_info, H5Oopen, H5Oget_info
hid_t dataset_access();  // H5Dopen2
hid_t group_access();    // H5Gopen2

// ---- writing
// Float tensors are stored as float32; chunked with Fletcher32 when rank >= 1 and non-empty.
void write_tensor(hid_t loc, const std::string& name, const ag::Tensor& t);
// A packed tensor (autograd/quant/packed_weight.h) as its blocks: [rows, bytes a row]
// uint8, or [rows, width] uint16 for one-weight blocks of two bytes (bfloat16), checksummed
// as write_tensor's; its attributes `format` (the packed formats table's name) and `shape`
// (the weight's [rows, width]).
void write_packed(hid_t loc, const std::string& name, const ag::Tensor& t);
void write_u32(hid_t loc, const std::string& name, const std::vector<uint32_t>& values);
// values as [values.size() / columns, columns] (row-major); checksummed unless empty.
void write_u32_rows(hid_t loc, const std::string& name, const std::vector<uint32_t>& values,
                    size_t columns);
void write_u64(hid_t loc, const std::string& name, const std::vector<uint64_t>& values);
void write_attr_string(hid_t loc, const std::string& name, const std::string& value);
void write_attr_int(hid_t loc, const std::string& name, int64_t value);
void write_attr_double(hid_t loc, const std::string& name, double value);
// A one-dimensional attribute of integers.
void write_attr_ints(hid_t loc, const std::string& name, const std::vector<int64_t>& values);
// A group that remembers the order its links were made, so readers list them in it.
Handle create_group(hid_t loc, const std::string& name);

// ---- reading (errors name `where`, the object's path in the file)
bool exists(hid_t loc, const std::string& name);
bool attr_exists(hid_t loc, const std::string& name);
// Strings longer than max_bytes are refused (a variable-length one after it is read: HDF5
// cannot tell its length before).
std::string read_attr_string(hid_t loc, const std::string& name, const std::string& where,
                             size_t max_bytes = 64 << 10);
int64_t read_attr_int(hid_t loc, const std::string& name, const std::string& where);
double read_attr_double(hid_t loc, const std::string& name, const std::string& where);
// An attribute of at most max_count integers (more is refused before any is read).
std::vector<int64_t> read_attr_ints(hid_t loc, const std::string& name, const std::string& where,
                                    size_t max_count);
std::vector<std::string> attr_names(hid_t loc);
bool attr_is_string(hid_t loc, const std::string& name);

// How a group's links are listed: in creation order when the group tracks it, else by name.
H5_index_t link_order(hid_t group);
// The name of link i in that order; names over max_bytes are an error.
std::string link_name(hid_t group, H5_index_t order, hsize_t i, size_t max_bytes = 4096);

// Calls piece(values, count) for consecutive runs of a dataset's elements, read as mem_type
// (of mem_size bytes each) into scratch (kept by the caller from one dataset to the next) in
// pieces of about piece_bytes: whole rows along the first dimension, whole chunks when it is
// chunked. Variable-length data is reclaimed after each piece. A dataset is never read whole
// at once, so its reader can report progress and memory stays at one piece.
void read_in_pieces(hid_t dataset, hid_t mem_type, size_t mem_size, const std::string& where,
                    size_t piece_bytes, std::vector<char>& scratch,
                    const std::function<void(const void*, size_t)>& piece);

// Integer datasets, every value checked to lie in [lo, hi].
std::vector<int64_t> read_int_values(hid_t loc, const std::string& name, const std::string& where,
                                     int64_t lo, int64_t hi, std::vector<hsize_t>* dims = nullptr);
std::vector<uint64_t> read_u64_values(hid_t loc, const std::string& name, const std::string& where,
                                      std::vector<hsize_t>* dims = nullptr);

// "[4, 4]"
std::string dims_str(const std::vector<hsize_t>& dims);

}  // namespace io::h5
