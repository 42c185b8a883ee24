// ggml's block formats (autograd/quant/) as a program, for quant_reference.py to hold against
// its own quantizers and dequantizers:
//
//   attograd_quant_driver quantize FORMAT IN.f32 OUT.blocks    floats -> blocks
//   attograd_quant_driver dequantize FORMAT IN.blocks OUT.f32  blocks -> floats
//
// FORMAT as attograd spells it (q8_0, q4_k, ...); files raw little-endian, a whole number of
// blocks.
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "autograd/quant/block_formats.h"

namespace {

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const void* data, size_t n) {
  std::ofstream(path, std::ios::binary)
      .write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: attograd_quant_driver quantize|dequantize FORMAT IN OUT\n";
    return 2;
  }
  const std::string mode = argv[1];
  const ag::quant::BlockLayout* l = ag::quant::layout_named(argv[2]);
  if (!l) {
    std::cerr << "no block format " << argv[2] << "\n";
    return 2;
  }
  const std::vector<char> in = read_all(argv[3]);
  if (mode == "quantize") {
    const auto n = static_cast<int64_t>(in.size() / 4);
    std::vector<uint8_t> out(static_cast<size_t>(ag::quant::row_bytes(*l, n)));
    ag::quant::quantize_row(*l, reinterpret_cast<const float*>(in.data()), n, out.data());
    write_all(argv[4], out.data(), out.size());
  } else {
    const int64_t n = static_cast<int64_t>(in.size()) / l->bytes * l->elements;
    std::vector<float> out(static_cast<size_t>(n));
    ag::quant::dequantize_row(*l, reinterpret_cast<const uint8_t*>(in.data()), n, out.data());
    write_all(argv[4], out.data(), out.size() * 4);
  }
  return 0;
}
