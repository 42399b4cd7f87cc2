#include "exporter/probes/dns/dns_probe.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>

#include "exporter/metrics/buckets.h"
#include "exporter/metrics/families.h"
#include "exporter/net/address.h"
#include "exporter/probes/dns/lookup.h"
#include "exporter/probes/peer_probe.h"
#include "exporter/topology/sample.h"

namespace podnet::probes::dns {

std::string FormName(const std::string& name, bool absolute) {
  if (!absolute || (!name.empty() && name.back() == '.')) return name;
  return name + ".";
}

std::string ServerQuestion(const std::vector<std::string>& search, const std::string& first_name) {
  constexpr std::string_view kSvc = "svc.";
  auto bare = [](std::string_view s) {
    if (!s.empty() && s.back() == '.') s.remove_suffix(1);
    return s;
  };
  auto zone_of = [&](std::string_view s) {  // "svc.Z" → Z, else ""
    s = bare(s);
    return s.size() > kSvc.size() && s.substr(0, kSvc.size()) == kSvc ? s.substr(kSvc.size())
                                                                      : std::string_view();
  };
  // kubelet's three entries, <namespace>.svc.Z svc.Z Z, first: in namespace `svc` the first entry
  // (svc.svc.Z) starts with "svc." too.
  for (std::size_t i = 1; i + 1 < search.size(); ++i) {
    std::string_view zone = zone_of(search[i]);
    std::string_view before = bare(search[i - 1]);
    std::string ns_suffix = ".svc." + std::string(zone);
    if (!zone.empty() && bare(search[i + 1]) == zone && before.size() > ns_suffix.size() &&
        before.substr(before.size() - ns_suffix.size()) == ns_suffix) {
      return "kubernetes.default.svc." + std::string(zone) + ".";
    }
  }
  for (const std::string& s : search) {
    if (std::string_view zone = zone_of(s); !zone.empty()) {
      return "kubernetes.default.svc." + std::string(zone) + ".";
    }
  }
  return FormName(first_name, true);
}

namespace {

// Declared in `r` each time the kind is made (prometheus-cpp merges a re-declaration).
struct DnsFamilies {
  metrics::Metrics& r;
  metrics::HistogramFamily duration = metrics::DeclareHistogram(
      r, "podnet_dns_lookup_duration_seconds",
      "Duration of one resolver-model lookup (all its questions), seconds.",
      metrics::DnsLatencyBuckets());
  metrics::CounterFamily& lookups =
      metrics::DeclareCounter(r, "podnet_dns_lookups_total",
                              "Lookups by outcome (success, nxdomain, nodata, servfail, timeout, "
                              "error).");
  metrics::CounterFamily& queries = metrics::DeclareCounter(
      r, "podnet_dns_queries_total", "DNS questions sent by lookups, by query type.");
  metrics::CounterFamily& responses =
      metrics::DeclareCounter(r, "podnet_dns_responses_total",
                              "Responses to those questions by rcode; TIMEOUT when none came "
                              "before the lookup ended.");
  metrics::GaugeFamily& per_lookup = metrics::DeclareGauge(
      r, "podnet_dns_queries_per_lookup", "Questions the last lookup sent (the amplification).");
  metrics::HistogramFamily server_rtt =
      metrics::DeclareHistogram(r, "podnet_dns_server_rtt_seconds",
                                "Time for one nameserver (of resolv.conf, or one cluster DNS "
                                "replica) to answer one A question for the absolute name, "
                                "seconds.",
                                metrics::DnsLatencyBuckets());
  metrics::GaugeFamily& sampled = metrics::DeclareGauge(
      r, "podnet_dns_lookup_sampled",
      "1 while this Pod is one of its zone's Pods that run the DNS lookups (probes.dns.sample; "
      "always 1 without it), else 0.");
};

// Wire bytes of one DNS message: IP + UDP (or TCP + 2-byte length) headers.
int WireBytes(int dns_bytes, bool v6, bool tcp) {
  if (dns_bytes <= 0) return 0;
  return dns_bytes + (v6 ? 40 : 20) + (tcp ? 20 + 2 : 8);
}

class DnsKind;

// A target as the scheduler names it (by its key). Its byte and error counters carry only
// {probe="dns"}; its own series carry labels of their own.
topology::Peer TargetNamed(std::string key) {
  topology::Peer p;
  p.name = std::move(key);
  return p;
}

// One (name, form, resolver).
class LookupTarget : public PeerProbeBase {
 public:
  LookupTarget(std::shared_ptr<DnsKind> kind, const std::string& key, std::string name,
               bool absolute, Libc libc);

 private:
  void StartRound(std::chrono::steady_clock::time_point) override;
  void StopRound() override {
    if (auto l = lookup_) l->Cancel();
  }
  void Record(const LookupOutcome& o);

