#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hyperparams/base/errors.h"

namespace gcrun::testing {

// The message of the UserError `action` throws; fails the test when it throws nothing.
inline std::string userErrorOf(const std::function<void()>& action) {
  try {
    action();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError";
  return "";
}

// A user-facing message is one line and names every part given.
inline void expectMessageHas(const std::string& message, const std::vector<std::string>& parts) {
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  for (const auto& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

}  // namespace gcrun::testing
