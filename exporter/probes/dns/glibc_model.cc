// glibc's stub resolver as a model (resolver_model.h: MakeGlibcModel).
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
// glibc
// ---------------------------------------------------------------------------------------------

// h_errno values of __res_context_query (netdb.h) plus ECONNREFUSED from __res_context_send.
enum class HErrno { kSuccess, kHostNotFound, kNoData, kTryAgain, kNoRecovery, kConnRefused };

class GlibcModel : public ResolverModel {
 public:
  GlibcModel(const ResolvConf& conf, std::string name)
      : conf_(conf), name_(std::move(name)), shape_(Shape(name_)) {
    qtypes_ =
        conf_.no_aaaa ? std::vector<QType>{QType::kA} : std::vector<QType>{QType::kA, QType::kAAAA};
    single_request_ = conf_.single_request || conf_.single_request_reopen;
    reopen_ = conf_.single_request_reopen;
    sequential_ = qtypes_.size() > 1 && single_request_;
  }

  Actions Start() override {
    if (shape_.dots >= conf_.ndots || shape_.trailing_dot) {
      phase_ = Phase::kAsIsFirst;
      return BeginName(name_);
    }
    return AfterAsIsFirst();
  }

  Actions OnReply(int id, const Reply& reply) override {
    auto it = pending_.find(id);
    if (done_ || it == pending_.end()) return {};
    QType qt = it->second;
    pending_.erase(it);
    Actions a;
    if (reply.kind == Reply::Kind::kConnRefused) {
      // send_dg: ECONNREFUSED on this server → next server; gotsomewhere stays as it is.
      return NextServer();
    }
    if (reply.kind == Reply::Kind::kNoAnswer) {  // lost: as if its time ran out
      got_somewhere_ = true;
      return pending_.empty() ? WindowOver() : Actions{};
    }
    got_somewhere_ = true;
    got_answer_ = true;
    last_rcode_ = reply.rcode;  // hp->rcode: the answer buffer keeps the last reply
    if (reply.truncated && !tcp_) {
      // send_dg: TC set → v_circuit = 1; goto same_ns: the same server over TCP (send_vc).
      tcp_ = true;
      return SendToServer();
    }
    bool bad = reply.rcode == kServFail || reply.rcode == kNotImp || reply.rcode == kRefused;
    if (!bad) replies_[qt] = reply;
    answered_.push_back(qt);
    if (sequential_ && bad && answered_.size() == 1) {
      // send_dg "next_ns" with a second query to come: recvresp1 is set but the socket is not
      // polled for writing again, so the second question never goes out; the window runs out.
      return {};
    }
    if (sequential_ && qt == qtypes_.front() && answered_.size() == 1) {
      // single-request: the second question goes out once the first is answered;
      // single-request-reopen: on a new socket (send_dg: __res_iclose, reopen).
      if (reopen_) ++socket_;
      a.send.push_back(Make(qtypes_[1]));
      return a;
    }
    if (!pending_.empty()) return {};
    if (replies_.empty()) return NextServer();  // every reply SERVFAIL/NOTIMP/REFUSED
    return NameAnswered();
  }

  Actions OnDeadline() override {
    if (done_) return {};
    return WindowOver();
  }

  Result result() const override { return result_; }
  std::string note() const override { return note_; }

  milliseconds MaxDuration() const override {
    // Every name tried: as-is + search list (+ as-is); each costs attempts × Σ server timeouts
    // (×2 with single-request, the second question starting after the first's timeout).
    // A lost reply of a pair runs a server's window up to 3 times (parallel, single-request,
    // single-request-reopen).
    milliseconds per_name{0};
    for (int ns = 0; ns < Nscount(); ++ns) per_name += ServerTimeout(ns);
    per_name *= conf_.attempts * (qtypes_.size() > 1 ? 3 : 1);
    // Answers of a few thousand records (65,535 bytes over TCP) run the lookup up to 9 times
    // (1,024 bytes doubled to 262,144; answer.h); the first runs end at that answer, so the
    // bound keeps room for one more whole walk, not eight.
    return per_name * static_cast<int>(conf_.search.size() + 1) * 2;
  }

 private:
  enum class Phase { kAsIsFirst, kSearch, kAsIsLast };

