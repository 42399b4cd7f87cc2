// The references in docs/ against the code they describe, so that neither drifts:
//  - docs/configuration.md: the keys its tables list are exactly the keys the parser accepts (the
//    parser's own lists, as config::Parse reports them for a file that reaches every section: the
//    doc's example), the example loads, and every default the doc gives as a value changes
//    nothing when written out;
//  - docs/metrics.md: every family the code declares is listed, with its type (the probe kinds'
//    from kind_families.golden, which KindFamiliesTest checks against the kinds; the exporter's
//    own from a real registry), the catalog's switchable families say their kind and default, and
//    every family listed is one of those (or one of the few declared where no unit test builds
//    it). Label names are checked against a real /metrics by tests/lab/lab_obs_test.py.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "exporter/config/config.h"
#include "exporter/config/decoder.h"
#include "exporter/config/metric_families.h"
#include "exporter/discovery/kubernetes/discovery.h"
#include "exporter/discovery/kubernetes/dns_discovery.h"
#include "exporter/metrics/metrics.h"
#include "exporter/responders/prober_tally.h"
#include "exporter/responders/responder_metrics.h"
#include "exporter/scheduler/scheduler.h"
#include "tests/unit/testing/ci.h"
#include "tests/unit/testing/text_exposition.h"

namespace podnet::config {
namespace {

const std::string kConfigurationDoc = PODNET_SOURCE_DIR "/docs/configuration.md";
const std::string kMetricsDoc = PODNET_SOURCE_DIR "/docs/metrics.md";
const std::string kGolden = PODNET_SOURCE_DIR "/tests/unit/probes/kind_families.golden";

// One row of a Markdown table: its cells, and its line in the file.
struct TableRow {
  std::vector<std::string> cells;
  int line = 0;
};

// The cells of a Markdown table row "| a | b |" (no escaped pipes inside cells here).
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t i = 1;
  while (i < line.size()) {
    std::size_t bar = line.find('|', i);
    if (bar == std::string::npos) break;
    std::string cell = line.substr(i, bar - i);
    cell.erase(0, cell.find_first_not_of(' '));
    cell.erase(cell.find_last_not_of(' ') + 1);
    cells.push_back(cell);
    i = bar + 1;
  }
  return cells;
}

// The body rows of every table of `path` whose header row is `header`.
std::vector<TableRow> ReadTables(const std::string& path, const std::vector<std::string>& header) {
  std::vector<TableRow> rows;
  std::ifstream in(path);
  bool in_table = false;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.rfind("|", 0) != 0) {
      in_table = false;
      continue;
    }
    std::vector<std::string> cells = Cells(line);
    if (cells == header) {
      in_table = true;
    } else if (in_table && cells.size() == header.size() && cells[0].rfind("---", 0) != 0) {
      rows.push_back({cells, n});
    }
  }
  return rows;
}

// `cell` without the backticks around it ("`a.b`" -> "a.b"); the first backticked value of a
// cell that starts with one ("`10s` (at least ...)" -> "10s"); std::nullopt for plain text.
std::optional<std::string> Code(const std::string& cell) {
  if (cell.empty() || cell.front() != '`') return std::nullopt;
  return cell.substr(1, cell.find('`', 1) - 1);
}

// The first ```yaml block of `path`.
std::string FirstYamlBlock(const std::string& path) {
  std::ifstream in(path);
  std::string out;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (inside && line.rfind("```", 0) == 0) break;
    if (inside) out += line + "\n";
    if (line == "```yaml") inside = true;
  }
  return out;
}

struct Row {
  std::string key;
  std::optional<std::string> default_value;  // a YAML value, when the doc gives one
  int line = 0;
};

struct Doc {
  std::vector<Row> rows;
  std::string example;
};

Doc ReadConfigurationDoc(const std::string& path) {
  Doc doc;
  for (const TableRow& r : ReadTables(path, {"key", "type", "default", "allowed", "reload"})) {
    doc.rows.push_back({Code(r.cells[0]).value_or(r.cells[0]), Code(r.cells[2]), r.line});
  }
  doc.example = FirstYamlBlock(path);
  return doc;
}

