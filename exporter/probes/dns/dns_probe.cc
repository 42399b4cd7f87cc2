#include "exporter/probes/dns/dns_probe.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "exporter/metrics/buckets.h"
#include "exporter/net/address.h"
#include "exporter/probes/dns/lookup.h"

namespace podnet::probes::dns {

std::string FormName(const std::string& name, bool absolute) {
  if (!absolute || (!name.empty() && name.back() == '.')) return name;
  return name + ".";
}

namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

struct DnsFamilies {
  explicit DnsFamilies(prometheus::Registry& r)
      : duration(prometheus::BuildHistogram()
                     .Name("podnet_dns_lookup_duration_seconds")
                     .Help("Duration of one resolver-model lookup (all its questions), seconds.")
                     .Register(r)),
        lookups(prometheus::BuildCounter()
                    .Name("podnet_dns_lookups_total")
                    .Help("Lookups by outcome (success, nxdomain, nodata, servfail, timeout, "
                          "error).")
                    .Register(r)),
        queries(prometheus::BuildCounter()
                    .Name("podnet_dns_queries_total")
                    .Help("DNS questions sent by lookups, by query type.")
                    .Register(r)),
        responses(prometheus::BuildCounter()
                      .Name("podnet_dns_responses_total")
                      .Help("Responses to those questions by rcode; TIMEOUT when none came "
                            "before the lookup ended.")
                      .Register(r)),
        per_lookup(prometheus::BuildGauge()
                       .Name("podnet_dns_queries_per_lookup")
                       .Help("Questions the last lookup sent (the amplification).")
                       .Register(r)),
        server_rtt(prometheus::BuildHistogram()
                       .Name("podnet_dns_server_rtt_seconds")
                       .Help("Time for one nameserver to answer one A question for the "
                             "absolute name, seconds.")
                       .Register(r)) {}
  Family<Histogram>& duration;
  Family<Counter>& lookups;
  Family<Counter>& queries;
  Family<Counter>& responses;
  Family<Gauge>& per_lookup;
  Family<Histogram>& server_rtt;
};

// Wire bytes of one DNS message: IP + UDP (or TCP + 2-byte length) headers.
int WireBytes(int dns_bytes, bool v6, bool tcp) {
  if (dns_bytes <= 0) return 0;
  return dns_bytes + (v6 ? 40 : 20) + (tcp ? 20 + 2 : 8);
}

class DnsKind;

// One (name, form, resolver).
class LookupTarget : public PeerProbe, public std::enable_shared_from_this<LookupTarget> {
 public:
  LookupTarget(std::shared_ptr<DnsKind> kind, std::string name, bool absolute, Libc libc);
  void Run(std::chrono::steady_clock::time_point, std::function<void()> done) override;
  void Cancel() override {
    if (auto l = lookup_) l->Cancel();
  }
  void RemoveSeries() override {
    removed_ = true;
    series_.RemoveAll();
  }

 private:
  void Record(const LookupOutcome& o);

  std::shared_ptr<DnsKind> kind_;
  std::string name_;  // as configured
  bool absolute_;
  Libc libc_;
  prometheus::Labels labels_;
  std::shared_ptr<ChannelPool> pool_;
  std::shared_ptr<Lookup> lookup_;  // the round in flight
  metrics::SeriesSet series_;
  bool removed_ = false;
};

// Each nameserver asked directly for the first name's absolute form.
class ServersTarget : public PeerProbe, public std::enable_shared_from_this<ServersTarget> {
 public:
  explicit ServersTarget(std::shared_ptr<DnsKind> kind);
  void Run(std::chrono::steady_clock::time_point, std::function<void()> done) override;
  void Cancel() override { Complete(); }
  void RemoveSeries() override {
    removed_ = true;
    series_.RemoveAll();
  }

 private:
  void Complete();
  std::shared_ptr<DnsKind> kind_;
  std::shared_ptr<ChannelPool> pool_;
  boost::asio::steady_timer timer_;
  std::function<void()> done_;
  int outstanding_ = 0;
  metrics::SeriesSet series_;
  bool removed_ = false;
};

class DnsKind : public ProbeKind, public std::enable_shared_from_this<DnsKind> {
 public:
  DnsKind(const DnsOptions& o, ProbeEnv& env)
      : options_(o), env_(env), families_(env.metrics.registry()) {}

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
    return std::make_shared<LookupTarget>(shared_from_this(), name, absolute, libc);
  }

  // The resolv.conf of this round as `libc` reads it; an unreadable file is counted.
  ResolvConf Load(Libc libc, metrics::SeriesSet& series) {
    bool readable = true;
    auto conf = LoadResolvConf(options_.resolv_conf, libc, config::ProcessEnv(), &readable);
    if (!readable) Error(series, "resolv_conf");
    return conf;
  }

  void Error(metrics::SeriesSet& series, const std::string& reason) {
    series.Add(env_.metrics.probe_errors(), {{"probe", "dns"}, {"reason", reason}}).Increment();
  }

  const DnsOptions& options() const { return options_; }
  ProbeEnv& env() { return env_; }
  DnsFamilies& families() { return families_; }

 private:
  DnsOptions options_;
  ProbeEnv& env_;
  DnsFamilies families_;
};

LookupTarget::LookupTarget(std::shared_ptr<DnsKind> kind, std::string name, bool absolute,
                           Libc libc)
    : kind_(std::move(kind)),
      name_(std::move(name)),
      absolute_(absolute),
      libc_(libc),
      pool_(std::make_shared<ChannelPool>(kind_->env().io)),
      series_(kind_->env().metrics.series_refs()) {
  labels_ = {{"name", name_},
             {"form", absolute_ ? "absolute" : "as_written"},
             {"resolver", LibcName(libc_)}};
}

