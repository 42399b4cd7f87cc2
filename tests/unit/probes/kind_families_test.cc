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

#include "exporter/config/metric_families.h"
#include "exporter/metrics/metrics.h"
#include "exporter/probes/registry.h"
#include "tests/unit/testing/peers.h"
#include "tests/unit/testing/text_exposition.h"

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
  c.rtt->protocol = config::kinds::rtt::RttProtocol::kUdp;
  c.dns.emplace();
  c.dns->names = {"kubernetes.default"};
  c.burst.emplace();
  c.http.emplace();
  c.grpc.emplace();
  c.grpc->port = 9;
  c.mtu.emplace();
  c.service.emplace();
  using config::kinds::service::ServiceProtocol;
  for (auto protocol : {ServiceProtocol::kUdp, ServiceProtocol::kHttp}) {
    config::kinds::service::ServiceTarget t;
    t.name = std::string("svc-") + config::kinds::service::ServiceProtocolName(protocol);
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
  for (const auto& [name, type] : testing::TypeLines(text)) names.insert(name);
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
  env.histogram_labels = metrics::PeerLabelSet::kAggregated;  // the default (per_peer_histograms)
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

// Every family the kinds declare, made as the app makes them (per peer, and with Kubernetes
// discovery: the coordinated bursts declare their own): name -> served.
std::map<std::string, bool> DeclaredByKinds(const std::set<std::string>& families_off = {}) {
  std::map<std::string, bool> names;
  for (bool coordinated : {false, true}) {
    boost::asio::io_context io;
    metrics::Metrics metrics;
    metrics.SetFamiliesOff({families_off.begin(), families_off.end()});
    ProbeEnv env{io, metrics, {"probe-a", "node-1", "zone-a"}};
    if (coordinated) env.probe_pods.emplace();
    for (const ProbeKindEntry& entry : ProbeKinds()) entry.make(EveryKind(), env);
    names.insert(metrics.declared().begin(), metrics.declared().end());
  }
  return names;
}

TEST(KindFamiliesTest, MetricsFamiliesNamesEveryFamilyTheKindsDeclare) {
  std::set<std::string> catalog, declared;
  for (const auto& f : config::MetricFamilies()) catalog.emplace(f.name);
  for (const auto& [name, served] : DeclaredByKinds()) declared.insert(name);
  EXPECT_EQ(declared, catalog)
      << "exporter/config/metric_families.cc must list every family a kind declares (and no "
         "other): metrics.families validates names against it";
}

TEST(KindFamiliesTest, AFamilyTurnedOffIsNotServed) {
  const std::set<std::string> off = {"podnet_rtt_seconds", "podnet_http_requests_total"};
  std::map<std::string, bool> declared = DeclaredByKinds(off);
  for (const auto& name : off) EXPECT_FALSE(declared.at(name)) << name;
  EXPECT_TRUE(declared.at("podnet_rtt_packets_sent_total"));

  // Its series are still written (the probe does not know), into a registry never served.
  boost::asio::io_context io;
  metrics::Metrics metrics;
  metrics.SetFamiliesOff({"podnet_rtt_seconds"});
  ProbeEnv env{io, metrics, {"probe-a", "node-1", "zone-a"}};
  std::shared_ptr<ProbeKind> rtt;
  for (const ProbeKindEntry& entry : ProbeKinds()) {
    if (entry.name == "rtt") rtt = entry.make(EveryKind(), env);
  }
  ASSERT_NE(rtt, nullptr);
  auto probe = rtt->ForPeer(testing::MakePeer("peer-b", "127.0.0.1", "node-2", "zone-b",
                                              topology::PathClass::kCrossZone, 9, 9));
  std::string text = metrics.Serialize();
  EXPECT_EQ(text.find("podnet_rtt_seconds"), std::string::npos) << text;
  EXPECT_NE(text.find("podnet_rtt_packets_sent_total{"), std::string::npos) << text;
  probe->RemoveSeries();
}

// The distinct label sets (le left out) of the sample lines named `sample` in `text`.
std::set<std::string> SeriesOf(const std::string& text, const std::string& sample) {
  std::set<std::string> sets;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(sample + "{", 0) != 0) continue;
    std::string labels = line.substr(sample.size(), line.find('}') - sample.size() + 1);
    std::size_t le = labels.find("le=\"");
    if (le != std::string::npos) labels.erase(le, labels.find('"', le + 4) - le + 1);
    sets.insert(labels);
  }
  return sets;
}

TEST(KindFamiliesTest, HistogramsPerPeerZoneAndPathClassCountersPerPeer) {
  for (auto histograms : {metrics::PeerLabelSet::kAggregated, metrics::PeerLabelSet::kPerPeer}) {
    boost::asio::io_context io;
    metrics::Metrics metrics;
    ProbeEnv env{io, metrics, {"probe-a", "node-1", "zone-a"}};
    env.histogram_labels = histograms;
    const std::vector<topology::Peer> peers = {
        testing::MakePeer("b1", "127.0.0.1", "node-2", "zone-b", topology::PathClass::kCrossZone, 9,
                          9),
        testing::MakePeer("b2", "127.0.0.2", "node-3", "zone-b", topology::PathClass::kCrossZone, 9,
                          9),
        testing::MakePeer("a1", "127.0.0.3", "node-4", "zone-a", topology::PathClass::kSameZone, 9,
                          9)};
    std::vector<std::shared_ptr<ProbeKind>> kinds;
    std::vector<std::shared_ptr<PeerProbe>> probes;
    for (const ProbeKindEntry& entry : ProbeKinds()) {
      // Not grpc: its channels start gRPC's threads, which TSan cannot follow (sanitize.sh);
      // its histogram is added by the same AddSeries (golden file: its label names).
      if (entry.name != "rtt" && entry.name != "http") continue;
      kinds.push_back(entry.make(EveryKind(), env));
      for (const auto& p : peers) probes.push_back(kinds.back()->ForPeer(p));
    }
    const std::string text = metrics.Serialize();
    const bool aggregated = histograms == metrics::PeerLabelSet::kAggregated;
    for (const char* h : {"podnet_rtt_seconds_bucket", "podnet_http_connect_duration_seconds_count",
                          "podnet_http_connect_duration_seconds_sum"}) {
      auto sets = SeriesOf(text, h);
      EXPECT_EQ(sets.size(), aggregated ? 2u : 3u) << h << "\n" << text;
      for (const auto& l : sets) {
        EXPECT_EQ(l.find("peer=") == std::string::npos, aggregated) << h << l;
        EXPECT_NE(l.find("peer_zone="), std::string::npos) << h << l;
      }
    }
    // Who is reachable, and the loss, stay per peer.
    EXPECT_EQ(SeriesOf(text, "podnet_rtt_packets_sent_total").size(), 3u) << text;
    EXPECT_EQ(SeriesOf(text, "podnet_http_late_requests_total").size(), 6u) << text;  // 2 modes
    for (auto& p : probes) p->RemoveSeries();
    EXPECT_TRUE(SeriesOf(metrics.Serialize(), "podnet_rtt_seconds_bucket").empty());
  }
}

}  // namespace
}  // namespace podnet::probes