  std::shared_ptr<DnsKind> kind_;
  std::string name_;  // as configured
  bool absolute_;
  Libc libc_;
  prometheus::Labels target_labels_;
  std::shared_ptr<ChannelPool> pool_;
  std::shared_ptr<Lookup> lookup_;  // the round in flight
};

// Each nameserver of resolv.conf and, on the Pods of probes.dns.sample's replica draw (every
// Pod without a sample), each discovered cluster DNS replica (ProbeEnv::dns_servers) asked
// directly for ServerQuestion's name.
class ServersTarget : public PeerProbeBase {
 public:
  explicit ServersTarget(std::shared_ptr<DnsKind> kind);

 private:
  // One server of a round: where to ask, and its series' labels (server, server_zone, path_class).
  struct Server {
    ResolvConf::Nameserver ns;
    prometheus::Labels labels;
  };
  // A server's series, once it has answered.
  struct Observed {
    prometheus::Labels labels;
    const void* series;
  };
  void StartRound(std::chrono::steady_clock::time_point) override;
  void StopRound() override;
  void Finish();
  // This round's servers: resolv.conf's, then, with `replicas` (this Pod times them now), the
  // discovered replicas (one that is also in resolv.conf is asked once, under the replica's
  // labels). Removes the series of servers that are gone, left out or whose labels changed, and
  // the channels of servers that are gone.
  std::vector<Server> RoundServers(const ResolvConf& conf, bool replicas);
  std::shared_ptr<DnsKind> kind_;
  std::shared_ptr<ChannelPool> pool_;
  boost::asio::steady_timer timer_;
  int outstanding_ = 0;
  std::map<std::string, Observed> observed_;  // by server ("10.0.0.10:53")
};

class DnsKind : public ProbeKind, public std::enable_shared_from_this<DnsKind> {
 public:
  DnsKind(const DnsOptions& o, ProbeEnv& env) : options_(o), env_(env), families_{env.metrics} {}

  std::string_view name() const override { return "dns"; }
  config::Duration interval() const override { return options_.interval; }
  std::shared_ptr<PeerProbe> ForPeer(const topology::Peer&) override { return nullptr; }

  std::vector<std::string> Targets() const override {
    std::vector<std::string> keys;
    for (const auto& n : options_.names) {
      for (const char* form : {"as_written", "absolute"}) {
        for (Libc l : options_.resolvers) keys.push_back(n + "|" + form + "|" + LibcName(l));
      }
    }
    if (!options_.names.empty()) keys.push_back("|servers|");
    return keys;
  }

  std::shared_ptr<PeerProbe> ForTarget(const std::string& key) override {
    if (key == "|servers|") return std::make_shared<ServersTarget>(shared_from_this());
    auto a = key.find('|');
    auto b = key.find('|', a + 1);
    std::string name = key.substr(0, a);
    bool absolute = key.substr(a + 1, b - a - 1) == "absolute";
    Libc libc = ParseLibc(key.substr(b + 1)).value_or(Libc::kGlibc);
    return std::make_shared<LookupTarget>(shared_from_this(), key, name, absolute, libc);
  }

  // The resolv.conf of this round as `libc` reads it; an unreadable file is counted.
  ResolvConf Load(Libc libc, PeerProbeBase& target) {
    bool readable = true;
    auto conf = LoadResolvConf(options_.resolv_conf, libc, config::ProcessEnv(), &readable);
    if (!readable) target.CountError("resolv_conf");
    return conf;
  }

  // Whether this Pod runs the lookups now: always without a sample (probes.dns.sample off, or
  // no Kubernetes discovery); else while it is one of its zone's `pods_per_zone` in this period.
  bool Sampled() const { return InSample(options_.sample ? options_.sample->pods_per_zone : 0); }
  // Whether this Pod times the cluster DNS replicas now: the same, with the zone's first
  // `replica_pods_per_zone` of the same draw (so the lookup Pods are among them when it is the
  // larger).
  bool ReplicasSampled() const {
    return InSample(options_.sample ? options_.sample->replica_pods_per_zone : 0);
  }

  const DnsOptions& options() const { return options_; }
  ProbeEnv& env() { return env_; }
  DnsFamilies& families() { return families_; }

 private:
  bool InSample(int count) const {
    const auto& s = options_.sample;
    if (!s || !env_.probe_pods) return true;
    auto now = env_.wall_clock ? env_.wall_clock() : std::chrono::system_clock::now();
    return topology::InZoneSample("dns lookups", topology::PeriodNumber(now, s->period), env_.self,
                                  *env_.probe_pods, static_cast<std::size_t>(count),
                                  env_.service_uid);
  }

