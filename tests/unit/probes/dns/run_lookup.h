#pragma once

// One lookup through the driver, run on `io` to its end (bounded: 1,000 x 50 ms), for the
// tests that put a model's walk on the wire to an in-process DNS server.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "exporter/probes/dns/lookup.h"

namespace podnet::probes::dns {

inline LookupOutcome RunLookup(boost::asio::io_context& io, const ResolvConf& conf, Libc libc,
                               const std::string& name) {
  auto pool = std::make_shared<ChannelPool>(io);
  LookupOutcome out;
  bool done = false;
  auto l = Lookup::Start(io, pool, conf, libc, name, [&](LookupOutcome o) {
    out = std::move(o);
    done = true;
  });
  for (int i = 0; !done && i < 1000; ++i) io.run_one_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(done);
  return out;
}

}  // namespace podnet::probes::dns
