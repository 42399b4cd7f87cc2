#pragma once

// Damaged copies of a good datagram, for the tables of the wire-format tests (what a parser
// or a responder must refuse).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace podnet::testing {

/// `b` cut to its first `n` bytes.
inline std::vector<std::uint8_t> Truncated(std::vector<std::uint8_t> b, std::size_t n) {
  b.resize(n);
  return b;
}

/// `b` with byte `i` set to `v`.
inline std::vector<std::uint8_t> WithByte(std::vector<std::uint8_t> b, std::size_t i,
                                          std::uint8_t v) {
  b[i] = v;
  return b;
}

}  // namespace podnet::testing
