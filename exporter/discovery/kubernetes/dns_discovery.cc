#include "exporter/discovery/kubernetes/dns_discovery.h"

#include <ares.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <utility>

#include "exporter/net/address.h"
#include "exporter/net/ares_channel.h"
#include "exporter/topology/safe_text.h"
#include "exporter/wire/echo.h"

namespace podnet::discovery::kubernetes {

namespace asio = boost::asio;
namespace echo = wire::echo;
using boost::asio::ip::address;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// --- DNS answers ----------------------------------------------------------------------------

std::optional<std::vector<address>> AnswerAddresses(const unsigned char* abuf, int alen, bool v6,
                                                    std::size_t max, bool* more) {
  *more = false;
  std::vector<address> out;
  int n = static_cast<int>(std::min<std::size_t>(max, 1 << 20)) + 1;
  int status;
  if (v6) {
    std::vector<ares_addr6ttl> ttls(static_cast<std::size_t>(n));
    status = ares_parse_aaaa_reply(abuf, alen, nullptr, ttls.data(), &n);
    if (status == ARES_SUCCESS) {
      for (int i = 0; i < n; ++i) {
        asio::ip::address_v6::bytes_type b;
        std::copy_n(reinterpret_cast<const unsigned char*>(&ttls[i].ip6addr), 16, b.begin());
        // An IPv4 address written as ::ffff:a.b.c.d is asked at a.b.c.d: sent to from an IPv6
        // socket, the ask would go nowhere and be asked again forever.
        out.emplace_back(net::Unmapped(asio::ip::address_v6(b)));
      }
    }
  } else {
    std::vector<ares_addrttl> ttls(static_cast<std::size_t>(n));
    status = ares_parse_a_reply(abuf, alen, nullptr, ttls.data(), &n);
    if (status == ARES_SUCCESS) {
      for (int i = 0; i < n; ++i) {
        asio::ip::address_v4::bytes_type b;
        std::copy_n(reinterpret_cast<const unsigned char*>(&ttls[i].ipaddr), 4, b.begin());
        out.emplace_back(asio::ip::address_v4(b));
      }
    }
  }
  if (status == ARES_ENODATA) return out;  // the name exists, with no record of this type
  if (status != ARES_SUCCESS) return std::nullopt;
  if (out.size() > max) {
    out.resize(max);
    *more = true;
  }
  return out;
}

// --- metrics --------------------------------------------------------------------------------

DnsDiscoveryMetrics::DnsDiscoveryMetrics(prometheus::Registry& registry) : registry_(registry) {
  queries_ = &prometheus::BuildCounter()
                  .Name("podnet_discovery_dns_queries_total")
                  .Help(
                      "Questions for the probe Service's DNS records (peers.kubernetes.discovery "
                      "dns), by result.")
                  .Register(registry);
  asks_ = &prometheus::BuildCounter()
               .Name("podnet_discovery_identity_asks_total")
               .Help(
                   "Identity asks to the addresses of the probe Service's DNS records, by "
                   "result.")
               .Register(registry);
  conflicts_family_ = &prometheus::BuildGauge()
                           .Name("podnet_discovery_identity_node_conflicts")
                           .Help(
                               "Node names claimed by more than one address of the probe "
                               "Service's DNS records.")
                           .Register(registry);
  conflicts_ = &conflicts_family_->Add({});
}

DnsDiscoveryMetrics::~DnsDiscoveryMetrics() {
  registry_.Remove(*queries_);
  registry_.Remove(*asks_);
  registry_.Remove(*conflicts_family_);
}

void DnsDiscoveryMetrics::Query(std::string_view result) {
  queries_->Add({{"result", std::string(result)}}).Increment();
}

void DnsDiscoveryMetrics::Ask(std::string_view result) {
  asks_->Add({{"result", std::string(result)}}).Increment();
}

// --- DnsDiscovery ---------------------------------------------------------------------------

namespace {
constexpr std::uint16_t kTypeA = 1;
constexpr std::uint16_t kTypeAAAA = 28;
constexpr auto kAskTick = std::chrono::milliseconds(100);
constexpr auto kIdleTick = std::chrono::milliseconds(1000);
constexpr auto kServiceRefresh = std::chrono::minutes(10);

std::string_view RcodeResult(int rcode) {
  switch (rcode) {
    case 2:
      return "servfail";
    case 3:
      return "nxdomain";
    case 5:
      return "refused";
    default:
      return "error";
  }
}
}  // namespace

class DnsDiscovery::Impl : public std::enable_shared_from_this<DnsDiscovery::Impl> {
 public:
  Impl(asio::io_context& io, std::unique_ptr<ApiClient> client, DnsDiscoveryOptions options,
       DiscoveryMetrics& metrics, DnsDiscoveryMetrics& dns_metrics,
       std::function<void(const Snapshot&)> on_change, const std::vector<Endpoint>& seed)
      : io_(io),
        client_(std::move(client)),
        options_(std::move(options)),
        metrics_(metrics),
        dns_metrics_(dns_metrics),
        on_change_(std::move(on_change)),
        identities_(options_.identities),
        refresh_timer_(io),
        ask_timer_(io),
        pacer_(io, options_.min_publish_interval),
        node_timer_(io),
        service_timer_(io),
        node_backoff_(options_.initial_backoff, options_.max_backoff, options_.max_retry_after),
        service_backoff_(options_.initial_backoff, options_.max_backoff, options_.max_retry_after),
        v4_(io),
        v6_(io) {
    std::random_device rd;
    token_ = (std::uint64_t{rd()} << 32) | rd();
    identities_.Seed(seed, Clock::now());
  }

