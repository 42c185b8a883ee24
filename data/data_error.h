#pragma once
// The error of data files: a corpus, a prepared folder, a tokenizer file. Every message
// starts with the file it is about and says what is wrong there (and where: a byte offset,
// a token position, a JSON key), so a caller prints what() as is.
#include <stdexcept>

namespace data {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace data
