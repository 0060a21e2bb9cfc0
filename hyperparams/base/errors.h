#pragma once

#include <stdexcept>
#include <string>

namespace gcrun {

// Bad input from the user: a config key or value, a file, a CLI argument, an environment variable.
// main() prints what() as a single line and exits 2; the message names what is at fault and what
// would be accepted. Everything else that escapes to main() is a runtime failure and exits 1.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace gcrun
