// Every probe kind's metric families against a checked-in golden file: their names, help texts
// and types, and the label names and bucket bounds of the series a probe adds when it is made.
// These are the exporter's public interface (docs/design.md, "Metrics"), so a change to any of
// them must show as a diff of kind_families.golden, not slip through a refactoring.
//
// To regenerate after an intended change: PODNET_GOLDEN_OUT=FILE podnet_unit_tests
// --gtest_filter='KindFamiliesTest.*' writes this build's text to FILE; wrap it as the golden
// file is wrapped (a raw string literal, so that it is compiled in and found from any directory).
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/metrics/metrics.h"
#include "exporter/probes/registry.h"
#include "tests/unit/testing/peers.h"

namespace podnet::probes {
namespace {

constexpr std::string_view kGolden =
#include "tests/unit/probes/kind_families.golden"
    ;

// A configuration that turns every kind on, its targets and peers on loopback ports where
// nothing answers (no round runs here; gRPC's channel may try to connect and be refused).
config::Config EveryKind() {
  config::Config c;
  c.rtt.emplace();
  c.rtt->protocol = rtt::RttProtocol::kUdp;
  c.dns.emplace();
  c.dns->names = {"kubernetes.default"};
  c.burst.emplace();
  c.http.emplace();
  c.grpc.emplace();
  c.grpc->port = 9;
  c.service.emplace();
  for (auto protocol : {service::ServiceProtocol::kUdp, service::ServiceProtocol::kHttp}) {
    service::ServiceTarget t;
    t.name = std::string("svc-") + service::ServiceProtocolName(protocol);
    t.address = "127.0.0.1";
    t.port = 9;
    t.protocol = protocol;
    c.service->targets.push_back(t);
  }
  return c;
}

// The names of the families in `text` (the text exposition format).
std::set<std::string> FamilyNames(const std::string& text) {
  std::set<std::string> names;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) names.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  return names;
}

// The label names of a sample line (`name{a="x",b="y"} value`) and its le value, if any.
std::set<std::string> LabelNames(const std::string& line, std::string* le) {
  std::set<std::string> names;
  std::size_t i = line.find('{');
  if (i == std::string::npos || i > line.find(' ')) return names;
  while (++i < line.size() && line[i] != '}') {
    std::size_t eq = line.find('=', i);
    std::string name = line.substr(i, eq - i);
    std::string value;
    for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\') ++i;
      value += line[i];
    }
    ++i;  // past the closing quote; now at ',' or '}'
    if (name == "le") {
      *le = value;
    } else {
      names.insert(name);
    }
    if (i >= line.size() || line[i] == '}') break;
  }
  return names;
}

// prometheus-cpp leaves a family without series out of the exposition, and most series are added
// only when a round records something. So each family of type `type` that `golden` names and
// `text` lacks gets one series marked unseen="1" (Shapes leaves it out): declaring a name again
// returns the family its kind declared, help text and all, while a name no kind declares any
// more comes back new, with an empty help text, and one declared with another type throws.
void ExposeUnseen(prometheus::Registry& r, std::string_view golden, const std::string& text) {
  const std::set<std::string> seen = FamilyNames(text);
  const prometheus::Labels unseen{{"unseen", "1"}};
  std::istringstream in{std::string(golden)};
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::string name = line.substr(7, line.find(' ', 7) - 7);
    std::string type = line.substr(line.rfind(' ') + 1);
    if (seen.count(name)) continue;
    if (type == "counter") {
      prometheus::BuildCounter().Name(name).Register(r).Add(unseen);
    } else if (type == "gauge") {
      prometheus::BuildGauge().Name(name).Register(r).Add(unseen);
    } else if (type == "histogram") {
      prometheus::BuildHistogram().Name(name).Register(r).Add(
          unseen, prometheus::Histogram::BucketBoundaries{});
    }
  }
}

// `text` reduced to what must not change by accident, families sorted by name (those named in
// `skip` left out): each family's HELP and TYPE lines as written, then one line per sample name
// and label-name set, with the le bounds in order for a _bucket series. Label values and
// sample values are left out: they depend on the peer and on time.
std::string Shapes(const std::string& text, const std::set<std::string>& skip) {
  struct Family {
    std::vector<std::string> head;               // HELP, TYPE
    std::map<std::string, std::string> samples;  // shape -> its le bounds
  };
  std::map<std::string, Family> families;
  Family* current = nullptr;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# ", 0) == 0) {
      std::size_t start = line.find(' ', 2) + 1;
      std::string name = line.substr(start, line.find(' ', start) - start);
      current = skip.count(name) ? nullptr : &families[name];
      if (current) current->head.push_back(line);
      continue;
    }
    if (!current || line.empty()) continue;
    std::string le;
    std::set<std::string> labels = LabelNames(line, &le);
    if (labels.count("unseen")) continue;
    std::string shape = line.substr(0, line.find_first_of("{ "));
    shape += '{';
    for (const auto& l : labels) shape += (shape.back() == '{' ? "" : ",") + l;
    shape += '}';
    std::string& bounds = current->samples[shape];
    if (!le.empty()) bounds += (bounds.empty() ? " le=" : ",") + le;
  }
  std::string out;
  for (const auto& [name, f] : families) {
    for (const auto& h : f.head) out += h + "\n";
    for (const auto& [shape, bounds] : f.samples) out += "  " + shape + bounds + "\n";
  }
  return out;
}

TEST(KindFamiliesTest, NamesHelpTextsLabelsAndBucketsAsTheGoldenFile) {
  boost::asio::io_context io;
  metrics::Metrics metrics;
  const std::set<std::string> own = FamilyNames(metrics.Serialize());
  ProbeEnv env{io, metrics, {"probe-a", "node-1", "zone-a"}};
  const topology::Peer peer = testing::MakePeer("peer-b", "127.0.0.1", "node-2", "zone-b",
                                                topology::PathClass::kCrossZone, 9, 9);
  const config::Config config = EveryKind();

  std::vector<std::shared_ptr<ProbeKind>> kinds;
  std::vector<std::shared_ptr<PeerProbe>> probes;
  for (const ProbeKindEntry& entry : ProbeKinds()) {
    auto kind = entry.make(config, env);
    ASSERT_NE(kind, nullptr) << entry.name << ": EveryKind() leaves it off";
    EXPECT_EQ(kind->name(), entry.name);
    if (auto p = kind->ForPeer(peer)) probes.push_back(p);
    for (const auto& key : kind->Targets()) probes.push_back(kind->ForTarget(key));
    kinds.push_back(std::move(kind));
  }

  ExposeUnseen(metrics.registry(), kGolden, metrics.Serialize());
  const std::string got = Shapes(metrics.Serialize(), own);
  if (const char* out = std::getenv("PODNET_GOLDEN_OUT")) std::ofstream(out) << got;
  std::string_view want = kGolden;
  if (!want.empty() && want.front() == '\n') want.remove_prefix(1);
  EXPECT_EQ(got, want) << "PODNET_GOLDEN_OUT=FILE writes this build's text to FILE";
  for (auto& p : probes) p->RemoveSeries();
}

}  // namespace
}  // namespace podnet::probes