  void Start() {
    std::string error;
    for (bool tcp : {false, true}) {
      net::AresChannel::Options o;
      o.server = options_.nameserver;
      o.port = options_.nameserver_port;
      o.tcp = tcp;
      o.timeout = options_.query_timeout;
      auto& ch = tcp ? tcp_ : udp_;
      ch = net::AresChannel::Create(io_, o, &error);
      if (!ch) {
        last_error_ = "DNS discovery: " + error;
        spdlog::error("kubernetes: {}", last_error_);
        return;
      }
    }
    spdlog::info("kubernetes discovery: peers from the DNS records of {} (nameserver {}:{})",
                 options_.name, options_.nameserver.to_string(), options_.nameserver_port);
    Ask(kTypeA, false);
    if (options_.want_zone) GetNode();
    GetService();
    Tick();
  }

  void Stop() {
    stopped_ = true;
    for (auto* t : {&refresh_timer_, &ask_timer_, &node_timer_, &service_timer_}) t->cancel();
    pacer_.Cancel();
    if (node_call_) node_call_->Cancel();
    if (service_call_) service_call_->Cancel();
    node_call_.reset();
    service_call_.reset();
    if (udp_) udp_->Cancel();
    if (tcp_) tcp_->Cancel();
    boost::system::error_code ignored;
    v4_.close(ignored);
    v6_.close(ignored);
  }

  bool synced() const { return snapshot_.synced; }
  const Snapshot& snapshot() const { return snapshot_; }
  const std::string& last_error() const { return last_error_; }

 private:
  // --- the Service's records ---------------------------------------------------------------

  void Ask(std::uint16_t qtype, bool tcp) {
    auto& ch = tcp ? tcp_ : udp_;
    // A wire ID of our own: with one, the channel hands over the whole UDP answer (up to the
    // 1,200 bytes EDNS0 asks for) where c-ares alone cuts it to 512 (AresChannel::Pending).
    auto wire_id = static_cast<std::uint16_t>(rng_());
    int sent = ch->Send(
        options_.name, qtype, /*edns=*/!tcp,
        [self = shared_from_this(), qtype, tcp](int status, const unsigned char* abuf, int alen) {
          if (status == ARES_ECANCELLED || self->stopped_) return;
          self->OnAnswer(qtype, tcp, status, abuf, alen);
        },
        {}, wire_id);
    if (sent < 0) Failed("error", "the name " + options_.name + " cannot be asked");
  }

