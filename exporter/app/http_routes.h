#pragma once

#include <string_view>

#include "exporter/responders/http_server.h"

namespace podnet::app {

/// The exporter's HTTP paths, all in one table (http_routes.cc): which one it is, the loop that
/// answers it, the methods it takes, and whether it stays open (plain HTTP, no credentials)
/// under a web configuration. Every request arrives on the responder loop, which checks path,
/// TLS, credentials and method against the table for both loops.
enum class HttpRouteId { kLanding, kEcho, kHealthy, kReady, kReload, kMetrics, kInfo };

/// Where a route is answered. kResponder: at once, from constants and atomics (what peers and
/// the kubelet time; /-/ready hands over to the control loop while not ready, to say why).
/// kControl: built on the control loop (it owns metrics, configuration and discovery) and
/// written back by the responder loop.
enum class HttpLoop { kResponder, kControl };

/// Methods, as a bit set. HEAD reaches a handler as GET (responders::HttpRequest::method).
inline constexpr unsigned kMethodGet = 1;  // GET and HEAD
inline constexpr unsigned kMethodPost = 2;
inline constexpr unsigned kMethodPut = 4;

struct HttpRoute {
  std::string_view path;  // exact, without the query
  HttpRouteId id;
  HttpLoop loop;
  /// Plain HTTP and no credentials even with --web.config.file: the peers' latency target (its
  /// RTT must not include a TLS handshake or a password check) and the kubelet's probes.
  bool open;
  unsigned methods;  // kMethod* bits
};

/// The route of `path` (a request target without its query); nullptr when there is none (404).
const HttpRoute* FindHttpRoute(std::string_view path);

/// Whether `route` takes `method` ("GET", "POST", ...; HEAD arrives as GET).
bool HttpRouteAllows(const HttpRoute& route, std::string_view method);

/// 405 for a method `route` does not take, with its Allow field (RFC 9110 §15.5.6, §10.2.1:
/// its methods, "GET, HEAD, POST" order).
responders::HttpResponse MethodNotAllowed(const HttpRoute& route);

}  // namespace podnet::app