  int Nscount() const { return static_cast<int>(conf_.nameservers.size()); }

  // res_send.c send_dg: "seconds = (statp->retrans << ns); if (ns > 0) seconds /= nscount;
  // if (seconds <= 0) seconds = 1".
  milliseconds ServerTimeout(int ns) const {
    if (conf_.timeout_s <= 0) return milliseconds(1000);
    long s = static_cast<long>(conf_.timeout_s) << ns;
    if (ns > 0) s /= Nscount();
    return milliseconds(std::max(1L, s) * 1000);
  }

  WireQuery Make(QType qt) {
    WireQuery q;
    q.id = next_id_++;
    q.name = current_;
    q.qtype = qt;
    q.server = ns_;
    q.tcp = tcp_ || conf_.use_vc;
    // res_send.c sends the buffers __res_context_query made for this name on every try,
    // server and retry: one DNS ID per (name, type).
    auto [first, fresh] = first_id_.emplace(qt, q.id);
    if (!fresh) q.same_id_as = first->second;
    q.socket = socket_;
    q.pass = pass_;
    pending_[q.id] = qt;
    return q;
  }

  // __res_context_querydomain → __res_context_query → __res_context_send for one name.
  Actions BeginName(std::string name) {
    current_ = std::move(name);
    try_ = 0;
    ns_ = 0;
    tcp_ = false;
    first_id_.clear();
    if (!Encodable(current_)) {
      // res_mkquery.c → ns_name.c ns_name_pton refuses it (EMSGSIZE): __res_context_query sets
      // NO_RECOVERY without sending (getaddrinfo, measured: EAI_NONAME).
      note_ = "glibc cannot put " + current_ +
              " in a question (resolv/ns_name.c: empty label, label over 63 or name over 253 "
              "bytes), nothing sent; getaddrinfo: Name or service not known";
      return NameDone(HErrno::kNoRecovery);
    }
    if (conf_.attempts <= 0) {
      // res_send.c: "for (try = 0; try < statp->retry; try++)" never runs; gotsomewhere is 0:
      // ECONNREFUSED, which ends __res_context_search's walk.
      note_ = "glibc sends nothing with attempts:" + std::to_string(conf_.attempts) +
              " (resolv/res_send.c: zero tries, ECONNREFUSED); getaddrinfo: Temporary failure "
              "in name resolution";
      return NameDone(HErrno::kConnRefused);
    }
    return SendToServer();
  }

  Actions SendToServer() {
    pending_.clear();
    replies_.clear();
    answered_.clear();
    Actions a;
    if (sequential_) {
      a.send.push_back(Make(qtypes_.front()));
    } else {
      for (QType qt : qtypes_) a.send.push_back(Make(qt));
    }
    a.wait = ServerTimeout(ns_);
    return a;
  }

  // res_send.c send_dg, poll timed out (or the last outstanding question was lost). With one
  // usable reply of the pair in hand ("resplen > 1 && (recvresp1 || recvresp2)"): the first
  // time, switch to single-request (RES_SNGLKUP) and send the pair again, one after the other,
  // on the same socket with the same IDs and a fresh window ("goto retry"); the second time,
  // switch to single-request-reopen (RES_SNGLKUPREOP) and do it again on a new socket ("goto
  // retry_reopen"); the third time, use the one reply ("*resplen2 = 1"). The switch stays in
  // the resolver state (statp->options) for the rest of the walk. Otherwise: the next server.
  Actions WindowOver() {
    got_somewhere_ = true;  // send_dg: a timeout sets *gotsomewhere
    pending_.clear();
    if (replies_.empty()) return NextServer();
    // send_vc (TCP) has no such retry (nor a read timeout: the model's window stands in).
    if (qtypes_.size() < 2 || reopen_ || tcp_ || conf_.use_vc) return NameAnswered();
    if (single_request_) {
      reopen_ = true;
      ++socket_;
    }
    single_request_ = true;
    sequential_ = true;
    return SendToServer();
  }

  Actions NextServer() {
    pending_.clear();
    tcp_ = false;
    if (++ns_ >= Nscount()) {
      ns_ = 0;
      if (++try_ >= conf_.attempts) {
        // __res_context_send returns -1: TRY_AGAIN, or ECONNREFUSED when no server ever
        // answered nor timed out.
        return NameFailed(got_somewhere_ ? HErrno::kTryAgain : HErrno::kConnRefused);
      }
    }
    return SendToServer();
  }

