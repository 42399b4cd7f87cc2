#include "exporter/app/info.h"

#include <nlohmann/json.hpp>

#include "podnet/version.h"

namespace podnet::app {

std::string InfoJson(std::string_view name, std::string_view node, std::string_view zone) {
  nlohmann::json j{{"name", name},
                   {"node", node},
                   {"zone", zone},
                   {"version", kVersion},
                   {"revision", kRevision}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace podnet::app
