// ApiError: one failed API request as the OpenAI schema reports it,
// {"error": {"message", "type", "param", "code"}}, plus its HTTP status.
// Plain record; constructors for the statuses the server uses.
#pragma once

#include <string>

namespace tern {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null

  // 400: the request is malformed or asks for something impossible.
  static ApiError Invalid(std::string message, std::string param = "") {
    return {400, std::move(message), "invalid_request_error", std::move(param), ""};
  }
  static ApiError Unauthorized(std::string message) {
    return {401, std::move(message), "authentication_error", "", "invalid_api_key"};
  }
  static ApiError NotFound(std::string message, std::string code = "not_found") {
    return {404, std::move(message), "invalid_request_error", "", std::move(code)};
  }
  static ApiError MethodNotAllowed(std::string message) {
    return {405, std::move(message), "invalid_request_error", "", "method_not_allowed"};
  }
  static ApiError TooManyRequests(std::string message) {
    return {429, std::move(message), "rate_limit_error", "", "too_many_requests"};
  }
  static ApiError Unavailable(std::string message) {
    return {503, std::move(message), "service_unavailable", "", "service_unavailable"};
  }
  static ApiError Internal(std::string message) {
    return {500, std::move(message), "internal_error", "", "internal_error"};
  }
  // A failure of the HTTP layer, before any route (bad head, 408, too many
  // connections): the type follows the status; no param, no code.
  static ApiError Http(int status, std::string message) {
    const char* type = status == 503   ? "service_unavailable"
                       : status >= 500 ? "internal_error"
                                       : "invalid_request_error";
    return {status, std::move(message), type, "", ""};
  }
};

}  // namespace tern
