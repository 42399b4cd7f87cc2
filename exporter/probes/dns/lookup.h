#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "exporter/net/ares_channel.h"
#include "exporter/probes/dns/resolv_conf.h"
#include "exporter/probes/dns/resolver_model.h"

namespace podnet::probes::dns {

/// c-ares channels by (nameserver, port, transport, libc, socket generation), made on first use
/// and kept for the next lookups of one target. Lookups sharing a pool must not overlap
/// (CancelAll ends them all).
class ChannelPool {
 public:
  explicit ChannelPool(boost::asio::io_context& io) : io_(io) {}
  /// nullptr and *error set when c-ares cannot make the channel. The libc decides how its UDP
  /// replies are read (net::AresChannel::Options): glibc connects its socket (res_send.c
  /// send_dg) and matches ID and question section; musl (res_msend.c) reads replies from any
  /// nameserver of `conf` (address and port) and matches the ID alone. `socket`: WireQuery's.
  net::AresChannel* Get(const ResolvConf& conf, const ResolvConf::Nameserver& ns, bool tcp,
                        Libc libc, int socket, std::string* error);
  void CancelAll();
  /// Closes the channels of every nameserver not in `keep` (a server that went away must not
  /// hold its sockets). Not from inside a c-ares callback of a channel it may close.
  void Keep(const std::vector<ResolvConf::Nameserver>& keep);

 private:
  boost::asio::io_context& io_;
  std::map<std::tuple<std::string, std::uint16_t, bool, Libc, int>,
           std::unique_ptr<net::AresChannel>>
      channels_;
};

/// One question as it went on the wire, and what came back (times from the lookup's start).
struct QueryRecord {
  WireQuery query;
  std::string server;                   // "10.0.0.10:53"
  bool on_wire = false;                 // its bytes left the socket
  std::chrono::nanoseconds sent_at{0};  // when they did
  std::optional<Reply> reply;           // nullopt: none before the lookup ended (TIMEOUT)
  std::chrono::nanoseconds replied_at{0};
  int bytes = 0;        // DNS message sent
  int reply_bytes = 0;  // DNS message received
};

struct LookupOutcome {
  Result result = Result::kError;
  std::chrono::nanoseconds duration{0};
  /// Exactly the questions that left the socket, in the order they did (a question the model
  /// asked for that the socket refused to send, e.g. after an ICMP port unreachable, is not
  /// here: it is not on the wire).
  std::vector<QueryRecord> queries;
  std::string error;  // set with Result::kError from our side (c-ares setup)
  std::string note;   // ResolverModel::note(): why the libc sent nothing, or its verdict
  /// Questions the model asked for that never left the socket (a refused TCP connection, a
  /// send that failed): not in `queries`, not counted anywhere but here.
  int not_sent = 0;
};

/// Performs one lookup of `name` as `libc` would under `conf`: the model decides every question,
/// c-ares sends each (one try, to the model's nameserver), and the replies and deadlines go back
/// to the model until it says the walk is over. Each new question gets a random DNS ID; one the
/// libc sends again from the same buffer (WireQuery::same_id_as) keeps it, and a reply reaches
/// the model only if the libc would read it (ChannelPool::Get). Bounded: the model's
/// MaxDuration() + 1 s at most. `done` is called once, posted to `io` (never from inside a c-ares
/// callback).
class Lookup : public std::enable_shared_from_this<Lookup> {
 public:
  using Done = std::function<void(LookupOutcome)>;
  static std::shared_ptr<Lookup> Start(boost::asio::io_context& io,
                                       std::shared_ptr<ChannelPool> pool, const ResolvConf& conf,
                                       Libc libc, const std::string& name, Done done);
  /// Ends the lookup now (`done` is still called, with what happened so far).
  void Cancel();

 private:
  Lookup(boost::asio::io_context& io, std::shared_ptr<ChannelPool> pool, const ResolvConf& conf,
         Libc libc, const std::string& name, Done done);
  void Apply(Actions a);
  // Sends one question of the model's (recorded in outcome_.queries); false when the lookup
  // ended on it (no channel for its server, or a name c-ares cannot encode).
  bool SendQuery(const WireQuery& q);
  void OnReply(std::size_t index, int status, const unsigned char* abuf, int alen);
  void Finish(std::optional<Result> forced);
  std::chrono::nanoseconds Now() const;

  boost::asio::io_context& io_;
  std::shared_ptr<ChannelPool> pool_;
  ResolvConf conf_;
  Libc libc_;
  std::unique_ptr<ResolverModel> model_;
  std::map<int, std::size_t> by_id_;       // model id → index in outcome_.queries
  std::map<int, std::uint16_t> wire_ids_;  // model id → its DNS ID on the wire
  std::minstd_rand random_{std::random_device{}()};
  boost::asio::steady_timer deadline_;
  boost::asio::steady_timer guard_;
  std::chrono::steady_clock::time_point start_;
  LookupOutcome outcome_;
  Done done_;
  bool finished_ = false;     // the walk is over: the model hears nothing more
  bool handed_over_ = false;  // outcome_ went to `done`
};

}  // namespace podnet::probes::dns
