//===- Status.h - runtime-side error values ---------------------*- C++ -*-===//
// defines: Status, Result<T>, SHARC_TRY
//
// The runtime never throws. A fallible function returns Status (ok, or an
// exit code and a message) or Result<T>; callers add context as the failure
// travels up (rank, instruction, op) and the tool maps it to an exit code:
// 2 for bad input (a plan from another version, bad flags), 1 for a failure
// at run time.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace sharc {

class [[nodiscard]] Status {
public:
  /// OutOfMemory is a runtime error (exit 1) that callers may tell apart:
  /// a plan that does not fit the device or host it was given.
  enum class Code {
    Ok = 0,
    RuntimeError = 1,
    InvalidInput = 2,
    OutOfMemory = 3
  };

  Status() = default;
  static Status ok() { return Status(); }
  static Status invalidInput(std::string message) {
    return Status(Code::InvalidInput, std::move(message));
  }
  static Status runtimeError(std::string message) {
    return Status(Code::RuntimeError, std::move(message));
  }
  static Status outOfMemory(std::string message) {
    return Status(Code::OutOfMemory, std::move(message));
  }

  bool isOk() const { return code_ == Code::Ok; }
  explicit operator bool() const { return isOk(); }
  Code code() const { return code_; }
  int exitCode() const {
    return code_ == Code::OutOfMemory ? 1 : static_cast<int>(code_);
  }
  const std::string &message() const { return message_; }

  /// Prefixes the message with where the failure happened.
  Status withContext(const std::string &context) const {
    if (isOk())
      return *this;
    return Status(code_, context + ": " + message_);
  }

private:
  Status(Code code, std::string message)
      : code_(code), message_(std::move(message)) {}
  Code code_ = Code::Ok;
  std::string message_;
};

template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : value_(std::move(value)) {}
  Result(Status status) : status_(std::move(status)) {}

  bool isOk() const { return status_.isOk(); }
  explicit operator bool() const { return isOk(); }
  const Status &status() const { return status_; }
  T &value() { return *value_; }
  const T &value() const { return *value_; }
  T &operator*() { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace sharc

/// Returns early from the enclosing function when a Status is not ok.
#define SHARC_TRY(expr)                                                        \
  do {                                                                         \
    ::sharc::Status sharcTryStatus = (expr);                                   \
    if (!sharcTryStatus.isOk())                                                \
      return sharcTryStatus;                                                   \
  } while (0)
