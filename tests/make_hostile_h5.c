/* Writes the hostile HDF5 files that tests/test_hostile_checkpoint.cpp feeds to the
 * checkpoint loader: each looks like an attograd checkpoint (root attributes, /model,
 * /tokenizer) but carries one thing a loader must refuse or report. Made here with the HDF5
 * C API rather than checked in, so every file says how it was built.
 *
 *   make_hostile_h5 OUT_DIR SECRET_FILE [FILE...]     (all of them when no FILE is named)
 *
 * SECRET_FILE is a file of at least 64 bytes that a hostile checkpoint tries to pull in
 * (as external storage); OUT_DIR/secret.h5 is written as the target of external links and
 * virtual datasets. Exit status 0 when every file was written. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* out_dir;
static const char* secret_file;

static void fail(const char* what) {
  fprintf(stderr, "make_hostile_h5: %s failed\n", what);
  exit(1);
}

static hid_t check(hid_t id, const char* what) {
  if (id < 0) fail(what);
  return id;
}

static void path_of(char* buf, size_t size, const char* name) {
  snprintf(buf, size, "%s/%s", out_dir, name);
}

static void attr_string(hid_t loc, const char* name, const char* value) {
  hid_t type = check(H5Tcopy(H5T_C_S1), "H5Tcopy");
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = check(H5Screate(H5S_SCALAR), "H5Screate");
  hid_t attr = check(H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT), name);
  if (H5Awrite(attr, type, &value) < 0) fail(name);
  H5Aclose(attr), H5Sclose(space), H5Tclose(type);
}

static void attr_int(hid_t loc, const char* name, long long value) {
  hid_t space = check(H5Screate(H5S_SCALAR), "H5Screate");
  hid_t attr = check(H5Acreate2(loc, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), name);
  if (H5Awrite(attr, H5T_NATIVE_LLONG, &value) < 0) fail(name);
  H5Aclose(attr), H5Sclose(space);
}

/* A file with the root attributes of an attograd checkpoint and a byte tokenizer. */
static hid_t new_checkpoint(const char* name, const char* config) {
  char path[4096];
  path_of(path, sizeof path, name);
  hid_t file = check(H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), path);
  attr_string(file, "format", "attograd-checkpoint");
  attr_int(file, "format_version", 1);
  attr_string(file, "config", config);
  attr_int(file, "step", 0);
  hid_t tok =
      check(H5Gcreate2(file, "tokenizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "tokenizer");
  attr_string(tok, "type", "byte");
  H5Gclose(tok);
  return file;
}

static hid_t new_group(hid_t loc, const char* name) {
  return check(H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), name);
}

/* float32 data as attograd writes it (chunked, Fletcher32) or as h5py does (contiguous,
 * no checksum). */
static void write_floats(hid_t loc, const char* name, int rank, const hsize_t* dims,
                         const float* data, int checksummed) {
  hid_t space = check(rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR), name);
  hid_t dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  if (checksummed) {
    H5Pset_chunk(dcpl, rank, dims);
    H5Pset_fletcher32(dcpl);
  }
  hid_t dset =
      check(H5Dcreate2(loc, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), name);
  if (data && H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) fail(name);
  H5Dclose(dset), H5Pclose(dcpl), H5Sclose(space);
}

static const float small[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const hsize_t four_by_four[2] = {4, 4};

/* The other file that links and virtual datasets point at. */
static void secret_h5(void) {
  char path[4096];
  path_of(path, sizeof path, "secret.h5");
  hid_t file = check(H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), path);
  float secret[16];
  for (int i = 0; i < 16; ++i) secret[i] = 31337.0f + (float)i;
  write_floats(file, "data", 2, four_by_four, secret, 0);
  H5Fclose(file);
}

/* /model/tok_emb.weight keeps its bytes in SECRET_FILE: loading it would copy that file
 * into the weights (and into every checkpoint saved from them). */
