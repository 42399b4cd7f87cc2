#include "exporter/probes/dns/resolver_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "exporter/probes/dns/answer.h"

namespace podnet::probes::dns {

using std::chrono::milliseconds;

const char* QTypeName(QType t) { return t == QType::kA ? "A" : "AAAA"; }

std::string RcodeName(int rcode) {
  switch (rcode) {
    case kNoError:
      return "NOERROR";
    case kFormErr:
      return "FORMERR";
    case kServFail:
      return "SERVFAIL";
    case kNxDomain:
      return "NXDOMAIN";
    case kNotImp:
      return "NOTIMP";
    case kRefused:
      return "REFUSED";
    default:
      return "RCODE" + std::to_string(rcode);
  }
}

const char* ResultName(Result r) {
  switch (r) {
    case Result::kSuccess:
      return "success";
    case Result::kNxDomain:
      return "nxdomain";
    case Result::kNoData:
      return "nodata";
    case Result::kServFail:
      return "servfail";
    case Result::kTimeout:
      return "timeout";
    case Result::kError:
      return "error";
  }
  return "error";
}

namespace {

struct NameShape {
  int dots = 0;
  bool trailing_dot = false;
};

}  // namespace

bool Encodable(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.empty() || name.size() > 253) return false;
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t dot = name.find('.', start);
    std::size_t len = (dot == std::string_view::npos ? name.size() : dot) - start;
    if (len == 0 || len > 63) return false;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

std::optional<std::string> MuslQuery(std::string_view name, QType qtype) {
  name = name.substr(0, std::min<std::size_t>(name.size(), 255));  // strnlen(dname, 255)
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.size() > 253) return std::nullopt;
  // A second trailing dot is not a label: it is never checked, and stays in the message.
  bool dot_left = !name.empty() && name.back() == '.';
  std::string_view labels = dot_left ? name.substr(0, name.size() - 1) : name;
  std::string msg(12, '\0');
  msg[2] = 0x01;  // RD (opcode QUERY); lookup_name.c clears the AD byte
  msg[5] = 0x01;  // QDCOUNT 1
  // Every label 1..63 bytes (an empty one, e.g. of "a..b" or ".a", is refused); the root
  // ("" after the one trailing dot) has none.
  for (std::size_t start = 0; !labels.empty() || dot_left;) {
    std::size_t dot = labels.find('.', start);
    std::size_t end = dot == std::string_view::npos ? labels.size() : dot;
    if (end == start || end - start > 63) return std::nullopt;
    msg += static_cast<char>(end - start);
    msg.append(labels.substr(start, end - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  auto type = static_cast<char>(static_cast<std::uint16_t>(qtype));
  msg += dot_left ? '.' : '\0';  // the name's end: its terminating zero, or the stray dot
  msg += std::string{'\0', type, '\0', '\x01'};
  if (dot_left) msg += '\0';
  return msg;
}

namespace {

NameShape Shape(const std::string& name) {
  NameShape s;
  s.dots = static_cast<int>(std::count(name.begin(), name.end(), '.'));
  s.trailing_dot = !name.empty() && name.back() == '.';
  return s;
}

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

std::unique_ptr<ResolverModel> MakeGlibcModel(const ResolvConf& conf, std::string name) {
  return std::make_unique<GlibcModel>(conf, std::move(name));
}

std::unique_ptr<ResolverModel> MakeMuslModel(const ResolvConf& conf, std::string name) {
  return std::make_unique<MuslModel>(conf, std::move(name));
}

std::unique_ptr<ResolverModel> MakeModel(Libc libc, const ResolvConf& conf, std::string name) {
  if (libc == Libc::kGlibc) return MakeGlibcModel(conf, std::move(name));
  return MakeMuslModel(conf, std::move(name));
}

}  // namespace podnet::probes::dns
