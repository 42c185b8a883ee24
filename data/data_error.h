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

// A data file or folder the operating system would not open, read or write (errno's reason in
// the message): the machine's failure rather than the file's content (the command line's
// exit 1, not 2: docs/exit-codes.md).
class DataSystemError : public DataError {
 public:
  using DataError::DataError;
};

}  // namespace data