static void external_storage(void) {
  hid_t file = new_checkpoint("external_storage.h5", "{}");
  hid_t model = new_group(file, "model");
  hid_t space = check(H5Screate_simple(2, four_by_four, NULL), "space");
  hid_t dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  if (H5Pset_external(dcpl, secret_file, 0, 64) < 0) fail("H5Pset_external");
  hid_t dset = check(
      H5Dcreate2(model, "tok_emb.weight", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
      "external dataset");
  H5Dclose(dset), H5Pclose(dcpl), H5Sclose(space), H5Gclose(model), H5Fclose(file);
}

static void external_link(void) {
  hid_t file = new_checkpoint("external_link.h5", "{}");
  hid_t model = new_group(file, "model");
  if (H5Lcreate_external("secret.h5", "/data", model, "tok_emb.weight", H5P_DEFAULT, H5P_DEFAULT) <
      0)
    fail("H5Lcreate_external");
  H5Gclose(model), H5Fclose(file);
}

/* The same aimed at OUT_DIR/fifo.h5, which the test makes a FIFO: a reader that opened it
 * would block there. */
static void external_link_fifo(void) {
  hid_t file = new_checkpoint("external_link_fifo.h5", "{}");
  hid_t model = new_group(file, "model");
  if (H5Lcreate_external("fifo.h5", "/data", model, "tok_emb.weight", H5P_DEFAULT, H5P_DEFAULT) < 0)
    fail("H5Lcreate_external");
  H5Gclose(model), H5Fclose(file);
}

/* A soft link in a group attograd never reads: every group is checked. */
static void soft_link(void) {
  hid_t file = new_checkpoint("soft_link.h5", "{}");
  hid_t model = new_group(file, "model");
  write_floats(model, "tok_emb.weight", 2, four_by_four, small, 1);
  hid_t notes = new_group(file, "notes");
  if (H5Lcreate_soft("/model/tok_emb.weight", notes, "alias", H5P_DEFAULT, H5P_DEFAULT) < 0)
    fail("H5Lcreate_soft");
  H5Gclose(notes), H5Gclose(model), H5Fclose(file);
}

static hid_t refuse_traversal(const char* name, hid_t cur_group, const void* udata,
                              size_t udata_size, hid_t lapl_id, hid_t dxpl_id) {
  (void)name, (void)cur_group, (void)udata, (void)udata_size, (void)lapl_id, (void)dxpl_id;
  return -1;
}

/* A link of a user-defined class (187): what it means is up to code the reader lacks. */
static void user_link(void) {
  const H5L_class_t cls = {H5L_LINK_CLASS_T_VERS,
                           (H5L_type_t)187,
                           "attograd-test-link",
                           NULL,
                           NULL,
                           NULL,
                           refuse_traversal,
                           NULL,
                           NULL};
  if (H5Lregister(&cls) < 0) fail("H5Lregister");
  hid_t file = new_checkpoint("user_link.h5", "{}");
  hid_t model = new_group(file, "model");
  write_floats(model, "tok_emb.weight", 2, four_by_four, small, 1);
  hid_t notes = new_group(file, "notes");
  const char target[] = "anything";
  if (H5Lcreate_ud(notes, "custom", (H5L_type_t)187, target, sizeof target, H5P_DEFAULT,
                   H5P_DEFAULT) < 0)
    fail("H5Lcreate_ud");
  H5Gclose(notes), H5Gclose(model), H5Fclose(file);
}

static void virtual_dataset(void) {
  hid_t file = new_checkpoint("virtual.h5", "{}");
  hid_t model = new_group(file, "model");
  hid_t space = check(H5Screate_simple(2, four_by_four, NULL), "space");
  hid_t dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  if (H5Pset_virtual(dcpl, space, "secret.h5", "/data", space) < 0) fail("H5Pset_virtual");
  hid_t dset = check(
      H5Dcreate2(model, "tok_emb.weight", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
      "virtual dataset");
  H5Dclose(dset), H5Pclose(dcpl), H5Sclose(space), H5Gclose(model), H5Fclose(file);
}

/* [[[[...]]]] 100,000 deep: a recursive JSON parser overflows its stack on it. */
static void deep_json(void) {
  const size_t depth = 100000;
  char* config = malloc(2 * depth + 1);
  if (!config) fail("malloc");
  memset(config, '[', depth);
  memset(config + depth, ']', depth);
  config[2 * depth] = '\0';
  hid_t file = new_checkpoint("deep_json.h5", config);
  free(config);
  hid_t model = new_group(file, "model");
  H5Gclose(model), H5Fclose(file);
}

/* A config that declares a model of billions of parameters beside one small weight. */
static void lying_shapes(void) {
  hid_t file =
      new_checkpoint("lying_shapes.h5",
                     "{\"vocab_size\": 50000, \"context_length\": 1024, \"d_model\": 100000, "
                     "\"n_heads\": 10, \"n_layers\": 48, \"d_ff\": 400000, \"dropout\": 0.0, "
                     "\"qkv_bias\": false, \"tie_weights\": true}");
  hid_t model = new_group(file, "model");
  const hsize_t dims[2] = {2, 8};
  write_floats(model, "tok_emb.weight", 2, dims, small, 1);
  H5Gclose(model), H5Fclose(file);
}

/* 40 GB declared in chunks of which none is stored: reading it would allocate 40 GB of
 * fill values from a file of a few kilobytes. */
static void huge_unallocated(void) {
  hid_t file = new_checkpoint("huge_unallocated.h5", "{}");
  hid_t model = new_group(file, "model");
  const hsize_t dims[2] = {100000, 100000}, chunk[2] = {1000, 1000};
  hid_t space = check(H5Screate_simple(2, dims, NULL), "space");
  hid_t dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  H5Pset_chunk(dcpl, 2, chunk);
  H5Pset_fletcher32(dcpl);
  H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_INCR);
  hid_t dset = check(
      H5Dcreate2(model, "tok_emb.weight", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
      "huge dataset");
  H5Dclose(dset), H5Pclose(dcpl), H5Sclose(space), H5Gclose(model), H5Fclose(file);
}

/* The same with contiguous storage never written (all fill value). */
static void huge_contiguous(void) {
  hid_t file = new_checkpoint("huge_contiguous.h5", "{}");
  hid_t model = new_group(file, "model");
  const hsize_t dims[2] = {50000, 50000};
  hid_t space = check(H5Screate_simple(2, dims, NULL), "space");
  hid_t dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
  hid_t dset = check(
      H5Dcreate2(model, "tok_emb.weight", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
      "huge contiguous dataset");
  H5Dclose(dset), H5Pclose(dcpl), H5Sclose(space), H5Gclose(model), H5Fclose(file);
}

/* 256 MB of zeros that deflate squeezes into a few hundred kilobytes. */
static void deflate_bomb(void) {
  hid_t file = new_checkpoint("deflate_bomb.h5", "{}");
  hid_t model = new_group(file, "model");
  const hsize_t dims[2] = {65536, 1024}, chunk[2] = {1024, 1024};
  hid_t space = check(H5Screate_simple(2, dims, NULL), "space");
  hid_t dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  H5Pset_chunk(dcpl, 2, chunk);
  H5Pset_deflate(dcpl, 1);
  hid_t dset = check(
      H5Dcreate2(model, "tok_emb.weight", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
      "deflated dataset");
  float* zeros = calloc(1024 * 1024, sizeof(float));
  if (!zeros) fail("calloc");
  hid_t mem = check(H5Screate_simple(2, chunk, NULL), "space");
  for (hsize_t row = 0; row < dims[0]; row += chunk[0]) {
    const hsize_t start[2] = {row, 0};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, chunk, NULL);
    if (H5Dwrite(dset, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, zeros) < 0) fail("deflate write");
  }
  free(zeros);
  H5Sclose(mem), H5Dclose(dset), H5Pclose(dcpl), H5Sclose(space), H5Gclose(model), H5Fclose(file);
}

/* Weights with 3 NaN and 1 infinity, the first of them at [0, 5]. */
static void nan_weights(void) {
  hid_t file = new_checkpoint("nan_weights.h5", "{}");
  hid_t model = new_group(file, "model");
  float w[16];
  memcpy(w, small, sizeof w);
  w[5] = NAN, w[8] = NAN, w[11] = NAN, w[15] = INFINITY;
  const hsize_t dims[2] = {2, 8};
  write_floats(model, "blocks.0.attn.W_query.weight", 2, dims, w, 1);
  write_floats(model, "ln_f.bias", 1, dims + 1, small, 1);
  H5Gclose(model), H5Fclose(file);
}

/* A training checkpoint's /optimizer as an edit (h5py, or this) might leave it: AdamW with
 * second moments `v` and step count `step`, for the weight w [2, 8]. */
static void optimizer_state(const char* name, const float* v, long long step) {
  hid_t file = new_checkpoint(name, "{}");
  hid_t model = new_group(file, "model");
  const hsize_t dims[2] = {2, 8};
  write_floats(model, "w", 2, dims, small, 1);
  hid_t opt = new_group(file, "optimizer");
  attr_string(opt, "type", "adamw");
  attr_int(opt, "step", step);
  hid_t m = new_group(opt, "m"), second = new_group(opt, "v");
  write_floats(m, "w", 2, dims, small, 1);
  write_floats(second, "w", 2, dims, v, 1);
  H5Gclose(second), H5Gclose(m), H5Gclose(opt), H5Gclose(model), H5Fclose(file);
}

/* Second moments with 2 negative values, the first of them -0.25 at [1, 0]. */
static void negative_moments(void) {
  float v[16];
  memcpy(v, small, sizeof v);
  v[8] = -0.25f, v[13] = -1.0f;
  optimizer_state("negative_moments.h5", v, 0);
}

/* An optimizer step count of -3. */
static void negative_step(void) {
  optimizer_state("negative_step.h5", small, -3);
}

/* Weights-only, as h5py writes them: contiguous, no checksums; plus a scalar and an empty
 * dataset in a group of notes. */
static void h5py_weights(void) {
  hid_t file = new_checkpoint("h5py_weights.h5", "{}");
  hid_t model = new_group(file, "model");
  write_floats(model, "tok_emb.weight", 2, four_by_four, small, 0);
  write_floats(model, "ln_f.bias", 1, four_by_four, small, 0);
  hid_t notes = new_group(file, "notes");
  write_floats(notes, "scale", 0, NULL, small, 0);
  const hsize_t none[1] = {0};
  write_floats(notes, "nothing", 1, none, NULL, 0);
  H5Gclose(notes), H5Gclose(model), H5Fclose(file);
}

/* A filter (id 32001) attograd does not know: reading it would need a plugin. */
static void odd_filter(void) {
  hid_t file = new_checkpoint("odd_filter.h5", "{}");
  hid_t model = new_group(file, "model");
  hid_t space = check(H5Screate_simple(2, four_by_four, NULL), "space");
  hid_t dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  H5Pset_chunk(dcpl, 2, four_by_four);
  if (H5Pset_filter(dcpl, 32001, H5Z_FLAG_OPTIONAL, 0, NULL) < 0) fail("H5Pset_filter");
  hid_t dset = check(
      H5Dcreate2(model, "tok_emb.weight", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
      "filtered dataset");
  if (H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, small) < 0)
    fail("filtered write");
  H5Dclose(dset), H5Pclose(dcpl), H5Sclose(space), H5Gclose(model), H5Fclose(file);
}

/* A group that holds a hard link back to the root: walking it naively never ends. */
static void cycle(void) {
  hid_t file = new_checkpoint("cycle.h5", "{}");
  hid_t model = new_group(file, "model");
  write_floats(model, "tok_emb.weight", 2, four_by_four, small, 1);
  hid_t notes = new_group(file, "notes");
  if (H5Lcreate_hard(file, "/", notes, "loop", H5P_DEFAULT, H5P_DEFAULT) < 0)
    fail("H5Lcreate_hard");
  H5Gclose(notes), H5Gclose(model), H5Fclose(file);
}

/* A frozen weight held as blocks, as attograd writes one: uint8 [rows, columns] (checksummed)
 * with attributes `format` and `shape` [2] (the weight's rows and width), every byte zero. */
static void packed(const char* file_name, const char* config, const char* name, const char* format,
                   long long rows, long long width, hsize_t columns) {
  hid_t file = new_checkpoint(file_name, config);
  hid_t model = new_group(file, "model");
  const hsize_t dims[2] = {(hsize_t)rows, columns};
  hid_t space = check(H5Screate_simple(2, dims, NULL), "space");
  hid_t dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  H5Pset_chunk(dcpl, 2, dims);
  H5Pset_fletcher32(dcpl);
  hid_t dset =
      check(H5Dcreate2(model, name, H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), name);
  unsigned char* zeros = calloc(dims[0] * dims[1], 1);
  if (!zeros || H5Dwrite(dset, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros) < 0)
    fail(name);
  free(zeros);
  attr_string(dset, "format", format);
  const hsize_t two = 2;
  const long long shape[2] = {rows, width};
  hid_t shape_space = check(H5Screate_simple(1, &two, NULL), "space");
  hid_t attr = check(
      H5Acreate2(dset, "shape", H5T_STD_I64LE, shape_space, H5P_DEFAULT, H5P_DEFAULT), "shape");
  if (H5Awrite(attr, H5T_NATIVE_LLONG, shape) < 0) fail("shape");
  H5Aclose(attr), H5Sclose(shape_space);
  H5Dclose(dset), H5Pclose(dcpl), H5Sclose(space), H5Gclose(model), H5Fclose(file);
}

/* A tiny model's config whose run trains every weight (no lora_rank, no freeze). */
static const char* const trains_all =
    "{\"vocab_size\": 4, \"context_length\": 8, \"d_model\": 32, \"n_heads\": 2, "
    "\"n_layers\": 1}";

/* Q8_0 rows of 32 weights take 34 bytes: 33 are one short of the block. */
static void packed_wrong_bytes(void) {
  packed("packed_wrong_bytes.h5", "{}", "w", "q8_0", 2, 32, 33);
}
/* A format attograd does not hold a weight in (Q3_K). */
static void packed_unknown_format(void) {
  packed("packed_unknown_format.h5", "{}", "w", "q3_k", 2, 256, 110);
}
/* Rows of 48 weights: a block and a half of Q8_0's 32. */
static void packed_partial_block(void) {
  packed("packed_partial_block.h5", "{}", "w", "q8_0", 2, 48, 51);
}
/* Q4_K's bytes (144 a block of 256) under Q6_K's name (210 a block): a GGUF import's
   format and bytes that do not go together. */
static void packed_format_mismatch(void) {
  packed("packed_format_mismatch.h5", "{}", "w", "q6_k", 2, 256, 144);
}
/* Well-formed blocks for a weight the file's own config trains. */
static void packed_trained(void) {
  packed("packed_trained.h5", trains_all, "tok_emb.weight", "q8_0", 4, 32, 34);
}

static const struct {
  const char* name;
  void (*write)(void);
} files[] = {
    {"secret.h5", secret_h5},
    {"external_storage.h5", external_storage},
    {"external_link.h5", external_link},
    {"external_link_fifo.h5", external_link_fifo},
    {"soft_link.h5", soft_link},
    {"user_link.h5", user_link},
    {"virtual.h5", virtual_dataset},
    {"deep_json.h5", deep_json},
    {"lying_shapes.h5", lying_shapes},
    {"huge_unallocated.h5", huge_unallocated},
    {"huge_contiguous.h5", huge_contiguous},
    {"deflate_bomb.h5", deflate_bomb},
    {"nan_weights.h5", nan_weights},
    {"h5py_weights.h5", h5py_weights},
    {"negative_moments.h5", negative_moments},
    {"negative_step.h5", negative_step},
    {"odd_filter.h5", odd_filter},
    {"cycle.h5", cycle},
    {"packed_wrong_bytes.h5", packed_wrong_bytes},
    {"packed_unknown_format.h5", packed_unknown_format},
    {"packed_partial_block.h5", packed_partial_block},
    {"packed_format_mismatch.h5", packed_format_mismatch},
    {"packed_trained.h5", packed_trained},
};

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(
        stderr,
        "usage: make_hostile_h5 OUT_DIR SECRET_FILE [FILE...]  (all files when none is named)\n");
    return 2;
  }
  out_dir = argv[1];
  secret_file = argv[2];
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  const size_t n = sizeof files / sizeof files[0];
  for (size_t i = 0; i < n; ++i) {
    int wanted = argc == 3;
    for (int a = 3; a < argc; ++a) wanted |= strcmp(argv[a], files[i].name) == 0;
    if (wanted) files[i].write();
  }
  return 0;
}
