#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "exporter/discovery/kubernetes/api_config.h"

namespace podnet::discovery::kubernetes {

/// Why an API request failed: the `reason` label of podnet_kubernetes_api_errors_total
/// (ApiErrorName), together with the HTTP status classes of StatusReason.
enum class ApiError {
  kNone,
  kCredentials,     // the token file could not be read, or the TLS client setup failed
  kResolve,         // the server's name did not resolve
  kConnect,         // TCP connect failed
  kTls,             // TLS handshake failed (certificate not trusted, wrong name, ...)
  kTimeout,         // the request's deadline passed
  kConnectionLost,  // the server closed or reset the connection before the response ended
  kTooLarge,        // a header, body or watch event beyond the client's limits
  kBadResponse,     // not HTTP/1.1 as Beast parses it
};
std::string_view ApiErrorName(ApiError e);

/// The `reason` for a completed response with a non-2xx HTTP status: "unauthorized" (401),
/// "forbidden" (403), "not_found" (404), "gone" (410), "throttled" (429), "server_error" (5xx),
/// "http_status" (any other).
std::string_view StatusReason(int status);

/// The outcome of one request. `error == kNone` means a whole HTTP response was read; its status
/// may still be anything (callers check it).
struct ApiResponse {
  ApiError error = ApiError::kNone;
  std::string detail;  // what failed, for the debug log
  int status = 0;      // HTTP status; 0 when no response header was read
  std::string body;    // a GET's body; the body of a non-2xx watch response
  /// Retry-After of a 429 or 503 (delay-seconds form only; RFC 9110 §10.2.3), 0 when absent.
  std::chrono::seconds retry_after{0};
};

/// "" for a 2xx response, else the `reason` label: ApiErrorName(r.error) when no whole response
/// was read, StatusReason(r.status) for a non-2xx one.
std::string FailureReason(const ApiResponse& r);

/// What went wrong, for the log: the client's detail, and the API's own words when the body is a
/// metav1.Status (e.g. 'endpointslices.discovery.k8s.io is forbidden: User
/// "system:serviceaccount:podnet:podnet-exporter" cannot list resource ...').
std::string Describe(const ApiResponse& r);

/// One failure for the log and /-/ready: the reason label, the HTTP status when the server
/// answered with a failure, and `detail` ("forbidden (HTTP 403): endpointslices ... is
/// forbidden: ..."; "connect: Connection refused" when no HTTP answer came).
std::string Failure(const std::string& reason, const ApiResponse& r, const std::string& detail);

struct ClientOptions {
  /// Deadline of a whole GET: resolve, connect, TLS, request, response.
  std::chrono::milliseconds request_timeout{10000};
  /// A token file is re-read when its copy is this old, and after any 401 (projected
  /// service-account tokens rotate about hourly; the kubelet rewrites the file well before the
  /// old token expires, so a minute is early enough).
  std::chrono::milliseconds token_refresh{60000};
  std::size_t max_header_bytes = 64 * 1024;
  std::size_t max_body_bytes = 32 * 1024 * 1024;  // a GET's body (an EndpointSliceList)
  std::size_t max_event_bytes = 4 * 1024 * 1024;  // one watch event (one JSON line)
};

/// A minimal HTTPS client for the Kubernetes API: GET and watch (a streamed GET), one TLS
/// connection per request (a list is rare and a watch lives for minutes, so pooling would buy
/// nothing), on the caller's io_context. The server certificate is checked against the
/// configured CA and the host name (or IP) unless the kubeconfig says insecure-skip-tls-verify;
/// the bearer token, when any, is sent in every request. No exception leaves it; every request
/// has a deadline and ends in exactly one `done` call unless it was cancelled.
/// Not thread-safe: use it from its io_context's thread.
class ApiClient {
 public:
  /// Builds the TLS context (CA, client certificate). std::nullopt and *error when a PEM is bad.
  static std::unique_ptr<ApiClient> Create(boost::asio::io_context& io, ApiConfig config,
                                           ClientOptions options, std::string* error);
  ~ApiClient();

  /// A request in flight. Cancel() ends it without calling its callbacks.
  class Call {
   public:
    virtual ~Call() = default;
    virtual void Cancel() = 0;
  };

  /// GET `target` (path and query, e.g. "/api/v1/nodes/node-a"); `done` gets the whole body
  /// (up to max_body_bytes, else kTooLarge).
  std::shared_ptr<Call> Get(std::string target, std::function<void(ApiResponse)> done);

  /// A watch: GET `target` and hand every newline-terminated line of a 2xx body to `on_line`
  /// as it arrives (the API server streams one JSON watch event per line, in HTTP/1.1 chunks;
  /// https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes).
  /// `on_line` returns false to end the watch early (done then gets kNone and the status).
  /// `timeout` bounds the whole watch: set it above the `timeoutSeconds` asked of the server.
  /// A non-2xx response is read whole (bounded) and given to `done` like a GET's.
  std::shared_ptr<Call> Watch(std::string target, std::chrono::milliseconds timeout,
                              std::function<bool(std::string_view line)> on_line,
                              std::function<void(ApiResponse)> done);

  const ApiConfig& config() const { return config_; }

  class Impl;

 private:
  ApiClient(ApiConfig config, std::shared_ptr<Impl> impl);
  ApiConfig config_;
  std::shared_ptr<Impl> impl_;
};

}  // namespace podnet::discovery::kubernetes
