#include "exporter/probes/dns/explain.h"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>

#include "exporter/net/address.h"
#include "exporter/probes/dns/lookup.h"

namespace podnet::probes::dns {
namespace {

double Ms(std::chrono::nanoseconds d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s.empty() ? "(none)" : s;
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

  out << fmt::format("{:>10}  {:<5} {:<56} {:<18} {}\n", "t(ms)", "type", "question", "server",
                     "answer");
  int nxdomain = 0, nodata = 0;
  // Times from the first packet, as a capture shows them.
  std::chrono::nanoseconds t0 =
      outcome.queries.empty() ? std::chrono::nanoseconds(0) : outcome.queries.front().sent_at;
  for (const auto& q : outcome.queries) {
    std::string answer = "no answer (TIMEOUT)";
    if (q.reply && q.reply->kind == Reply::Kind::kConnRefused) {
      answer = fmt::format("connection refused at {:.3f} ms", Ms(q.replied_at - t0));
    } else if (q.reply) {
      const Reply& r = *q.reply;
      std::string what = RcodeName(r.rcode);
      if (r.rcode == kNoError && r.ancount == 0) {
        what = "NOERROR (NODATA)";
        ++nodata;
      }
      if (r.rcode == kNxDomain) ++nxdomain;
      answer = fmt::format("{}{}{} at {:.3f} ms (+{:.3f})", what,
                           r.ancount ? fmt::format(", {} answers", r.ancount) : "",
                           r.truncated ? ", TC" : "", Ms(q.replied_at - t0),
                           Ms(q.replied_at - q.sent_at));
    }
    out << fmt::format("{:>10.3f}  {:<5} {:<56} {:<18} {}\n", Ms(q.sent_at - t0),
                       QTypeName(q.query.qtype), q.query.name,
                       q.server + (q.query.tcp ? "/tcp" : ""), answer);
  }
  out << fmt::format(
      "\nresult {}: {} questions ({} NXDOMAIN, {} NODATA) in {:.3f} ms ({:.3f} ms of it on the "
      "wire)\n",
      ResultName(outcome.result), outcome.queries.size(), nxdomain, nodata, Ms(outcome.duration),
      Ms(outcome.duration - t0));
  if (!outcome.error.empty()) out << "error: " << outcome.error << "\n";
  return outcome.result == Result::kSuccess ? 0 : 1;
}

}  // namespace podnet::probes::dns
