#include "exporter/responders/burst_server.h"

#include "exporter/responders/burst_server_impl.h"
#include "exporter/responders/burst_test.h"

namespace podnet::responders {

void BurstResponder::Impl::Dispatch(tcp::socket socket, const std::string& cookie,
                                    const Address& source) {
  for (auto& t : tests_) {
    if (t->cookie() == cookie) {
      if (t->wants_streams()) t->AddStream(std::move(socket));
      return;  // a stream for a test not expecting one: dropped
    }
  }
  auto d = admission_.Ask(source, Clock::now());
  if (d.bumped) {
    if (auto w = TakeWaiting(*d.bumped)) Deny(std::move(w->socket), busy_);
  }
  switch (d.verdict) {
    case BurstAdmission::Verdict::kAdmit:
      return StartTest(std::move(socket), cookie, source);
    case BurstAdmission::Verdict::kWait:
      Wait(std::move(socket), cookie, source);
      return Rebalance();
    case BurstAdmission::Verdict::kBusy:
      return Deny(std::move(socket), busy_);
    case BurstAdmission::Verdict::kPenalty:
      return Deny(std::move(socket), penalty_);
  }
}

void BurstResponder::Impl::StartTest(tcp::socket socket, const std::string& cookie,
                                     const Address& source) {
  auto t = std::make_shared<Test>(this, std::move(socket), cookie, source);
  tests_.push_back(t);
  active_ = static_cast<int>(tests_.size());
  t->Begin();
}

void BurstResponder::Impl::Wait(tcp::socket socket, const std::string& cookie,
                                const Address& source) {
  auto w = std::make_shared<Waiting>(std::move(socket), io_);
  w->cookie = cookie;
  w->source = source;
  waiting_[source] = w;
  w->timer.expires_after(kMaxWait);
  w->timer.async_wait([this, w](ErrorCode ec) {
    auto it = waiting_.find(w->source);
    if (ec || it == waiting_.end() || it->second != w) return;
    admission_.Withdraw(w->source);
    TakeWaiting(w->source);
    Deny(std::move(w->socket), busy_);
  });
  WatchWaiting(w);
}

// A waiting client sends nothing until PARAM_EXCHANGE: the connection becoming readable means
// it closed (it gave up: busy, as if refused) or broke the protocol (malformed).
void BurstResponder::Impl::WatchWaiting(const std::shared_ptr<Waiting>& w) {
  w->socket.async_wait(tcp::socket::wait_read, [this, w](ErrorCode ec) {
    auto it = waiting_.find(w->source);
    if (ec || it == waiting_.end() || it->second != w) return;
    char byte;
    ssize_t n = ::recv(w->socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return WatchWaiting(w);
    }
    admission_.Withdraw(w->source);
    TakeWaiting(w->source);
    ErrorCode ignored;
    w->socket.close(ignored);
    (n > 0 ? malformed_ : busy_).Count();
  });
}

std::shared_ptr<BurstResponder::Impl::Waiting> BurstResponder::Impl::TakeWaiting(
    const Address& source) {
  auto it = waiting_.find(source);
  if (it == waiting_.end()) return nullptr;
  auto w = it->second;
  waiting_.erase(it);
  ErrorCode ignored;
  w->timer.cancel();
  w->socket.cancel(ignored);  // its readiness wait completes as aborted; nothing was read
  return w;
}

void BurstResponder::Impl::Deny(tcp::socket socket, const ResponderDrop& why) {
  why.Count();
  auto s = std::make_shared<tcp::socket>(std::move(socket));
  auto byte = std::make_shared<char>(static_cast<char>(iperf3::kAccessDenied));
  boost::asio::async_write(*s, boost::asio::buffer(byte.get(), 1),
                           [s, byte](ErrorCode, std::size_t) {});
}

void BurstResponder::Impl::Rebalance() {
  if (rebalancing_) return;  // a preempted test's Remove, inside the loop below
  rebalancing_ = true;
  // Each pass starts a test or ends one: bounded by the slots and the line.
  for (int pass = 0; pass < 4 * (options_.max_clients + 16); ++pass) {
    auto now = Clock::now();
    if (auto source = admission_.Promote(now)) {
      if (auto w = TakeWaiting(*source)) {
        StartTest(std::move(w->socket), w->cookie, w->source);
      } else {
        admission_.Release(*source, Outcome::kRefused, now);  // cannot happen: kept in step
      }
      continue;
    }
    auto victim = admission_.Victim(now);
    if (!victim) break;
    // Its youngest test gives way (the older one has come further).
    auto it = std::find_if(tests_.rbegin(), tests_.rend(),
                           [&](const auto& t) { return t->source() == *victim; });
    if (it == tests_.rend()) break;
    auto t = *it;
    t->Preempt();
  }
  rebalancing_ = false;
}

void BurstResponder::Impl::Stop() {
  // Handlers still queued are destroyed with io_ (the last member to go), closing their
  // sockets; nothing they hold points back at this object's ownership.
  boost::asio::post(io_, [this] {
    ErrorCode ignored;
    acceptor_.close(ignored);
    for (auto& t : tests_) t->Close();
    tests_.clear();
    for (auto& p : pending_) p->socket.close(ignored);
    pending_.clear();
    for (auto& [source, w] : waiting_) {
      w->timer.cancel();
      w->socket.close(ignored);
    }
    waiting_.clear();
    io_.stop();
  });
  if (thread_.joinable()) thread_.join();
}

void BurstResponder::Impl::Remove(Test* t, Outcome outcome) {
  Address source = t->source();  // `t` may go with the list's reference
  tests_.remove_if([t](const std::shared_ptr<Test>& p) { return p.get() == t; });
  active_ = static_cast<int>(tests_.size());
  admission_.Release(source, outcome, Clock::now());
  Rebalance();
}

BurstResponder::BurstResponder(const config::kinds::burst::BurstResponderOptions& options,
                               prometheus::Registry& registry)
    : impl_(std::make_unique<Impl>(options, registry)) {
  impl_->Start();
}

BurstResponder::~BurstResponder() { impl_->Stop(); }

std::uint16_t BurstResponder::port() const { return impl_->port(); }
int BurstResponder::active_tests() const { return impl_->active(); }
void BurstResponder::AdmitSources(std::vector<boost::asio::ip::address> sources) {
  impl_->AdmitSources(std::move(sources));
}

}  // namespace podnet::responders
