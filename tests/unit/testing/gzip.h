#pragma once

// Reading a gzip-encoded /metrics body back (tests of the exposition).

#include <zlib.h>

#include <string>

namespace podnet::testing {

// Inflates one gzip member (RFC 1952), or returns "" on any zlib error.
inline std::string Gunzip(const std::string& in) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return "";
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  for (int round = 0; round < 100000 && rc == Z_OK; ++round) {
    char buf[65536];
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  }
  inflateEnd(&z);
  return rc == Z_STREAM_END && z.avail_in == 0 ? out : "";
}

}  // namespace podnet::testing
