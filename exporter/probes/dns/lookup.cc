#include "exporter/probes/dns/lookup.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <random>

#include "exporter/net/address.h"

namespace podnet::probes::dns {

net::AresChannel* ChannelPool::Get(const ResolvConf& conf, const ResolvConf::Nameserver& ns,
                                   bool tcp, Libc libc, int socket, std::string* error) {
  auto key = std::make_tuple(ns.address.to_string(), ns.port, tcp, libc, socket);
  std::vector<boost::asio::ip::udp::endpoint> from;
  if (libc == Libc::kMusl) {
    for (const auto& n : conf.nameservers) from.emplace_back(n.address, n.port);
  }
  auto& c = channels_[key];
  if (!c) {
    net::AresChannel::Options o;
    o.server = ns.address;
    o.port = ns.port;
    o.tcp = tcp;
    o.connect_udp = libc == Libc::kGlibc;
    o.match_question = libc == Libc::kGlibc;
    o.accept_from = std::move(from);
    c = net::AresChannel::Create(io_, o, error);
  } else {
    c->AcceptFrom(std::move(from));
  }
  return c.get();
}

void ChannelPool::CancelAll() {
  for (auto& [key, c] : channels_) {
    if (c) c->Cancel();
  }
}

void ChannelPool::Keep(const std::vector<ResolvConf::Nameserver>& keep) {
  std::erase_if(channels_, [&](const auto& entry) {
    return std::none_of(keep.begin(), keep.end(), [&](const ResolvConf::Nameserver& ns) {
      return ns.port == std::get<1>(entry.first) &&
             ns.address.to_string() == std::get<0>(entry.first);
    });
  });
}

std::shared_ptr<Lookup> Lookup::Start(boost::asio::io_context& io,
                                      std::shared_ptr<ChannelPool> pool, const ResolvConf& conf,
                                      Libc libc, const std::string& name, Done done) {
  std::shared_ptr<Lookup> l(new Lookup(io, std::move(pool), conf, libc, name, std::move(done)));
  // A stuck model or wire layer must not hold the target forever.
  l->guard_.expires_after(l->model_->MaxDuration() + std::chrono::seconds(1));
  l->guard_.async_wait([weak = std::weak_ptr<Lookup>(l)](boost::system::error_code ec) {
    if (auto l = weak.lock(); l && !ec) l->Finish(Result::kTimeout);
  });
  l->Apply(l->model_->Start());
  return l;
}

Lookup::Lookup(boost::asio::io_context& io, std::shared_ptr<ChannelPool> pool,
               const ResolvConf& conf, Libc libc, const std::string& name, Done done)
    : io_(io),
      pool_(std::move(pool)),
      conf_(conf),
      libc_(libc),
      model_(MakeModel(libc, conf, name)),
      deadline_(io),
      guard_(io),
      start_(std::chrono::steady_clock::now()),
      done_(std::move(done)) {}

std::chrono::nanoseconds Lookup::Now() const { return std::chrono::steady_clock::now() - start_; }

void Lookup::Cancel() { Finish(std::nullopt); }

bool Lookup::SendQuery(const WireQuery& q) {
  const auto& ns = conf_.nameservers.at(static_cast<std::size_t>(q.server));
  std::string err;
  // glibc's send_dg connects its UDP socket (ICMP errors come back as ECONNREFUSED); musl's
  // res_msend.c uses sendto on an unconnected one.
  net::AresChannel* ch = pool_->Get(conf_, ns, q.tcp, libc_, q.socket, &err);
  QueryRecord rec;
  rec.query = q;
  rec.server = net::FormatHostPort(ns.address, ns.port);
  rec.sent_at = Now();
  if (!ch) {
    outcome_.error = err;
    Finish(Result::kError);
    return false;
  }
  std::size_t index = outcome_.queries.size();
  outcome_.queries.push_back(rec);
  by_id_[q.id] = index;
  bool edns = libc_ == Libc::kGlibc && conf_.edns0;
  // A new query gets a new random ID; the libc's retransmission keeps the first one's.
  auto first = wire_ids_.find(q.same_id_as);
  std::uint16_t wire_id =
      first != wire_ids_.end()
          ? first->second
          : static_cast<std::uint16_t>(std::uniform_int_distribution<int>(0, 0xffff)(random_));
  wire_ids_[q.id] = wire_id;
  auto on_reply = [weak = weak_from_this(), index](int status, const unsigned char* abuf,
                                                   int alen) {
    if (auto l = weak.lock()) l->OnReply(index, status, abuf, alen);
  };
  auto on_sent = [weak = weak_from_this(), index](std::chrono::steady_clock::time_point at) {
    auto l = weak.lock();
    if (!l || l->handed_over_ || index >= l->outcome_.queries.size()) return;
    l->outcome_.queries[index].on_wire = true;
    l->outcome_.queries[index].sent_at = at - l->start_;
  };
  int len = q.raw.empty() ? ch->Send(q.name, static_cast<std::uint16_t>(q.qtype), edns, on_reply,
                                     on_sent, wire_id)
                          : ch->SendMessage(q.raw, on_reply, on_sent, wire_id);
  if (len < 0) {
    outcome_.queries.pop_back();
    outcome_.error = "c-ares cannot encode the name " + q.name;
    Finish(Result::kError);
    return false;
  }
  outcome_.queries[index].bytes = len;
  return true;
}

void Lookup::Apply(Actions a) {
  if (finished_) return;
  for (const WireQuery& q : a.send) {
    if (!SendQuery(q) || finished_) return;
  }
  if (a.done) {
    Finish(std::nullopt);
    return;
  }
  if (a.wait) {
    deadline_.expires_after(*a.wait);
    deadline_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      auto l = weak.lock();
      if (!l || ec || l->finished_) return;
      l->Apply(l->model_->OnDeadline());
    });
  }
}

