#include "exporter/app/http_routes.h"

#include <array>
#include <string>
#include <utility>

namespace podnet::app {
namespace {

using enum HttpRouteId;
using enum HttpLoop;

// path, id, loop, open, methods
constexpr std::array<HttpRoute, 7> kRoutes{{
    {"/", kLanding, kResponder, false, kMethodGet},
    {"/echo", kEcho, kResponder, true, kMethodGet | kMethodPost},
    {"/-/healthy", kHealthy, kResponder, true, kMethodGet},
    {"/-/ready", kReady, kResponder, true, kMethodGet},
    {"/-/reload", kReload, kResponder, false, kMethodPost | kMethodPut},
    {"/metrics", kMetrics, kControl, false, kMethodGet},
    {"/podnet/info", kInfo, kControl, false, kMethodGet},
}};

// The Allow field value of `methods` (kMethod* bits).
std::string Allow(unsigned methods) {
  std::string out;
  for (auto [bit, names] : {std::pair{kMethodGet, "GET, HEAD"}, std::pair{kMethodPost, "POST"},
                            std::pair{kMethodPut, "PUT"}}) {
    if ((methods & bit) == 0) continue;
    if (!out.empty()) out += ", ";
    out += names;
  }
  return out;
}

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
  std::string allow = Allow(route.methods);
  responders::HttpResponse r{405, "text/plain; charset=utf-8",
                             "Only " + allow + " requests allowed.\n"};
  r.headers.emplace_back("Allow", std::move(allow));
  return r;
}

}  // namespace podnet::app
