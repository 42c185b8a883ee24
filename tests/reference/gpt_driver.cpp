// Runs one forward and backward pass of nn::GPT and writes everything a PyTorch
// re-implementation of docs/model.md needs to reproduce it, so that
// gpt_reference.py can hold the two against each other.
//
//   attograd_gpt_driver OUT_DIR [key=value ...]
//
// keys (defaults in brackets): vocab_size [11] context_length [8] d_model [16] n_heads [2]
// n_layers [2] d_ff [0 = 4*d_model] qkv_bias [0] tie_weights [1] batch [3] T [context_length]
// seed [1234] perturb [0].
//
// perturb > 0 adds N(0, perturb) noise to every parameter after initialisation. The
// GPT-2 init (weights ~0.02) keeps every activation tiny: attention is then nearly
// uniform and GELU nearly linear, where a wrong softmax scale or the erf GELU would pass
// unnoticed. The noise moves the model into the regime where such differences show.
//
// OUT_DIR/gpt.h5:
//   /model/<name>    float32, every parameter by its named_parameters() name
//   /grad/<name>     float32, d loss / d parameter
//   /ids, /targets   int64 [B, T]
//   /logits          float32 [B, T, V];  /loss  float32 scalar
//   /grad64/<name>, /logits64, /loss64: the same run with the model converted to float64
//   root attributes: the config, batch, T and seed (int64), perturb (float64)
//
// Dropout is 0, so the run is deterministic and the reference needs no generator state.
#include <hdf5.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/gpt.h"

namespace {

// Each HDF5 call's failure is fatal for the driver; the library prints its own error
// stack, this names the call that failed.
hid_t check(hid_t id, const char* what) {
  if (id < 0) throw std::runtime_error(std::string("HDF5: ") + what + " failed");
  return id;
}

void check_status(herr_t status, const char* what) {
  if (status < 0) throw std::runtime_error(std::string("HDF5: ") + what + " failed");
}

std::vector<hsize_t> dims_of(const ag::Tensor& t) {
  return {t.shape().begin(), t.shape().end()};
}

// Writes t under `name` in `loc`, stored as `dtype` (float32/float64/int64).
void write_tensor(hid_t loc, const std::string& name, const ag::Tensor& t, ag::DType dtype) {
  std::vector<hsize_t> dims = dims_of(t);
  // A 0-dim tensor (the loss) becomes a scalar dataspace, which h5py reads as a scalar.
  hid_t space = dims.empty()
                    ? check(H5Screate(H5S_SCALAR), "H5Screate")
                    : check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                            "H5Screate_simple");
  std::vector<double> values = t.to_vector();
  hid_t file_type = 0, mem_type = 0;
  const void* buf = nullptr;
  std::vector<float> f32;
  std::vector<int64_t> i64;
  switch (dtype) {
    case ag::DType::Float32:
      // float32 -> double -> float is exact, so the stored values are the tensor's.
      f32.assign(values.begin(), values.end());
      file_type = mem_type = H5T_NATIVE_FLOAT;
      buf = f32.data();
      break;
    case ag::DType::Float64:
      file_type = mem_type = H5T_NATIVE_DOUBLE;
      buf = values.data();
      break;
    case ag::DType::Int64:
      i64.assign(values.begin(), values.end());
      file_type = mem_type = H5T_NATIVE_INT64;
      buf = i64.data();
      break;
    default: throw std::invalid_argument("write_tensor: unsupported dtype");
  }
  hid_t dset =
      check(H5Dcreate2(loc, name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            ("H5Dcreate2 " + name).c_str());
  check_status(H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf),
               ("H5Dwrite " + name).c_str());
  H5Dclose(dset);
  H5Sclose(space);
}

void write_attr(hid_t loc, const std::string& name, hid_t type, const void* value) {
  hid_t space = check(H5Screate(H5S_SCALAR), "H5Screate");
  hid_t attr = check(H5Acreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT),
                     ("H5Acreate2 " + name).c_str());
  check_status(H5Awrite(attr, type, value), ("H5Awrite " + name).c_str());
  H5Aclose(attr);
  H5Sclose(space);
}

void write_attr(hid_t loc, const std::string& name, int64_t value) {
  write_attr(loc, name, H5T_NATIVE_INT64, &value);
}

void write_attr(hid_t loc, const std::string& name, double value) {
  write_attr(loc, name, H5T_NATIVE_DOUBLE, &value);
}

hid_t make_group(hid_t file, const char* name) {
  return check(H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), name);
}

// Forward with targets, backward on the loss; writes every parameter's gradient into
// `grad_group` in `dtype`. Returns the outputs for the caller to store.
nn::GPT::Output run_once(nn::GPT& model, const ag::Tensor& ids, const ag::Tensor& targets,
                         hid_t grad_group, ag::DType dtype) {
  model.zero_grad();
  nn::GPT::Output out = model.forward(ids, targets);
  out.loss.backward();
  {  // the training forward computes its loss without the logits (ag::linear_cross_entropy)
    ag::NoGradGuard no_grad;
    out.logits = model.forward(ids).logits;
  }
  for (const auto& [name, param] : model.named_parameters()) {
    ag::Tensor g = param.grad();
    // Every parameter takes part in the loss, so a missing gradient is a bug to report,
    // not a zero to write.
    if (!g.defined()) throw std::runtime_error("no gradient for parameter " + name);
    if (g.shape() != param.shape())
      throw std::runtime_error("gradient of " + name + " has the wrong shape");
    write_tensor(grad_group, name, g, dtype);
  }
  return out;
}