  DnsOptions options_;
  ProbeEnv& env_;
  DnsFamilies families_;
};

LookupTarget::LookupTarget(std::shared_ptr<DnsKind> kind, const std::string& key, std::string name,
                           bool absolute, Libc libc)
    : PeerProbeBase(kind->env(), "dns", TargetNamed(key), {}),
      kind_(std::move(kind)),
      name_(std::move(name)),
      absolute_(absolute),
      libc_(libc),
      pool_(std::make_shared<ChannelPool>(env().io)) {
  target_labels_ = {{"name", name_},
                    {"form", absolute_ ? "absolute" : "as_written"},
                    {"resolver", LibcName(libc_)}};
}

void LookupTarget::StartRound(std::chrono::steady_clock::time_point) {
  if (!kind_->Sampled()) {  // other Pods of this zone run the lookups this period
    DropSeries();
    EndRound();
    return;
  }
  ResolvConf conf = kind_->Load(libc_, *this);
  // The lookup holds its target until it ends; a lookup that Cancel cut short is still recorded
  // (what happened so far), one that RemoveSeries cut short is not.
  lookup_ = Lookup::Start(env().io, pool_, conf, libc_, FormName(name_, absolute_),
                          [self = SharedSelf<LookupTarget>(), gen = generation()](LookupOutcome o) {
                            self->lookup_.reset();
                            if (self->series()) self->Record(o);
                            if (gen == self->generation()) self->EndRound();
                          });
}

void LookupTarget::Record(const LookupOutcome& o) {
  auto& f = kind_->families();
  auto& set = *series();
  auto with = [&](const char* k, std::string v) {
    auto l = target_labels_;
    l[k] = std::move(v);
    return l;
  };
  double seconds = std::chrono::duration<double>(o.duration).count();
  set.Add(f.duration, target_labels_).Observe(seconds);
  set.Add(f.lookups, with("result", ResultName(o.result))).Increment();
  set.Add(f.per_lookup, target_labels_).Set(static_cast<double>(o.queries.size()));
  // Both query types always have a series, so a rate is 0 rather than absent.
  set.Add(f.queries, with("qtype", "A"));
  set.Add(f.queries, with("qtype", "AAAA"));
  double sent = 0, received = 0;
  for (const auto& q : o.queries) {
    set.Add(f.queries, with("qtype", QTypeName(q.query.qtype))).Increment();
    std::string rcode = "TIMEOUT";
    if (q.reply && q.reply->kind == Reply::Kind::kAnswer) rcode = RcodeName(q.reply->rcode);
    if (q.reply && q.reply->kind == Reply::Kind::kConnRefused) rcode = "CONNREFUSED";
    set.Add(f.responses, with("rcode", rcode)).Increment();
    bool v6 = q.server.find('[') == 0;
    sent += WireBytes(q.bytes, v6, q.query.tcp);
    received += WireBytes(q.reply_bytes, v6, q.query.tcp);
  }
  auto& env = this->env();
  set.Add(env.metrics.probe_sent_bytes(), probe_labels()).Increment(sent);
  set.Add(env.metrics.probe_received_bytes(), probe_labels()).Increment(received);
  if (!o.error.empty()) {
    CountError("channel");
    spdlog::debug("dns {}: {}", FormName(name_, absolute_), o.error);
  }
  spdlog::debug("dns lookup name={} resolver={} result={} queries={} duration={:.6f}s",
                FormName(name_, absolute_), LibcName(libc_), ResultName(o.result), o.queries.size(),
                seconds);
}

ServersTarget::ServersTarget(std::shared_ptr<DnsKind> kind)
    : PeerProbeBase(kind->env(), "dns", TargetNamed("|servers|"), {}),
      kind_(std::move(kind)),
      pool_(std::make_shared<ChannelPool>(env().io)),
      timer_(env().io) {}

std::vector<ServersTarget::Server> ServersTarget::RoundServers(const ResolvConf& conf,
                                                               bool replicas) {
  std::vector<Server> servers;
  std::map<std::string, std::size_t> index;  // server → position in `servers`
  auto add = [&](const ResolvConf::Nameserver& ns, std::string zone, topology::PathClass path) {
    std::string server = net::FormatHostPort(ns.address, ns.port);
    prometheus::Labels labels{{"server", server},
                              {"server_zone", std::move(zone)},
                              {"path_class", std::string(topology::PathClassName(path))}};
    auto [it, added] = index.emplace(server, servers.size());
    if (added) {
      servers.push_back({ns, std::move(labels)});
    } else {
      servers[it->second].labels = std::move(labels);  // the replica's labels say more
    }
  };
  for (const auto& ns : conf.nameservers) add(ns, "", topology::PathClass::kUnknown);
  if (replicas) {
    for (const auto& p : env().dns_servers) add({p.address, p.port}, p.zone, p.path);
  }

  for (auto it = observed_.begin(); it != observed_.end();) {
    auto now = index.find(it->first);
    if (now != index.end() && servers[now->second].labels == it->second.labels) {
      ++it;
      continue;
    }
    if (auto* set = series()) set->Remove(it->second.series);
    it = observed_.erase(it);
  }
  std::vector<ResolvConf::Nameserver> keep;
  for (const auto& s : servers) keep.push_back(s.ns);
  pool_->Keep(keep);
  return servers;
}

void ServersTarget::StartRound(std::chrono::steady_clock::time_point) {
  series()->Add(kind_->families().sampled, {}).Set(kind_->Sampled() ? 1 : 0);
  const bool replicas = kind_->ReplicasSampled();
  ResolvConf conf = kind_->Load(Libc::kGlibc, *this);
  std::string name = ServerQuestion(conf.search, kind_->options().names.front());
  auto start = std::chrono::steady_clock::now();
  auto finish = IfCurrent(this, [](auto& self) { self.Finish(); });
  if (replicas && env().dns_servers_over_cap > 0) {
    CountError("servers_over_cap", std::to_string(env().dns_servers_over_cap) + " not asked");
  }
  for (const Server& server : RoundServers(conf, replicas)) {
    std::string err;
    net::AresChannel* ch = pool_->Get(conf, server.ns, false, Libc::kGlibc, 0, &err);
    if (!ch) {
      CountError("channel", err);
      continue;
    }
    int len = ch->Send(
        name, static_cast<std::uint16_t>(QType::kA), false,
        IfCurrent(this, [labels = server.labels, start, finish](
                            auto& self, int status, const unsigned char* abuf, int alen) {
          // Timed only when it answers the question (NOERROR, or NXDOMAIN: an answer too). A
          // replica that only says SERVFAIL or REFUSED (RFC 1035 4.1.1 RCODE 2, 5) serves no
          // lookup: its series stands still, as a silent replica's does, and the error is
          // counted. The channel passes every rcode through (ARES_FLAG_NOCHECKRESP).
          int rcode =
              status == ARES_SUCCESS && abuf != nullptr && alen >= 4 ? (abuf[3] & 0x0F) : -1;
          if (status == ARES_SUCCESS && rcode != 0 && rcode != 3) {
            self.CountError("server_error_rcode");
          } else if (status == ARES_SUCCESS) {
            double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            auto h = self.series()->Add(self.kind_->families().server_rtt, labels);
            h.Observe(s);
            self.observed_[labels.at("server")] = {labels, &h.classic()};
          } else if (status != ARES_ECANCELLED && status != ARES_EDESTRUCTION) {
            self.CountError("server_no_answer");
          }
          if (--self.outstanding_ == 0) boost::asio::post(self.env().io, finish);
        }));
    if (len > 0) ++outstanding_;
  }
  if (outstanding_ == 0) {
    boost::asio::post(env().io, finish);
    return;
  }
  timer_.expires_after(std::chrono::seconds(std::max(1, conf.timeout_s)));
  timer_.async_wait(IfCurrent(this, [](auto& self, boost::system::error_code ec) {
    if (ec) return;
    self.CountError("server_no_answer");
    self.Finish();
  }));
}

// The round's end: answers that come after it (c-ares cancelling them included) are stale.
void ServersTarget::Finish() {
  NextGeneration();
  StopRound();
  EndRound();
}

void ServersTarget::StopRound() {
  timer_.cancel();
  outstanding_ = 0;
  boost::asio::post(env().io, [pool = pool_] { pool->CancelAll(); });
}

}  // namespace

std::shared_ptr<ProbeKind> MakeDnsKind(const DnsOptions& options, ProbeEnv& env) {
  return std::make_shared<DnsKind>(options, env);
}

// One target per (name, form, resolver), 2 forms; responses by rcode: a relative name walks the
// search list (NXDOMAIN, then NOERROR), an absolute one is asked once; one {probe="dns"} pair of
// byte counters for all lookups.
std::size_t CountSeries(const config::Config& c, SeriesCounter& n) {
  const DnsOptions& o = *c.dns;
  std::size_t per_form = o.names.size() * o.resolvers.size();
  std::size_t targets = 2 * per_form;
  n.AddHistograms("podnet_dns_lookup_duration_seconds", targets, metrics::DnsLatencyBuckets());
  n.Add("podnet_dns_lookups_total", targets);
  n.Add("podnet_dns_queries_per_lookup", targets);
  n.Add("podnet_dns_queries_total", 2 * targets);  // A and AAAA
  n.Add("podnet_dns_responses_total", 2 * per_form + per_form);
  if (!o.names.empty()) {
    n.AddHistograms("podnet_dns_server_rtt_seconds", n.shape().dns_servers,
                    metrics::DnsLatencyBuckets());
    n.Add("podnet_dns_lookup_sampled", 1);
  }
  return 1;
}

}  // namespace podnet::probes::dns
