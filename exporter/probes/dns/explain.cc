#include "exporter/probes/dns/explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>

#include "exporter/net/address.h"
#include "exporter/probes/dns/lookup.h"

namespace podnet::probes::dns {
namespace {

double Ms(std::chrono::nanoseconds d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Control bytes as C escapes: a CRLF resolv.conf leaves "b.test\r" in glibc's search list.
std::string Printable(const std::string& in) {
  std::string out;
  for (unsigned char c : in) {
    if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + Printable(x);
  return s.empty() ? "(none)" : s;
}

// One line per question that left the socket, in the order it did: its time from the first
// packet, type, name, server (and /tcp), then its answer and when it came (never before it left).
void PrintRows(const LookupOutcome& outcome, std::ostream& out) {
  out << fmt::format("{:>10}  {:<5} {:<56} {:<18} {}\n", "t(ms)", "type", "question", "server",
                     "answer");
  if (outcome.queries.empty()) return;
  std::chrono::nanoseconds t0 = outcome.queries.front().sent_at;
  for (const auto& q : outcome.queries) {
    std::string answer = outcome.result == Result::kTimeout ? "no answer (timeout)"
                                                            : "no answer before the walk ended";
    std::chrono::nanoseconds at = std::max(q.replied_at, q.sent_at);
    if (q.reply && q.reply->kind == Reply::Kind::kConnRefused) {
      answer =
          fmt::format("connection refused at {:.3f} ms (+{:.3f})", Ms(at - t0), Ms(at - q.sent_at));
    } else if (q.reply) {
      const Reply& r = *q.reply;
      std::string what = RcodeName(r.rcode);
      if (r.rcode == kNoError && r.ancount == 0) what = "NOERROR (NODATA)";
      answer = fmt::format("{}{}{} at {:.3f} ms (+{:.3f})", what,
                           r.ancount ? fmt::format(", {} answers", r.ancount) : "",
                           r.truncated ? ", TC" : "", Ms(at - t0), Ms(at - q.sent_at));
    }
    out << fmt::format("{:>10.3f}  {:<5} {:<56} {:<18} {}\n", Ms(q.sent_at - t0),
                       QTypeName(q.query.qtype), Printable(q.query.name),
                       q.server + (q.query.tcp ? "/tcp" : ""), answer);
  }
}

}  // namespace

int ExplainLookup(const std::string& name, const std::string& resolv_conf_path, Libc libc,
                  std::ostream& out) {
  bool readable = true;
  ResolvConf conf = LoadResolvConf(resolv_conf_path, libc, config::ProcessEnv(), &readable);
  std::vector<std::string> servers;
  for (const auto& ns : conf.nameservers)
    servers.push_back(net::FormatHostPort(ns.address, ns.port));
  out << fmt::format("{} as {} reads it{}:\n", resolv_conf_path, LibcName(libc),
                     readable ? "" : " (unreadable: defaults)");
  out << fmt::format("  nameservers {}\n  search {}\n  ndots:{} timeout:{} attempts:{}",
                     Join(servers), Join(conf.search), conf.ndots, conf.timeout_s, conf.attempts);
  if (libc == Libc::kGlibc) {
    std::vector<std::string> flags;
    if (conf.rotate) flags.push_back("rotate");
    if (conf.single_request) flags.push_back("single-request");
    if (conf.single_request_reopen) flags.push_back("single-request-reopen");
    if (conf.edns0) flags.push_back("edns0");
    if (conf.use_vc) flags.push_back("use-vc");
    if (conf.no_aaaa) flags.push_back("no-aaaa");
    if (conf.trust_ad) flags.push_back("trust-ad");
    if (conf.no_tld_query) flags.push_back("no-tld-query");
    for (const auto& f : flags) out << " " << f;
  }
  out << "\n\n";

  boost::asio::io_context io;
  auto pool = std::make_shared<ChannelPool>(io);
  LookupOutcome outcome;
  bool got = false;
  auto lookup = Lookup::Start(io, pool, conf, libc, name, [&](LookupOutcome o) {
    outcome = std::move(o);
    got = true;
  });
  io.run();
  if (!got) outcome.error = "lookup did not complete";

  if (!outcome.note.empty()) {
    // The libc ends the lookup before any question: its reason, and no table.
    out << outcome.note << "\n";  // names the libc and its source
  } else {
    PrintRows(outcome, out);
  }
  int nxdomain = 0, nodata = 0;
  for (const auto& q : outcome.queries) {
    if (q.reply && q.reply->kind == Reply::Kind::kAnswer) {
      nxdomain += q.reply->rcode == kNxDomain;
      nodata += q.reply->rcode == kNoError && q.reply->ancount == 0;
    }
  }
  std::chrono::nanoseconds t0 =
      outcome.queries.empty() ? outcome.duration : outcome.queries.front().sent_at;
  if (outcome.not_sent > 0) {
    out << fmt::format(
        "({} question{} the walk asked for never left the socket: the connection was refused "
        "before {} written; not counted)\n",
        outcome.not_sent, outcome.not_sent == 1 ? "" : "s",
        outcome.not_sent == 1 ? "it was" : "they were");
  }
  if (!outcome.error.empty()) out << "error: " << outcome.error << "\n";
  out << fmt::format(
      "\nresult {}: {} questions ({} NXDOMAIN, {} NODATA) in {:.3f} ms ({:.3f} ms of it on the "
      "wire)\n",
      ResultName(outcome.result), outcome.queries.size(), nxdomain, nodata, Ms(outcome.duration),
      Ms(outcome.duration - t0));
  return outcome.result == Result::kSuccess ? kExplainFound : kExplainNotFound;
}

}  // namespace podnet::probes::dns