struct Options {
  std::map<std::string, int64_t> ints = {{"vocab_size", 11}, {"context_length", 8}, {"d_model", 16},
                                         {"n_heads", 2},     {"n_layers", 2},       {"d_ff", 0},
                                         {"qkv_bias", 0},    {"tie_weights", 1},    {"batch", 3},
                                         {"T", -1},          {"seed", 1234}};
  double perturb = 0;
};

Options parse_args(int argc, char** argv) {
  Options opts;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    std::string key = arg.substr(0, eq == std::string::npos ? 0 : eq);
    std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    size_t used = 0;
    if (key == "perturb") {
      opts.perturb = std::stod(value, &used);
    } else if (opts.ints.contains(key)) {
      opts.ints[key] = std::stoll(value, &used);
    } else {
      throw std::invalid_argument("bad argument '" + arg + "' (expected key=value, see usage)");
    }
    if (used != value.size()) throw std::invalid_argument("bad value in '" + arg + "'");
  }
  if (opts.ints["T"] < 0) opts.ints["T"] = opts.ints["context_length"];
  return opts;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0]
              << " OUT_DIR [vocab_size=N context_length=N d_model=N n_heads=N n_layers=N"
                 " d_ff=N qkv_bias=0|1 tie_weights=0|1 batch=N T=N seed=N perturb=X]\n";
    return 2;
  }
  try {
    Options parsed = parse_args(argc, argv);
    std::map<std::string, int64_t>& opts = parsed.ints;
    nn::GPTConfig cfg;
    cfg.vocab_size = opts["vocab_size"];
    cfg.context_length = opts["context_length"];
    cfg.d_model = opts["d_model"];
    cfg.n_heads = opts["n_heads"];
    cfg.n_layers = opts["n_layers"];
    cfg.d_ff = opts["d_ff"];
    cfg.dropout = 0.0;
    cfg.qkv_bias = opts["qkv_bias"] != 0;
    cfg.tie_weights = opts["tie_weights"] != 0;
    cfg.validate();
    const int64_t B = opts["batch"], T = opts["T"];
    const auto seed = static_cast<uint64_t>(opts["seed"]);

    nn::GPT model(cfg, seed);
    if (parsed.perturb > 0) {
      ag::Generator noise_gen(seed + 0x51ed270b);
      for (const auto& [name, param] : model.named_parameters())
        ag::copy_(param,
                  param.detach() + ag::normal(param.shape(), 0.0, parsed.perturb, noise_gen));
    }

    // One random sequence of T + 1 ids per row, targets shifted by one as in training.
    // A generator separate from the model's keeps the batch independent of its init.
    ag::Generator data_gen(seed ^ 0x9e3779b97f4a7c15ULL);
    std::vector<int64_t> ids_v, targets_v;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<int64_t> seq(static_cast<size_t>(T + 1));
      for (auto& id : seq) id = static_cast<int64_t>(data_gen.next_u64() % cfg.vocab_size);
      ids_v.insert(ids_v.end(), seq.begin(), seq.end() - 1);
      targets_v.insert(targets_v.end(), seq.begin() + 1, seq.end());
    }
    ag::Tensor ids = ag::from_vector(ids_v, {B, T});
    ag::Tensor targets = ag::from_vector(targets_v, {B, T});

    const std::string path = std::string(argv[1]) + "/gpt.h5";
    hid_t file = check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                       ("H5Fcreate " + path).c_str());
    for (const auto& [key, value] : opts) write_attr(file, key, value);
    write_attr(file, "d_ff_effective", cfg.ff_width());
    write_attr(file, "perturb", parsed.perturb);

    // The parameters are written before any pass, as the reference loads them.
    hid_t model_group = make_group(file, "/model");
    for (const auto& [name, param] : model.named_parameters())
      write_tensor(model_group, name, param, ag::DType::Float32);
    H5Gclose(model_group);
    write_tensor(file, "ids", ids, ag::DType::Int64);
    write_tensor(file, "targets", targets, ag::DType::Int64);

    hid_t grad_group = make_group(file, "/grad");
    nn::GPT::Output out32 = run_once(model, ids, targets, grad_group, ag::DType::Float32);
    H5Gclose(grad_group);
    if (out32.logits.dtype() != ag::DType::Float32)
      throw std::runtime_error("float32 model produced non-float32 logits");
    write_tensor(file, "logits", out32.logits, ag::DType::Float32);
    write_tensor(file, "loss", out32.loss, ag::DType::Float32);

    // float32 -> float64 is exact, so the float64 run starts from the very /model values.
    model.to(ag::DType::Float64);
    hid_t grad64_group = make_group(file, "/grad64");
    nn::GPT::Output out64 = run_once(model, ids, targets, grad64_group, ag::DType::Float64);
    H5Gclose(grad64_group);
    if (out64.logits.dtype() != ag::DType::Float64)
      throw std::runtime_error("float64 model produced non-float64 logits");
    write_tensor(file, "logits64", out64.logits, ag::DType::Float64);
    write_tensor(file, "loss64", out64.loss, ag::DType::Float64);

    check_status(H5Fclose(file), "H5Fclose");
    std::cout << "loss " << out32.loss.item() << " (float32), " << out64.loss.item()
              << " (float64); wrote " << path << "\n";
  } catch (const std::exception& e) {
    std::cerr << "attograd_gpt_driver: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
