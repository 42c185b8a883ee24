#include "data/identity.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <stdexcept>

namespace data {

std::string text_identity(std::string_view bytes) {
  // a digest needs no configuration: OpenSSL is kept from reading openssl.cnf (or whatever
  // OPENSSL_CONF names), which could load engines or providers into this process
  static const bool initialised = OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr) == 1;
  if (!initialised) throw std::runtime_error("OpenSSL could not be initialised");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 of the data failed (OpenSSL)");
  std::string out = "sha256:";
  for (unsigned int i = 0; i < length; ++i) out += fmt::format("{:02x}", digest[i]);
  return out;
}

}  // namespace data
