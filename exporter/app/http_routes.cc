#include "exporter/app/http_routes.h"

#include <array>
#include <string>

namespace podnet::app {
namespace {

using enum HttpRouteId;
using enum HttpLoop;

// path, id, loop, open, methods, Allow
constexpr std::array<HttpRoute, 7> kRoutes{{
    {"/", kLanding, kResponder, false, kMethodGet, "GET, HEAD"},
    {"/echo", kEcho, kResponder, true, kMethodGet | kMethodPost, "GET, HEAD, POST"},
    {"/-/healthy", kHealthy, kResponder, true, kMethodGet, "GET, HEAD"},
    {"/-/ready", kReady, kResponder, true, kMethodGet, "GET, HEAD"},
    {"/-/reload", kReload, kResponder, false, kMethodPost | kMethodPut, "POST, PUT"},
    {"/metrics", kMetrics, kControl, false, kMethodGet, "GET, HEAD"},
    {"/podnet/info", kInfo, kControl, false, kMethodGet, "GET, HEAD"},
}};

}  // namespace

const HttpRoute* FindHttpRoute(std::string_view path) {
  for (const auto& r : kRoutes) {
    if (r.path == path) return &r;
  }
  return nullptr;
}

bool HttpRouteAllows(const HttpRoute& route, std::string_view method) {
  unsigned bit = method == "GET" || method == "HEAD" ? kMethodGet
                 : method == "POST"                  ? kMethodPost
                 : method == "PUT"                   ? kMethodPut
                                                     : 0;
  return (route.methods & bit) != 0;
}

responders::HttpResponse MethodNotAllowed(const HttpRoute& route) {
  responders::HttpResponse r{405, "text/plain; charset=utf-8",
                             "Only " + std::string(route.allow) + " requests allowed.\n"};
  r.headers.emplace_back("Allow", std::string(route.allow));
  return r;
}

}  // namespace podnet::app