  void OnAnswer(std::uint16_t qtype, bool tcp, int status, const unsigned char* abuf, int alen) {
    if (status != ARES_SUCCESS || alen < 12) {
      Failed(status == ARES_ETIMEOUT ? "timeout" : "error",
             std::string("no answer: ") + ares_strerror(status));
      return;
    }
    int rcode = abuf[3] & 0x0F;
    if (!tcp && (abuf[2] & 0x02) != 0) {  // TC: the whole answer over TCP (RFC 7766)
      dns_metrics_.Query("truncated");
      Ask(qtype, true);
      return;
    }
    if (rcode != 0 && rcode != 3) {
      Failed(RcodeResult(rcode), "rcode " + std::to_string(rcode));
      return;
    }
    std::vector<address> found;
    bool more = false;
    if (rcode == 0) {
      auto addrs =
          AnswerAddresses(abuf, alen, qtype == kTypeAAAA, options_.identities.max_addresses, &more);
      if (!addrs) {
        Failed("error", "an answer that does not parse");
        return;
      }
      found = std::move(*addrs);
      if (found.empty() && qtype == kTypeA) {  // no A records: an IPv6-only Service?
        Ask(kTypeAAAA, false);
        return;
      }
    }
    dns_metrics_.Query(rcode == 3 ? "nxdomain" : "ok");
    failures_ = 0;
    if (more) dns_metrics_.Query("too_many_records");
    identities_.Answered(found, Clock::now());
    answered_ = true;
    dirty_ = true;
    Tick();
    ScheduleRefresh();
  }

  void Failed(std::string_view result, const std::string& detail) {
    dns_metrics_.Query(result);
    last_error_ = "DNS " + options_.name + ": " + std::string(result) + " (" + detail + ")";
    ++failures_;
    // As the watch logs its failures: the first of a streak and every 10th at warn.
    spdlog::log(FailureStreakLevel(failures_),
                "kubernetes: {}; the last peers are kept; asking again in {} ms (failure {})",
                last_error_, options_.refresh.count(), failures_);
    ScheduleRefresh();
  }