void LookupTarget::Run(std::chrono::steady_clock::time_point, std::function<void()> done) {
  ResolvConf conf = kind_->Load(libc_, series_);
  lookup_ = Lookup::Start(kind_->env().io, pool_, conf, libc_, FormName(name_, absolute_),
                          [self = shared_from_this(), done](LookupOutcome o) {
                            self->lookup_.reset();
                            if (!self->removed_) self->Record(o);
                            done();
                          });
}

void LookupTarget::Record(const LookupOutcome& o) {
  auto& f = kind_->families();
  auto with = [&](const char* k, std::string v) {
    auto l = labels_;
    l[k] = std::move(v);
    return l;
  };
  double seconds = std::chrono::duration<double>(o.duration).count();
  series_.Add(f.duration, labels_, metrics::DnsLatencyBuckets()).Observe(seconds);
  series_.Add(f.lookups, with("result", ResultName(o.result))).Increment();
  series_.Add(f.per_lookup, labels_).Set(static_cast<double>(o.queries.size()));
  // Both query types always have a series, so a rate is 0 rather than absent.
  series_.Add(f.queries, with("qtype", "A"));
  series_.Add(f.queries, with("qtype", "AAAA"));
  double sent = 0, received = 0;
  for (const auto& q : o.queries) {
    series_.Add(f.queries, with("qtype", QTypeName(q.query.qtype))).Increment();
    std::string rcode = "TIMEOUT";
    if (q.reply && q.reply->kind == Reply::Kind::kAnswer) rcode = RcodeName(q.reply->rcode);
    if (q.reply && q.reply->kind == Reply::Kind::kConnRefused) rcode = "CONNREFUSED";
    series_.Add(f.responses, with("rcode", rcode)).Increment();
    bool v6 = q.server.find('[') == 0;
    sent += WireBytes(q.bytes, v6, q.query.tcp);
    received += WireBytes(q.reply_bytes, v6, q.query.tcp);
  }
  auto& env = kind_->env();
  series_.Add(env.metrics.probe_sent_bytes(), {{"probe", "dns"}}).Increment(sent);
  series_.Add(env.metrics.probe_received_bytes(), {{"probe", "dns"}}).Increment(received);
  if (!o.error.empty()) {
    kind_->Error(series_, "channel");
    spdlog::debug("dns {}: {}", FormName(name_, absolute_), o.error);
  }
  spdlog::debug("dns lookup name={} resolver={} result={} queries={} duration={:.6f}s",
                FormName(name_, absolute_), LibcName(libc_), ResultName(o.result), o.queries.size(),
                seconds);
}

ServersTarget::ServersTarget(std::shared_ptr<DnsKind> kind)
    : kind_(std::move(kind)),
      pool_(std::make_shared<ChannelPool>(kind_->env().io)),
      timer_(kind_->env().io),
      series_(kind_->env().metrics.series_refs()) {}

void ServersTarget::Run(std::chrono::steady_clock::time_point, std::function<void()> done) {
  done_ = std::move(done);
  ResolvConf conf = kind_->Load(Libc::kGlibc, series_);
  std::string name = FormName(kind_->options().names.front(), true);
  auto start = std::chrono::steady_clock::now();
  for (const auto& ns : conf.nameservers) {
    std::string err;
    net::AresChannel* ch = pool_->Get(ns, false, true, &err);
    if (!ch) {
      kind_->Error(series_, "channel");
      continue;
    }
    std::string server = net::FormatHostPort(ns.address, ns.port);
    int len = ch->Send(
        name, static_cast<std::uint16_t>(QType::kA), false,
        [weak = weak_from_this(), server, start](int status, const unsigned char*, int) {
          auto self = weak.lock();
          if (!self || !self->done_) return;
          if (status == ARES_SUCCESS && !self->removed_) {
            double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            self->series_
                .Add(self->kind_->families().server_rtt, {{"server", server}},
                     metrics::DnsLatencyBuckets())
                .Observe(s);
          } else if (status != ARES_ECANCELLED && status != ARES_EDESTRUCTION && !self->removed_) {
            self->kind_->Error(self->series_, "server_no_answer");
          }
          if (--self->outstanding_ == 0) {
            boost::asio::post(self->kind_->env().io, [self] { self->Complete(); });
          }
        });
    if (len > 0) ++outstanding_;
  }
  if (outstanding_ == 0) {
    boost::asio::post(kind_->env().io, [self = shared_from_this()] { self->Complete(); });
    return;
  }
  timer_.expires_after(std::chrono::seconds(std::max(1, conf.timeout_s)));
  timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (auto self = weak.lock(); self && !ec) {
      if (!self->removed_) self->kind_->Error(self->series_, "server_no_answer");
      self->Complete();
    }
  });
}

void ServersTarget::Complete() {
  timer_.cancel();
  outstanding_ = 0;
  if (!done_) return;
  auto done = std::move(done_);
  done_ = nullptr;
  boost::asio::post(kind_->env().io, [pool = pool_] { pool->CancelAll(); });
  done();
}

}  // namespace

std::shared_ptr<ProbeKind> MakeDnsKind(const DnsOptions& options, ProbeEnv& env) {
  return std::make_shared<DnsKind>(options, env);
}

}  // namespace podnet::probes::dns
