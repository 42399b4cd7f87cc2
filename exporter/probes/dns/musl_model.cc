// musl's stub resolver as a model (resolver_model.h: MakeMuslModel).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "exporter/probes/dns/answer.h"
#include "exporter/probes/dns/name_shape.h"
#include "exporter/probes/dns/resolver_model.h"

namespace podnet::probes::dns {
namespace {

using std::chrono::milliseconds;

// ---------------------------------------------------------------------------------------------
// musl
// ---------------------------------------------------------------------------------------------

class MuslModel : public ResolverModel {
 public:
  MuslModel(const ResolvConf& conf, std::string name) : conf_(conf) {
    NameShape s = Shape(name);
    std::string bare = name;
    if (s.trailing_dot) bare.pop_back();
    // lookup_name.c: a name of 0 or 255+ bytes, or with two trailing dots, is EAI_NONAME.
    refused_ = name.empty() || name.size() >= 255 ||
               (s.trailing_dot && (bare.empty() || bare.back() == '.'));
    if (s.dots < conf_.ndots && !s.trailing_dot) {
      // name_from_dns_search: a domain is tried only when "z-p < 256 - l - 1".
      for (const auto& d : conf_.search) {
        if (d.size() < 256 - bare.size() - 1) candidates_.push_back(bare + "." + d);
      }
    }
    candidates_.push_back(bare);
    total_ = milliseconds(1000L * conf_.timeout_s);
    // res_msend.c: retry_interval = timeout / attempts (ms).
    retry_ = milliseconds(conf_.attempts > 0 ? total_.count() / conf_.attempts : total_.count());
    if (retry_.count() <= 0) retry_ = total_;
  }

  Actions Start() override {
    if (refused_) {
      note_ =
          "musl refuses the name before any question (src/network/lookup_name.c): Name "
          "does not resolve";
      return Finish(Result::kError);
    }
    return BeginName();
  }

  Actions OnReply(int id, const Reply& reply) override {
    auto it = sent_.find(id);
    if (done_ || it == sent_.end()) return {};
    auto [q, server] = it->second;
    if (reply.kind != Reply::Kind::kAnswer) return {};  // musl ignores what it cannot parse
    if (reply.rcode == kServFail) {
      saw_servfail_ = true;
      Actions a;
      if (servfail_retry_ > 0 && !answers_[q]) {
        --servfail_retry_;
        a.send.push_back(Make(q, server));
      }
      return a;
    }
    if (reply.rcode != kNoError && reply.rcode != kNxDomain) return {};  // ignored
    if (answers_[q]) return {};  // the first usable answer wins
    answers_[q] = reply;
    for (const auto& a : answers_) {
      if (!a) return {};
    }
    return NameDone();
  }

  Actions OnDeadline() override {
    if (done_) return {};
    elapsed_ += retry_;
    if (elapsed_ >= total_) return NameDone();
    Actions a = SendRound();
    a.wait = std::min(retry_, total_ - elapsed_);
    return a;
  }

  Result result() const override { return result_; }
  std::string note() const override { return note_; }

  milliseconds MaxDuration() const override {
    return total_ * static_cast<int>(candidates_.size());
  }

 private:
  WireQuery Make(std::size_t q, int server) {
    WireQuery w;
    w.id = next_id_++;
    w.name = candidates_[index_];
    w.qtype = q == 0 ? QType::kA : QType::kAAAA;
    w.server = server;
    // res_msend.c sends the same query buffers in every round and to every server: one ID.
    if (first_id_[q] != 0) {
      w.same_id_as = first_id_[q];
    } else {
      first_id_[q] = w.id;
    }
    w.raw = raw_[q];
    sent_[w.id] = {q, server};
    return w;
  }