  void ScheduleRefresh() {
    std::uniform_real_distribution<double> jitter(0.9, 1.1);
    auto wait = std::chrono::duration_cast<Clock::duration>(options_.refresh * jitter(rng_));
    refresh_timer_.expires_after(wait);
    refresh_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec && !self->stopped_) self->Ask(kTypeA, false);
    });
  }

  // --- identity asks -----------------------------------------------------------------------

  // Expires late asks, sends the due ones (asks_per_second, in ticks of kAskTick), publishes
  // what changed; then sleeps until the next ask falls due (kAskTick to kIdleTick): a settled
  // fleet of 3,000 costs a wake-up a second, not a scan of every address ten times a second.
  void Tick() {
    auto now = Clock::now();
    std::size_t lost = identities_.Expire(now);
    for (std::size_t n = lost; n > 0; --n) dns_metrics_.Ask("timeout");
    if (lost > 0) dirty_ = true;
    auto per_tick = std::max<std::size_t>(
        1, static_cast<std::size_t>(options_.asks_per_second) * kAskTick.count() / 1000);
    for (const address& a : identities_.Due(now, per_tick)) Send(a);
    if (dirty_) {
      dirty_ = false;
      Update();
    }
    Clock::duration wait = kIdleTick;
    if (auto next = identities_.NextDue()) {
      wait = std::clamp<Clock::duration>(*next - now, kAskTick, kIdleTick);
    }
    ask_timer_.expires_after(wait);
    ask_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec && !self->stopped_) self->Tick();
    });
  }

  asio::ip::udp::socket& SocketFor(const address& a) {
    auto& s = a.is_v4() ? v4_ : v6_;
    if (!s.is_open()) {
      boost::system::error_code ec;
      s.open(a.is_v4() ? asio::ip::udp::v4() : asio::ip::udp::v6(), ec);
      if (!ec) Receive(a.is_v4());
    }
    return s;
  }

  void Send(const address& a) {
    auto& s = SocketFor(a);
    auto payload =
        echo::EncodePayload({echo::Kind::kRequest, ++seq_, token_}, echo::kIdentityPodPayloadSize);
    echo::AskIdentity(payload, /*discovery=*/true);
    boost::system::error_code ec;
    if (s.is_open()) s.send_to(asio::buffer(payload), {a, options_.port}, 0, ec);
    // A send that fails is an ask that times out: counted there, retried with backoff.
  }

  void Receive(bool v4) {
    auto& s = v4 ? v4_ : v6_;
    auto& buf = v4 ? buf4_ : buf6_;
    auto& from = v4 ? from4_ : from6_;
    s.async_receive_from(
        asio::buffer(buf), from,
        [self = shared_from_this(), v4](boost::system::error_code ec, std::size_t n) {
          if (ec || self->stopped_) return;
          auto& b = v4 ? self->buf4_ : self->buf6_;
          self->OnReply(v4 ? self->from4_ : self->from6_,
                        std::span<const std::uint8_t>(b.data(), n));
          self->Receive(v4);
        });
  }

  void OnReply(const asio::ip::udp::endpoint& from, std::span<const std::uint8_t> data) {
    auto h = echo::DecodePayload(data);
    if (from.port() != options_.port || !h || h->kind != echo::Kind::kReply || h->token != token_) {
      return;  // not an answer to one of this Pod's asks
    }
    address a = from.address();
    if (a.is_v6() && a.to_v6().is_v4_mapped()) {
      a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
    }
    auto now = Clock::now();
    echo::Identity id;
    switch (echo::ReadIdentity(data, &id)) {
      case echo::IdentityRead::kPresent: {
        Endpoint e;
        e.name = id.pod.empty() ? a.to_string() : id.pod;
        e.address = a;
        e.node = id.node;
        e.zone = id.zone;
        auto r = identities_.Heard(a, e, now);
        if (r == PeerIdentities::HeardResult::kIgnored) return;
        dns_metrics_.Ask("answered");
        dirty_ = true;  // published by the next Tick, at most kAskTick later
        return;
      }
      case echo::IdentityRead::kAbsent:
        if (identities_.Lost(a, now)) {
          dns_metrics_.Ask("no_identity");
          dirty_ = true;
        }
        return;
      case echo::IdentityRead::kMalformed:
        if (identities_.Lost(a, now)) {
          dns_metrics_.Ask("malformed");
          dirty_ = true;
        }
        return;
    }
  }

  // --- the Snapshot ------------------------------------------------------------------------

  void Update() {
    bool was_synced = snapshot_.synced;
    bool synced = answered_ && identities_.AllAskedOnce();
    auto endpoints = identities_.Endpoints();
    dns_metrics_.conflicts().Set(static_cast<double>(identities_.NodeConflicts()));
    if (synced == was_synced && endpoints == snapshot_.endpoints) return;
    next_.endpoints = std::move(endpoints);
    next_.synced = synced || was_synced;
    Publish(!was_synced && next_.synced);
  }

  void Publish(bool force) {
    if (pacer_.Due(force, [self = shared_from_this()] {
          if (!self->stopped_) self->PublishNow();
        })) {
      PublishNow();
    }
  }

  void PublishNow() {
    pacer_.Published();
    snapshot_.endpoints = next_.endpoints;
    snapshot_.synced = next_.synced;
    // Once synced, as the watch: before that, a restart's kept peers are what is probed.
    if (snapshot_.synced) {
      metrics_.candidates().Set(static_cast<double>(snapshot_.endpoints.size()));
    }
    on_change_(snapshot_);
  }

  // --- the Node's zone and the Service's UID -----------------------------------------------

  void GetNode() {
    node_call_ = client_->Get(NodePath(options_.node),
                              [self = shared_from_this()](ApiResponse r) { self->OnNode(r); });
  }

  void OnNode(const ApiResponse& r) {
    node_call_.reset();
    if (stopped_) return;
    std::string reason, detail;
    if (auto zone = NodeZoneOf(r, options_.node, metrics_, &reason, &detail)) {
      if (zone->empty()) return;
      snapshot_.self_zone = next_.self_zone = *zone;
      PublishNow();
      return;
    }
    Retry("node", "GET node " + options_.node, reason, r, detail, node_backoff_, node_timer_,
          &Impl::GetNode);
  }

  void GetService() {
    service_call_ =
        client_->Get(ServicePath(options_.namespace_name, options_.service),
                     [self = shared_from_this()](ApiResponse r) { self->OnService(r); });
  }

  void OnService(const ApiResponse& r) {
    service_call_.reset();
    if (stopped_) return;
    std::string reason = FailureReason(r), detail = Describe(r);
    if (reason.empty()) {
      json service = json::parse(r.body, nullptr, false);
      const json* meta = service.is_discarded() ? nullptr : ObjectAt(service, "metadata");
      topology::TextRepairs repairs;
      std::string uid = meta ? TextAt(*meta, "uid", topology::kMaxSubdomainBytes, &repairs) : "";
      metrics_.Sanitized("services", repairs);
      if (!uid.empty()) {
        service_backoff_.Reset();
        if (uid != snapshot_.service_uid) {
          snapshot_.service_uid = next_.service_uid = uid;
          PublishNow();
        }
        service_timer_.expires_after(kServiceRefresh);
        service_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
          if (!ec && !self->stopped_) self->GetService();
        });
        return;
      }
      reason = "bad_response";
      detail = "a Service without metadata.uid";
    }
    Retry("services", "GET service " + options_.namespace_name + "/" + options_.service, reason, r,
          detail, service_backoff_, service_timer_, &Impl::GetService);
  }

  void Retry(std::string_view resource, const std::string& what, const std::string& reason,
             const ApiResponse& r, const std::string& detail, Backoff& backoff,
             asio::steady_timer& timer, void (Impl::*again)()) {
    metrics_.Error(resource, reason);
    auto delay = backoff.Next(r.retry_after);
    last_error_ = what + ": " + Failure(reason, r, detail);
    spdlog::log(FailureStreakLevel(backoff.attempt()),
                "kubernetes: {}; retrying in {} ms (failure {})", last_error_, delay.count(),
                backoff.attempt());
    timer.expires_after(delay);
    timer.async_wait([self = shared_from_this(), again](boost::system::error_code ec) {
      if (!ec && !self->stopped_) ((*self).*again)();
    });
  }

  asio::io_context& io_;
  std::unique_ptr<ApiClient> client_;
  DnsDiscoveryOptions options_;
  DiscoveryMetrics& metrics_;
  DnsDiscoveryMetrics& dns_metrics_;
  std::function<void(const Snapshot&)> on_change_;
  PeerIdentities identities_;
  std::unique_ptr<net::AresChannel> udp_, tcp_;
  asio::steady_timer refresh_timer_, ask_timer_;
  PublishPacer<Clock> pacer_;
  asio::steady_timer node_timer_, service_timer_;
  Backoff node_backoff_, service_backoff_;
  std::shared_ptr<ApiClient::Call> node_call_, service_call_;
  asio::ip::udp::socket v4_, v6_;
  std::array<std::uint8_t, 2048> buf4_{}, buf6_{};
  asio::ip::udp::endpoint from4_, from6_;
  std::uint64_t token_ = 0;
  std::uint16_t seq_ = 0;
  std::mt19937_64 rng_{std::random_device{}()};
  Snapshot snapshot_;      // what was published
  Snapshot next_;          // what the next publish sends
  bool answered_ = false;  // a first answer (records or NXDOMAIN) came
  int failures_ = 0;       // DNS failures in a row
  bool dirty_ = true;      // the identities changed since the last Update
  bool stopped_ = false;
  std::string last_error_;
};

DnsDiscovery::DnsDiscovery(asio::io_context& io, std::unique_ptr<ApiClient> client,
                           DnsDiscoveryOptions options, DiscoveryMetrics& metrics,
                           DnsDiscoveryMetrics& dns_metrics,
                           std::function<void(const Snapshot&)> on_change,
                           const std::vector<Endpoint>& seed)
    : impl_(std::make_shared<Impl>(io, std::move(client), std::move(options), metrics, dns_metrics,
                                   std::move(on_change), seed)) {}

DnsDiscovery::~DnsDiscovery() { impl_->Stop(); }
void DnsDiscovery::Start() { impl_->Start(); }
void DnsDiscovery::Stop() { impl_->Stop(); }
bool DnsDiscovery::synced() const { return impl_->synced(); }
const Snapshot& DnsDiscovery::snapshot() const { return impl_->snapshot(); }
const std::string& DnsDiscovery::last_error() const { return impl_->last_error(); }

}  // namespace podnet::discovery::kubernetes