  // __res_context_query's verdict on the replies in hand (hp = first, hp2 = second or hp).
  Actions NameAnswered() {
    const Reply* hp = nullptr;
    const Reply* hp2 = nullptr;
    for (QType qt : qtypes_) {
      auto it = replies_.find(qt);
      if (it == replies_.end()) continue;
      (hp ? hp2 : hp) = &it->second;
    }
    if (!hp2) hp2 = hp;
    auto good = [](const Reply* r) { return r->rcode == kNoError && r->ancount > 0; };
    if (good(hp) || good(hp2)) return NameDone(HErrno::kSuccess);
    int rc = hp->rcode == kNoError ? hp2->rcode : hp->rcode;
    switch (rc) {
      case kNxDomain:
        return NameDone(HErrno::kHostNotFound);
      case kServFail:
        return NameDone(HErrno::kTryAgain);
      case kNoError:
        return NameDone(HErrno::kNoData);
      default:
        return NameDone(HErrno::kNoRecovery);
    }
  }

  Actions NameFailed(HErrno h) { return NameDone(h); }

  // __res_context_search: what the outcome of one name means for the walk.
  Actions NameDone(HErrno h) {
    pending_.clear();
    h_errno_ = h;
    if (h == HErrno::kSuccess) return ReadAnswers();
    switch (phase_) {
      case Phase::kAsIsFirst:
        if (shape_.trailing_dot) return FinishWith(h);
        saved_herrno_ = h;
        tried_as_is_ = true;
        return AfterAsIsFirst();
      case Phase::kSearch: {
        if (h == HErrno::kConnRefused) return Finish(Result::kError);
        bool walk_on = false;
        if (h == HErrno::kNoData) {
          got_nodata_ = true;
          walk_on = true;
        } else if (h == HErrno::kHostNotFound) {
          walk_on = true;
        } else if (h == HErrno::kTryAgain && last_rcode_ == kServFail) {
          got_servfail_ = true;
          walk_on = true;
        }
        if (walk_on) {
          if (auto a = NextSearchDomain()) return *a;
        }
        return AsIsLast();
      }
      case Phase::kAsIsLast:
        return FinishWalk();
    }
    return Finish(Result::kError);
  }

  // nss_dns gaih_getanswer over getaddrinfo's buffer: what the walk's answers give the
  // application; answers that do not fit run the whole lookup again with twice the buffer.
  Actions ReadAnswers() {
    // The replies in the order they came (send_dg/send_vc: the first into the first buffer).
    std::vector<std::string> got;
    for (QType qt : answered_) {
      if (replies_.count(qt)) got.push_back(Message(qt));
    }
    got.resize(2);
    std::size_t buffer = kGlibcFirstBuffer << pass_;
    switch (GlibcReadAnswers(got[0], got[1], buffer)) {
      case GlibcVerdict::kAddresses:
        return Finish(Result::kSuccess);
      case GlibcVerdict::kNoAddress:
        note_ = "glibc: no address in the answers to " + current_ +
                " (a CNAME alone, or records of other names or types): nss_dns NOTFOUND, "
                "getaddrinfo: Name or service not known (resolv/nss_dns/dns-host.c "
                "gaih_getanswer_slice)";
        return Finish(Result::kNxDomain);
      case GlibcVerdict::kTooSmall:
        break;
    }
    // gaih_inet: NSS_STATUS_TRYAGAIN with ERANGE → scratch_buffer_grow, call
    // _nss_dns_gethostbyname4_r again: a new __res_context_search from the first name.
    ++pass_;
    note_ = fmt::format(
        "glibc ran the lookup {} times: the answers did not fit getaddrinfo's {}-byte buffer "
        "(ERANGE), so it doubled it and asked every question again "
        "(sysdeps/posix/getaddrinfo.c, resolv/nss_dns/dns-host.c)",
        pass_ + 1, buffer);
    phase_ = Phase::kSearch;
    domain_index_ = 0;
    searched_ = root_on_list_ = tried_as_is_ = false;
    got_nodata_ = got_servfail_ = false;
    saved_herrno_.reset();
    h_errno_ = HErrno::kHostNotFound;
    return Start();
  }

