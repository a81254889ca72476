// Status and StatusOr<T>: recoverable errors as values (no exceptions of our
// own). Messages name the file, tensor, key or request at fault.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace tern {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kOutOfRange,
  kDataLoss,      // corrupt or truncated input
  kUnimplemented,
  kInternal,
  kResourceExhausted,
  kUnavailable,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const { return ok() ? "OK" : message_; }

  // Returns a copy whose message is "prefix: message".
  Status WithContext(const std::string& prefix) const {
    if (ok()) return *this;
    return Status(code_, prefix + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) {  // NOLINT: implicit
    if (status_.ok()) status_ = Internal("StatusOr constructed from OK status");
  }
  StatusOr(Status&& status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Internal("StatusOr constructed from OK status");
  }
  StatusOr(const T& value) : value_(value) {}        // NOLINT
  StatusOr(T&& value) : value_(std::move(value)) {}  // NOLINT
  template <typename U>
    requires std::is_convertible_v<U&&, T> && (!std::is_same_v<std::decay_t<U>, T>) &&
             (!std::is_same_v<std::decay_t<U>, Status>)
  StatusOr(U&& value) : value_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & { CheckOk(); return *value_; }
  const T& value() const& { CheckOk(); return *value_; }
  T&& value() && { CheckOk(); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckOk() const {
    if (!value_) {
      std::fprintf(stderr, "FATAL: StatusOr::value() on error: %s\n",
                   status_.message().c_str());
      std::abort();
    }
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace tern

#define TERN_CONCAT_INNER_(a, b) a##b
#define TERN_CONCAT_(a, b) TERN_CONCAT_INNER_(a, b)

#define TERN_RETURN_IF_ERROR(expr)              \
  do {                                          \
    ::tern::Status tern_status_ = (expr);       \
    if (!tern_status_.ok()) return tern_status_; \
  } while (0)

#define TERN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#define TERN_ASSIGN_OR_RETURN(lhs, expr) \
  TERN_ASSIGN_OR_RETURN_IMPL_(TERN_CONCAT_(tern_statusor_, __LINE__), lhs, expr)