void Lookup::OnReply(std::size_t index, int status, const unsigned char* abuf, int alen) {
  // A reply that comes in the same c-ares dispatch as the one that ended the walk (c-ares ends
  // every question to a server that refused) is still recorded, not fed to the model.
  if (handed_over_ || index >= outcome_.queries.size()) return;
  if (status == ARES_ECANCELLED || status == ARES_EDESTRUCTION) return;
  if (finished_ && outcome_.queries[index].reply) return;
  Reply r;
  if (status == ARES_SUCCESS && abuf && alen >= 12) {
    r.kind = Reply::Kind::kAnswer;
    r.rcode = abuf[3] & 0x0f;
    r.truncated = (abuf[2] & 0x02) != 0;
    r.ancount = (abuf[6] << 8) | abuf[7];
    r.message.assign(reinterpret_cast<const char*>(abuf), static_cast<std::size_t>(alen));
  } else if (status == ARES_ECONNREFUSED) {
    r.kind = Reply::Kind::kConnRefused;
  } else {
    r.kind = Reply::Kind::kNoAnswer;
  }
  QueryRecord& rec = outcome_.queries[index];
  if (r.kind != Reply::Kind::kNoAnswer) {
    rec.reply = r;
    rec.replied_at = Now();
    rec.reply_bytes = status == ARES_SUCCESS ? alen : 0;
  }
  if (finished_) return;
  Apply(model_->OnReply(rec.query.id, r));
}

void Lookup::Finish(std::optional<Result> forced) {
  if (finished_) return;
  finished_ = true;
  deadline_.cancel();
  guard_.cancel();
  outcome_.duration = Now();
  outcome_.result = forced ? *forced : model_->result();
  outcome_.note = model_->note();
  // Posted: we may be inside ares_process_fd, where cancelling the channel is not safe.
  boost::asio::post(io_, [self = shared_from_this()] {
    self->handed_over_ = true;
    // What left the socket, in the order it did (a TCP question leaves once its connection is
    // up, possibly after a later UDP one); a question c-ares could not write is not counted.
    auto& q = self->outcome_.queries;
    self->outcome_.not_sent =
        static_cast<int>(std::erase_if(q, [](const QueryRecord& r) { return !r.on_wire; }));
    std::stable_sort(q.begin(), q.end(), [](const QueryRecord& a, const QueryRecord& b) {
      return a.sent_at < b.sent_at;
    });
    self->pool_->CancelAll();
    if (self->done_) {
      auto done = std::move(self->done_);
      self->done_ = nullptr;
      done(std::move(self->outcome_));
    }
  });
}

}  // namespace podnet::probes::dns