EnvLookup NoEnv() {
  return [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
}

std::string Dump(const std::vector<Error>& errors) {
  std::string out;
  for (const auto& e : errors) out += "  " + e.ToString() + "\n";
  return out;
}

// The parent mapping of `key` in `root` and the last name; list steps ("static[]") take item 0.
std::pair<YAML::Node, std::string> Parent(YAML::Node root, const std::string& key) {
  YAML::Node node = root;
  std::stringstream parts(key);
  std::vector<std::string> names;
  for (std::string part; std::getline(parts, part, '.');) names.push_back(part);
  for (std::size_t i = 0; i + 1 < names.size(); ++i) {
    std::string name = names[i];
    bool item = name.size() > 2 && name.compare(name.size() - 2, 2, "[]") == 0;
    if (item) name.resize(name.size() - 2);
    node.reset(node[name]);
    if (item) node.reset(node[0]);
  }
  return {node, names.back()};
}

std::string Emit(const YAML::Node& root) {
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

// Every field of the two configurations equal (Config itself has no operator==).
bool Same(const Config& a, const Config& b) {
  auto same_hp = [](const net::HostPort& x, const net::HostPort& y) {
    return x.address == y.address && x.port == y.port;
  };
  auto same_peers = [](const std::vector<StaticPeer>& x, const std::vector<StaticPeer>& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i].name != y[i].name || x[i].address != y[i].address || x[i].port != y[i].port ||
          x[i].burst_port != y[i].burst_port || x[i].node != y[i].node || x[i].zone != y[i].zone) {
        return false;
      }
    }
    return true;
  };
  bool grpc_listen =
      a.grpc_listen_address.has_value() == b.grpc_listen_address.has_value() &&
      (!a.grpc_listen_address || same_hp(*a.grpc_listen_address, *b.grpc_listen_address));
  return same_hp(a.listen_address, b.listen_address) && a.self == b.self &&
         same_hp(a.udp_echo_listen_address, b.udp_echo_listen_address) &&
         same_peers(a.static_peers, b.static_peers) && a.kubernetes == b.kubernetes &&
         a.aggregate_peers == b.aggregate_peers && a.per_peer_histograms == b.per_peer_histograms &&
         a.native_histograms == b.native_histograms && a.families_off == b.families_off &&
         a.rtt == b.rtt && a.dns == b.dns && a.burst == b.burst &&
         a.burst_responder == b.burst_responder && a.http == b.http && a.grpc == b.grpc &&
         grpc_listen && a.service == b.service;
}

class ConfigurationDocTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::ifstream(kConfigurationDoc)) PODNET_SKIP_UNLESS_CI("no " << kConfigurationDoc);
#ifndef PODNET_WITH_GRPC
    GTEST_SKIP() << "the doc's example has probes.grpc and responders.grpc";
#endif
    doc_ = ReadConfigurationDoc(kConfigurationDoc);
  }
  Doc doc_;
};

TEST_F(ConfigurationDocTest, ListsExactlyTheKeysTheParserAccepts) {
  ASSERT_GT(doc_.rows.size(), 50u) << kConfigurationDoc << ": no key tables found";
  std::set<std::string> known;
  LoadResult r = Parse(doc_.example, "configuration.md", NoEnv(), &known);
  ASSERT_TRUE(r.ok()) << "the example of " << kConfigurationDoc << " does not load:\n"
                      << Dump(r.errors);
  std::map<std::string, int> listed;
  for (const Row& row : doc_.rows) {
    EXPECT_TRUE(listed.emplace(row.key, row.line).second)
        << kConfigurationDoc << ":" << row.line << ": " << row.key << " listed twice";
  }
  for (const auto& key : known) {
    EXPECT_TRUE(listed.count(key))
        << "the parser accepts " << key << ", " << kConfigurationDoc << " does not list it";
  }
  for (const auto& [key, line] : listed) {
    EXPECT_TRUE(known.count(key)) << kConfigurationDoc << ":" << line << ": " << key
                                  << " is not a key the parser accepts";
  }
}

TEST_F(ConfigurationDocTest, EveryKeyIsInTheExampleAndEveryDefaultChangesNothing) {
  const YAML::Node example = YAML::Load(doc_.example);
  for (const Row& row : doc_.rows) {
    YAML::Node root = YAML::Clone(example);
    auto [parent, name] = Parent(root, row.key);
    ASSERT_TRUE(parent.IsMap() && parent[name].IsDefined())
        << kConfigurationDoc << ":" << row.line << ": " << row.key << " is not in the example";
    if (!row.default_value) continue;
    parent.remove(name);
    LoadResult without = Parse(Emit(root), "without", NoEnv());
    parent[name] = YAML::Load(*row.default_value);
    LoadResult with = Parse(Emit(root), "with", NoEnv());
    ASSERT_TRUE(without.ok() && with.ok()) << row.key << Dump(without.errors) << Dump(with.errors);
    EXPECT_TRUE(Same(*without.config, *with.config))
        << kConfigurationDoc << ":" << row.line << ": " << row.key << ": the default is not "
        << *row.default_value;
  }
}

// A family as docs/metrics.md lists it.
struct DocFamily {
  std::string type;
  std::string present;
  int line = 0;
};

