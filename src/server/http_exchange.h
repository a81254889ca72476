// HttpExchange: how a handler answers one HTTP request: either one response
// with a Content-Length body, or a Server-Sent Events stream (status 200,
// Content-Type text/event-stream, chunked; each event "data: <json>\n\n").
// The socket layer (http_server.cc) implements it; tests record calls.
//
// Thread rules: used only by the connection thread running the handler.
#pragma once

#include <string_view>

namespace tern {

class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  // One complete response. Called at most once, and not after BeginEventStream.
  virtual void Respond(int status, std::string_view content_type, std::string_view body) = 0;

  // Starts an SSE response. False when the client is gone.
  virtual bool BeginEventStream() = 0;
  // Sends "data: <data>\n\n". False when the client is gone (send failed).
  virtual bool SendEvent(std::string_view data) = 0;
  // Ends the stream (the final empty chunk).
  virtual void EndEventStream() = 0;

  // True when the peer has closed or reset the connection (checked without
  // blocking, between tokens).
  virtual bool ClientGone() = 0;
};

}  // namespace tern