  Actions BeginName() {
    answers_.assign(2, std::nullopt);
    sent_.clear();
    first_id_ = {0, 0};
    elapsed_ = milliseconds(0);
    const std::string& c = candidates_[index_];
    // A candidate ending in two dots (a search entry "." or "x.") is a malformed question that
    // still goes out byte for byte; res_mkquery refuses the others that are not names.
    bool malformed = c.size() >= 2 && c.ends_with("..");
    bool refused = false;
    for (std::size_t q = 0; q < 2; ++q) {
      auto msg = MuslQuery(c, q == 0 ? QType::kA : QType::kAAAA);
      refused = !msg;
      raw_[q] = msg && malformed ? *msg : std::string();
    }
    if (refused) {
      // res_mkquery.c returns -1; name_from_dns returns EAI_NONAME, which ends the walk.
      note_ = "musl cannot put " + candidates_[index_] +
              " in a question (src/network/res_mkquery.c), nothing sent: Name does not resolve";
      return Finish(Result::kError);
    }
    if (conf_.attempts <= 0) {
      // res_msend.c: "retry_interval = timeout / attempts" divides by zero: SIGFPE.
      note_ =
          "musl 1.2.3 divides by zero with attempts:0 (src/network/res_msend.c): "
          "getaddrinfo kills the process (SIGFPE), nothing sent";
      return Finish(Result::kError);
    }
    if (conf_.timeout_s <= 0) {
      // res_msend.c: "for (; t2-t0 < timeout; ...)" never runs: no reply, EAI_AGAIN.
      note_ = "musl sends nothing with timeout:0 (src/network/res_msend.c): Try again";
      return Finish(Result::kTimeout);
    }
    Actions a = SendRound();
    a.wait = std::min(retry_, total_);
    return a;
  }

  // One (re)transmission round: every unanswered question to every nameserver.
  Actions SendRound() {
    Actions a;
    // res_msend.c re-asks SERVFAILed questions at once within a budget per round; musl 1.2.3
    // on the wire (lab test): 2 × questions re-asks per round.
    servfail_retry_ = 2 * 2;
    for (std::size_t q = 0; q < answers_.size(); ++q) {
      if (answers_[q]) continue;
      for (int s = 0; s < static_cast<int>(conf_.nameservers.size()); ++s) {
        a.send.push_back(Make(q, s));
      }
    }
    return a;
  }

  // lookup_name.c name_from_dns: A's reply checked first, then AAAA's; then the addresses
  // __dns_parse finds in them (none: EAI_NONAME, the walk ends).
  Actions NameDone() {
    std::array<std::string, 2> messages;
    for (std::size_t q = 0; q < answers_.size(); ++q) {
      const auto& ans = answers_[q];
      if (!ans) return Finish(saw_servfail_ ? Result::kServFail : Result::kTimeout);  // EAI_AGAIN
      if (ans->rcode == kNxDomain) {
        // "return 0": try the next candidate, if any.
        if (++index_ < candidates_.size()) return BeginName();
        return Finish(Result::kNxDomain);
      }
      messages[q] = !ans->message.empty() ? ans->message
                                          : MakeAnswer(candidates_[index_], q == 0 ? 1 : 28,
                                                       ans->rcode, ans->ancount, ans->truncated);
    }
    if (MuslAddresses(messages[0], messages[1]) > 0) return Finish(Result::kSuccess);
    note_ = "musl: no address in the answers to " + candidates_[index_] +
            " (src/network/lookup_name.c name_from_dns): Name does not resolve";
    return Finish(Result::kNxDomain);
  }

  Actions Finish(Result r) {
    done_ = true;
    result_ = r;
    Actions a;
    a.done = true;
    return a;
  }

  ResolvConf conf_;
  std::vector<std::string> candidates_;
  std::size_t index_ = 0;
  milliseconds total_{0}, retry_{0}, elapsed_{0};
  std::vector<std::optional<Reply>> answers_;
  std::map<int, std::pair<std::size_t, int>> sent_;  // id → (question, server)
  std::array<int, 2> first_id_{0, 0};                // the id each query buffer first went as
  std::array<std::string, 2> raw_;                   // WireQuery::raw of A and AAAA
  int servfail_retry_ = 0;
  bool saw_servfail_ = false;
  bool refused_ = false;
  int next_id_ = 1;
  bool done_ = false;
  Result result_ = Result::kError;
  std::string note_;
};

}  // namespace

std::unique_ptr<ResolverModel> MakeMuslModel(const ResolvConf& conf, std::string name) {
  return std::make_unique<MuslModel>(conf, std::move(name));
}

}  // namespace podnet::probes::dns