std::map<std::string, DocFamily> ReadMetricsDoc(const std::string& path) {
  std::map<std::string, DocFamily> families;
  for (const TableRow& r :
       ReadTables(path, {"family", "type", "labels", "unit", "present", "series"})) {
    std::string name = Code(r.cells[0]).value_or(r.cells[0]);
    EXPECT_TRUE(families.emplace(name, DocFamily{r.cells[1], r.cells[4], r.line}).second)
        << path << ":" << r.line << ": " << name << " listed twice";
  }
  return families;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The families a registry holds once the exporter's own objects made their series: a fresh
// Metrics (build info, reload, peers, process), the scheduler's, Kubernetes discovery's and the
// responders' (the coverage tally's too).
std::map<std::string, std::string> OwnFamilies() {
  metrics::Metrics metrics;
  metrics.probe_errors().Add({{"probe", "rtt"}, {"reason", "socket"}});
  discovery::kubernetes::DiscoveryMetrics discovery(metrics.registry());
  discovery.Error("endpointslices", "timeout");
  discovery.Event("endpointslices", "ADDED");
  discovery.lists("endpointslices");
  discovery::kubernetes::DnsDiscoveryMetrics dns_discovery(metrics.registry());
  dns_discovery.Query("ok");
  dns_discovery.Ask("answered");
  responders::ResponderRequests(metrics.registry()).Add({{"responder", "udp_echo"}});
  responders::ResponderDropped(metrics.registry()).Add({{"responder", "udp_echo"}});
  responders::ProberTally probers(metrics.registry());
  probers.SetSelf("n", "z");
  probers.SetProbers({{boost::asio::ip::make_address("10.0.0.1"), "z", "same_zone"}});
  probers.Publish(responders::ProberTally::Clock::now());
  scheduler::SchedulerMetrics scheduler(metrics.registry());
  scheduler.skipped("rtt");
  scheduler.start_delay("rtt");
  return testing::TypeLines(metrics.Serialize());
}

class MetricsDocTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::ifstream(kMetricsDoc)) PODNET_SKIP_UNLESS_CI("no " << kMetricsDoc);
    doc_ = ReadMetricsDoc(kMetricsDoc);
    ASSERT_GT(doc_.size(), 40u) << kMetricsDoc << ": no family tables found";
  }
  std::map<std::string, DocFamily> doc_;
};

TEST_F(MetricsDocTest, ListsEveryFamilyTheCodeDeclaresWithItsType) {
  std::map<std::string, std::string> code = testing::TypeLines(ReadAll(kGolden));
  ASSERT_GT(code.size(), 30u) << kGolden;
  for (const auto& [name, type] : OwnFamilies()) code[name] = type;
  for (const auto& [name, type] : code) {
    auto it = doc_.find(name);
    if (it == doc_.end()) {
      ADD_FAILURE() << "the exporter declares " << name << " (" << type << "), " << kMetricsDoc
                    << " does not list it";
    } else {
      EXPECT_EQ(it->second.type, type) << kMetricsDoc << ":" << it->second.line << ": " << name;
    }
  }
  for (const auto& f : MetricFamilies()) code.emplace(std::string(f.name), "");
  // Declared by objects this test does not build (the scheduler, the Service poller, the web
  // server's auth gate, the burst responder): the lab test sees those its run makes.
  for (const char* name :
       {"podnet_probe_rounds_skipped_total", "podnet_probe_round_start_delay_seconds",
        "podnet_service_info", "podnet_web_auth_failures_total",
        "podnet_responder_burst_received_bytes_total",
        "podnet_kubernetes_strings_sanitized_total"}) {
    code.emplace(name, "");
  }
  for (const auto& [name, f] : doc_) {
    EXPECT_TRUE(code.count(name)) << kMetricsDoc << ":" << f.line << ": " << name
                                  << " is not a family the exporter declares";
  }
}

TEST_F(MetricsDocTest, SwitchableFamiliesSayTheirProbeKindAndDefault) {
  for (const auto& f : MetricFamilies()) {
    auto it = doc_.find(std::string(f.name));
    if (it == doc_.end()) {
      ADD_FAILURE() << f.name << " (metrics.families accepts it) is not in " << kMetricsDoc;
      continue;
    }
    const std::string& present = it->second.present;
    EXPECT_NE(present.find("`probes." + std::string(f.kind) + "`"), std::string::npos)
        << kMetricsDoc << ":" << it->second.line << ": " << f.name << " is present with probes."
        << f.kind << ", the present column does not say so: " << present;
    EXPECT_EQ(present.find("off by default") == std::string::npos, f.on_by_default)
        << kMetricsDoc << ":" << it->second.line << ": " << f.name << " is "
        << (f.on_by_default ? "on" : "off") << " by default: " << present;
  }
}

}  // namespace
}  // namespace podnet::config
