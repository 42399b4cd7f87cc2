#pragma once

#include <string>
#include <string_view>

namespace podnet::app {

/// The body of GET /podnet/info: one JSON object {"name", "node", "zone", "version",
/// "revision"} and a newline. A byte sequence that is not UTF-8 in a name (names come from the
/// environment, the configuration and the Kubernetes API) becomes U+FFFD, as RFC 8259 §8.1
/// requires JSON text to be UTF-8; control characters are escaped (\u0001). Never throws for
/// any input (nlohmann::json::dump with error_handler_t::replace, not type_error.316).
std::string InfoJson(std::string_view name, std::string_view node, std::string_view zone);

}  // namespace podnet::app