  // The reply of type `qt` to the name in hand, as its bytes ("" when none).
  std::string Message(QType qt) const {
    auto it = replies_.find(qt);
    if (it == replies_.end()) return {};
    const Reply& r = it->second;
    if (!r.message.empty()) return r.message;
    return MakeAnswer(current_, static_cast<std::uint16_t>(qt), r.rcode, r.ancount, r.truncated);
  }

  Actions AfterAsIsFirst() {
    // Search when the name has no dot (RES_DEFNAMES) or has dots and no trailing dot
    // (RES_DNSRCH); both are on by default.
    if (!shape_.trailing_dot) {
      phase_ = Phase::kSearch;
      domain_index_ = 0;
      if (auto a = NextSearchDomain()) return *a;
    }
    return AsIsLast();
  }

  std::optional<Actions> NextSearchDomain() {
    if (domain_index_ >= conf_.search.size()) return std::nullopt;
    std::string d = conf_.search[domain_index_++];
    searched_ = true;
    if (!d.empty() && d[0] == '.') d.erase(0, 1);
    if (d.empty()) root_on_list_ = true;
    return BeginName(name_ + "." + d);
  }

  Actions AsIsLast() {
    if ((shape_.dots > 0 || !searched_ || !conf_.no_tld_query) &&
        !(tried_as_is_ || root_on_list_)) {
      phase_ = Phase::kAsIsLast;
      return BeginName(name_);
    }
    return FinishWalk();
  }

  Actions FinishWalk() {
    HErrno h = h_errno_;
    if (saved_herrno_) {
      h = *saved_herrno_;
    } else if (got_nodata_) {
      h = HErrno::kNoData;
    } else if (got_servfail_) {
      h = HErrno::kTryAgain;
      last_rcode_ = kServFail;
    }
    return FinishWith(h);
  }

  Actions FinishWith(HErrno h) {
    switch (h) {
      case HErrno::kSuccess:
        return Finish(Result::kSuccess);
      case HErrno::kHostNotFound:
        return Finish(Result::kNxDomain);
      case HErrno::kNoData:
        return Finish(Result::kNoData);
      case HErrno::kTryAgain:
        // TRY_AGAIN: every server SERVFAILed, or refused (REFUSED/NOTIMP: an error), or
        // was silent (a timeout).
        if (last_rcode_ == kServFail) return Finish(Result::kServFail);
        return Finish(got_answer_ ? Result::kError : Result::kTimeout);
      case HErrno::kNoRecovery:
      case HErrno::kConnRefused:
        return Finish(Result::kError);
    }
    return Finish(Result::kError);
  }

  Actions Finish(Result r) {
    done_ = true;
    result_ = r;
    pending_.clear();
    Actions a;
    a.done = true;
    return a;
  }

  ResolvConf conf_;
  std::string name_;
  NameShape shape_;
  std::vector<QType> qtypes_;
  bool sequential_ = false;
  bool single_request_ = false, reopen_ = false;  // RES_SNGLKUP, RES_SNGLKUPREOP
  int socket_ = 0;
  std::map<QType, int> first_id_;

  Phase phase_ = Phase::kSearch;
  std::size_t domain_index_ = 0;
  bool searched_ = false, root_on_list_ = false, tried_as_is_ = false;
  bool got_nodata_ = false, got_servfail_ = false;
  std::optional<HErrno> saved_herrno_;
  HErrno h_errno_ = HErrno::kHostNotFound;

  std::string current_;
  int try_ = 0, ns_ = 0;
  bool tcp_ = false;
  bool got_somewhere_ = false;
  bool got_answer_ = false;
  int last_rcode_ = kNoError;
  std::map<int, QType> pending_;
  std::map<QType, Reply> replies_;
  std::vector<QType> answered_;

  int pass_ = 0;  // getaddrinfo's runs of the whole lookup so far, less one (ERANGE)
  int next_id_ = 1;
  bool done_ = false;
  Result result_ = Result::kError;
  std::string note_;
};

}  // namespace

std::unique_ptr<ResolverModel> MakeGlibcModel(const ResolvConf& conf, std::string name) {
  return std::make_unique<GlibcModel>(conf, std::move(name));
}

}  // namespace podnet::probes::dns
