#pragma once

// How both C libraries' resolvers judge a name before walking the search list: its dots (against
// ndots) and whether it ends in one (absolute). Internal to the resolver models.

#include <algorithm>
#include <string>

namespace podnet::probes::dns {

struct NameShape {
  int dots = 0;
  bool trailing_dot = false;
};

inline NameShape Shape(const std::string& name) {
  NameShape s;
  s.dots = static_cast<int>(std::count(name.begin(), name.end(), '.'));
  s.trailing_dot = !name.empty() && name.back() == '.';
  return s;
}

}  // namespace podnet::probes::dns
