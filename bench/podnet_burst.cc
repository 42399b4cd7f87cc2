// podnet-burst: the exporter's burst engine from the command line, for the benchmark and the
// lab tests (the exporter itself runs the same code on its probe loop and responder thread).
//
//   podnet-burst client ADDRESS [--port N] [--time SECONDS] [--parallel N]
//                               [--max-bytes N]        one burst, a JSON line on stdout
//   podnet-burst server [--listen HOST:PORT] [--max-duration S] [--max-clients N]
//                       [--max-streams N]              serve until SIGINT/SIGTERM
// Exit: 0 ok, 1 the burst failed, 2 bad usage.
#include <prometheus/registry.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "exporter/net/address.h"
#include "exporter/net/tcp_info.h"
#include "exporter/probes/burst/burst_client.h"
#include "exporter/responders/burst_server.h"

namespace {

int Usage() {
  std::cerr << "usage: podnet-burst client ADDRESS [--port N] [--time S] [--parallel N] "
               "[--max-bytes N]\n"
               "       podnet-burst server [--listen HOST:PORT] [--max-duration S] "
               "[--max-clients N] [--max-streams N]\n";
  return 2;
}

int Client(int argc, char** argv) {
  if (argc < 3) return Usage();
  auto ip = podnet::net::ParseIp(argv[2]);
  if (!ip) return Usage();
  podnet::probes::burst::BurstRequest req;
  int port = 5201;
  double secs = 2;
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--port")
      port = std::atoi(argv[i + 1]);
    else if (k == "--time")
      secs = std::atof(argv[i + 1]);
    else if (k == "--parallel")
      req.streams = std::atoi(argv[i + 1]);
    else if (k == "--max-bytes")
      req.max_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else
      return Usage();
  }
  if (port <= 0 || port > 65535 || secs <= 0 || secs > 60 || req.streams < 1) return Usage();
  req.server = {*ip, static_cast<unsigned short>(port)};
  req.duration =
      std::chrono::duration_cast<podnet::config::Duration>(std::chrono::duration<double>(secs));
  boost::asio::io_context io;
  podnet::probes::burst::BurstResult result;
  auto cpu0 = podnet::net::ReadThreadCpu();
  auto c = podnet::probes::burst::BurstClient::Start(
      io, req, [&](const podnet::probes::burst::BurstResult& r) { result = r; });
  io.run();
  auto cpu1 = podnet::net::ReadThreadCpu();
  nlohmann::json intervals = nlohmann::json::array();
  for (const auto& iv : result.intervals) {
    intervals.push_back({{"start", iv.start_seconds},
                         {"end", iv.end_seconds},
                         {"bytes", iv.bytes},
                         {"retransmits", iv.retransmits},
                         {"rtt", iv.rtt_seconds},
                         {"snd_cwnd", iv.snd_cwnd_bytes}});
  }
  nlohmann::json out{{"error", result.error},
                     {"detail", result.detail},
                     {"seconds", result.seconds},
                     {"budget_cut", result.budget_cut},
                     {"bytes_sent", result.bytes_sent},
                     {"bytes_received", result.bytes_received},
                     {"throughput_bytes_per_second", result.throughput_bytes_per_second},
                     {"retransmits", result.retransmits},
                     {"rtt_seconds", result.rtt_seconds},
                     {"snd_cwnd_bytes", result.snd_cwnd_bytes},
                     {"pmtu", result.pmtu},
                     {"cpu_seconds", result.cpu_seconds},
                     {"process_cpu_seconds", cpu1.total - cpu0.total},
                     {"wire_bytes_sent", result.wire_bytes_sent},
                     {"wire_bytes_received", result.wire_bytes_received},
                     {"intervals", intervals}};
  std::cout << out.dump() << std::endl;
  return result.error.empty() ? 0 : 1;
}

int Server(int argc, char** argv) {
  podnet::config::kinds::burst::BurstResponderOptions o;
  o.any_client = true;  // a stand-alone server, like iperf3 -s: no discovery to admit by
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--listen") {
      std::string err;
      auto hp = podnet::net::ParseHostPort(argv[i + 1], &err);
      if (!hp) {
        std::cerr << err << "\n";
        return 2;
      }
      o.listen_address = *hp;
    } else if (k == "--max-duration") {
      o.max_duration = std::chrono::seconds(std::atoi(argv[i + 1]));
    } else if (k == "--max-clients") {
      o.max_clients = std::atoi(argv[i + 1]);
    } else if (k == "--max-streams") {
      o.max_streams = std::atoi(argv[i + 1]);
    } else {
      return Usage();
    }
  }
  prometheus::Registry registry;
  podnet::responders::BurstResponder server(o, registry);
  std::cerr << "podnet-burst: listening on port " << server.port() << std::endl;
  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code, int) { io.stop(); });
  io.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  std::string mode = argv[1];
  try {
    if (mode == "client") return Client(argc, argv);
    if (mode == "server") return Server(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "podnet-burst: " << e.what() << "\n";
    return 1;
  }
  return Usage();
}
