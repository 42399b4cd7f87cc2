#pragma once

// What the DNS kind's tests share: a resolv.conf of their own (a temporary file; nameserver
// 127.0.0.1, one try of one second: loopback only, whether port 53 answers or refuses), the
// probe loop, the registry and the kind's environment, and one round run to its end.

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "exporter/metrics/metrics.h"
#include "exporter/probes/probe.h"

namespace podnet::testing {

class DnsKindFixture : public ::testing::Test {
 protected:
  explicit DnsKindFixture(const topology::Self& self) : env_{io_, metrics_, self} {
    char path[] = "/tmp/podnet-dns-kind-XXXXXX";
    int fd = mkstemp(path);
    EXPECT_GE(fd, 0);
    if (fd >= 0) close(fd);
    resolv_conf_ = path;
    std::ofstream(resolv_conf_) << "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n";
  }
  ~DnsKindFixture() override { std::remove(resolv_conf_.c_str()); }

  // One round of `probe`, run to its end (within 4 s), then what its end posted (its channels'
  // cancellation), as an interval would.
  void Round(probes::PeerProbe& probe) {
    io_.restart();  // the last round's poll() may have run out of work
    auto busy = boost::asio::make_work_guard(io_);  // c-ares waits on sockets the loop does not see
    bool done = false;
    probe.Run(std::chrono::steady_clock::now(), [&] { done = true; });
    for (int i = 0; !done && i < 400; ++i) io_.run_one_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(done);
    io_.poll();
  }

  boost::asio::io_context io_;
  metrics::Metrics metrics_;
  probes::ProbeEnv env_;
  std::string resolv_conf_;
};

}  // namespace podnet::testing
