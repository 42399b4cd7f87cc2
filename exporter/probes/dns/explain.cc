#include "exporter/probes/dns/explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <fstream>
#include <sstream>

#include "exporter/net/address.h"
#include "exporter/probes/dns/answer.h"

namespace podnet::probes::dns {
namespace {

double Ms(std::chrono::nanoseconds d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// "1 question", "2 questions", "0 questions".
std::string Count(long n, const char* noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
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

// A DNS name as the wire compares it: without one trailing dot, case-insensitive (ASCII).
std::string Key(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  std::string k(name);
  for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return k;
}

std::string DescribeReply(const std::optional<Reply>& r) {
  if (!r) return "no answer in time";
  if (r->kind == Reply::Kind::kConnRefused) return "connection refused";
  if (r->rcode == kNoError && r->ancount == 0) return "NODATA";
  return RcodeName(r->rcode) + (r->truncated ? " with TC" : "");
}

// The name's parts the rules speak of: as written without its trailing dot, its dots, and the
// candidate each search list entry makes of it.
struct NameParts {
  std::string base;
  bool absolute = false;
  int dots = 0;
  std::vector<std::string> candidates;  // per conf.search entry; a "." entry: the name itself
};

NameParts Parts(const ResolvConf& conf, const std::string& name) {
  NameParts p;
  p.absolute = !name.empty() && name.back() == '.';
  p.base = p.absolute ? name.substr(0, name.size() - 1) : name;
  p.dots = static_cast<int>(std::count(p.base.begin(), p.base.end(), '.'));
  for (const auto& d : conf.search) {
    std::string dom = d;
    if (!dom.empty() && dom.back() == '.') dom.pop_back();
    p.candidates.push_back(dom.empty() ? p.base : p.base + "." + dom);
  }
  return p;
}

// Why the walk asked for this candidate name at all (dots vs ndots, search list order).
std::string CandidateRule(const ResolvConf& conf, Libc libc, const NameParts& p,
                          const std::string& asked, const std::string& search_origin) {
  const std::string dots = fmt::format("{} {} ndots:{}", Count(p.dots, "dot"),
                                       p.dots >= conf.ndots ? ">=" : "<", conf.ndots);
  const std::size_t k = p.candidates.size();
  for (std::size_t i = 0; i < k; ++i) {
    if (Key(p.candidates[i]) != Key(asked) || Key(conf.search[i]).empty()) continue;
    std::string entry =
        fmt::format("search list entry {} of {} ({}{})", i + 1, k, Printable(conf.search[i]),
                    search_origin.empty() ? "" : ", from " + search_origin);
    if (p.dots < conf.ndots) return fmt::format("{}: the search list first, {}", dots, entry);
    return fmt::format("the name as written failed: {}", entry);
  }
  if (Key(asked) == Key(p.base)) {
    if (p.absolute) return "ends in a dot: absolute, asked as written, no search list";
    if (p.dots >= conf.ndots) return dots + ": as written first";
    bool dot_entry = std::any_of(conf.search.begin(), conf.search.end(),
                                 [](const std::string& d) { return Key(d).empty(); });
    if (k == 0) return dots + ", but no search list: as written";
    if (dot_entry) return dots + ": as written, where the search list's \".\" entry stands";
    return dots + (libc == Libc::kGlibc ? ": as written, after the search list"
                                        : ": the bare name last, after the search list");
  }
  return "a name this walk derived from " + Printable(p.base);
}

// One rule per row: the candidate's rule, and for a question asked again, why.
std::vector<std::string> Rules(const ResolvConf& conf, Libc libc, const std::string& name,
                               const LookupOutcome& o, const std::string& search_origin) {
  NameParts p = Parts(conf, name);
  std::vector<std::string> rules;
  const std::size_t ns = conf.nameservers.size();
  for (std::size_t i = 0; i < o.queries.size(); ++i) {
    const QueryRecord& q = o.queries[i];
    std::string rule = CandidateRule(conf, libc, p, q.query.name, search_origin);
    const QueryRecord* prev = nullptr;  // the same question, asked before
    for (std::size_t j = i; j-- > 0;) {
      if (Key(o.queries[j].query.name) == Key(q.query.name) &&
          o.queries[j].query.qtype == q.query.qtype) {
        prev = &o.queries[j];
        break;
      }
    }
    std::string why;
    if (q.query.pass > 0 && (!prev || prev->query.pass < q.query.pass)) {
      why = fmt::format(
          "getaddrinfo again with a {}-byte buffer: the answers did not fit {} bytes (ERANGE)",
          kGlibcFirstBuffer << q.query.pass, kGlibcFirstBuffer << (q.query.pass - 1));
    } else if (prev && q.query.tcp && !prev->query.tcp) {
      why = prev->reply && prev->reply->truncated ? "over TCP: the UDP answer was truncated (TC)"
                                                  : "over TCP";
    } else if (!prev && q.query.tcp) {
      why = "over TCP (use-vc)";
    } else if (!prev && libc == Libc::kGlibc && q.query.qtype == QType::kAAAA &&
               (conf.single_request || conf.single_request_reopen)) {
      why = fmt::format("{}: AAAA only after A's answer",
                        conf.single_request ? "single-request" : "single-request-reopen");
    } else if (prev && libc == Libc::kMusl) {
      if (prev->reply && prev->reply->kind == Reply::Kind::kAnswer &&
          prev->reply->rcode == kServFail) {
        why = "asked again at once after SERVFAIL (musl)";
      } else if (q.query.server != prev->query.server &&
                 q.sent_at - prev->sent_at < std::chrono::milliseconds(1)) {
        why = fmt::format("musl asks every nameserver at once (nameserver {} of {})",
                          q.query.server + 1, ns);
      } else {
        why = fmt::format("sent again: no answer within timeout/attempts ({} ms)",
                          conf.attempts > 0 ? conf.timeout_s * 1000 / conf.attempts : 0);
      }
    } else if (prev && q.query.server != prev->query.server) {
      why = fmt::format("next nameserver ({} of {}): the last gave {}", q.query.server + 1, ns,
                        DescribeReply(prev->reply));
    } else if (prev) {
      why = fmt::format("asked again (attempts:{}): the last try gave {}", conf.attempts,
                        DescribeReply(prev->reply));
    }
    rules.push_back(why.empty() ? rule : rule + "; " + why);
  }
  return rules;
}

// Search list entries the walk went past without asking, and why the libc skipped them.
std::vector<std::string> Skipped(const ResolvConf& conf, Libc libc, const std::string& name,
                                 const LookupOutcome& o) {
  NameParts p = Parts(conf, name);
  std::vector<std::string> lines;
  if (p.absolute || p.dots >= conf.ndots) return lines;  // glibc after as-is: ends on failure
  auto asked = [&](const std::string& n) {
    return std::any_of(o.queries.begin(), o.queries.end(),
                       [&](const QueryRecord& q) { return Key(q.query.name) == Key(n); });
  };
  bool later = asked(p.base);
  for (std::size_t i = p.candidates.size(); i-- > 0;) {
    const std::string& c = p.candidates[i];
    if (asked(c)) {
      later = true;
      continue;
    }
    if (!later || Key(conf.search[i]).empty()) continue;
    std::string why;
    if (libc == Libc::kMusl && p.base.size() + 1 + conf.search[i].size() > 255) {
      why = fmt::format("the name + \".\" + the entry is {} bytes, more than musl's 255",
                        p.base.size() + 1 + conf.search[i].size());
    } else if (!Encodable(c)) {
      why = "it cannot be a question (a label over 63 bytes, an empty label, or over 253 bytes)";
    } else {
      why = "not asked";
    }
    lines.insert(lines.begin(), fmt::format("skipped search list entry {} of {} ({}): {}", i + 1,
                                            p.candidates.size(), Printable(conf.search[i]), why));
  }
  return lines;
}

std::optional<Reply> Recorded(const LookupOutcome& seen, const WireQuery& q, bool* assumed) {
  bool asked = false;
  for (const auto& r : seen.queries) {
    if (Key(r.query.name) != Key(q.name) || r.query.qtype != q.qtype || r.query.tcp != q.tcp ||
        r.query.server != q.server)
      continue;
    asked = true;
    if (r.reply) return r.reply;
  }
  if (asked) return std::nullopt;  // asked, never answered: silence
  int to_server = 0, refused = 0, answered = 0;
  for (const auto& r : seen.queries) {
    if (r.query.server != q.server) continue;
    ++to_server;
    if (r.reply) (r.reply->kind == Reply::Kind::kConnRefused ? refused : answered)++;
  }
  if (to_server > 0 && refused == to_server) {
    Reply r;
    r.kind = Reply::Kind::kConnRefused;
    return r;
  }
  if (to_server > 0 && answered == 0 && refused == 0) return std::nullopt;
  *assumed = true;
  Reply nx;
  nx.rcode = kNxDomain;
  return nx;
}

// The trailing-dot and lower-ndots lines under a walk, and a Count() with the change.
std::string Cost(const ReplayedWalk& alt, std::size_t actual) {
  long d = alt.questions - static_cast<long>(actual);
  return fmt::format("{} ({}{}), result {}", Count(alt.questions, "question"), d > 0 ? "+" : "",
                     d == 0 ? "same" : std::to_string(d), ResultName(alt.result));
}

}  // namespace

ReplayedWalk ReplayWalk(const ResolvConf& conf, Libc libc, const std::string& name,
                        const LookupOutcome& seen) {
  ReplayedWalk w;
  auto model = MakeModel(libc, conf, name);
  std::deque<std::pair<int, Reply>> inbox;
  Actions a = model->Start();
  for (int step = 0; step < 10000; ++step) {
    for (const WireQuery& q : a.send) {
      ++w.questions;
      if (auto r = Recorded(seen, q, &w.assumed)) inbox.emplace_back(q.id, *r);
    }
    if (a.done) break;
    if (!inbox.empty()) {
      auto [id, r] = inbox.front();
      inbox.pop_front();
      a = model->OnReply(id, r);
    } else {
      a = model->OnDeadline();  // nothing more will come: the model's wait passes
    }
  }
  w.result = model->result();
  return w;
}

std::string SearchOrigin(const std::string& text, Libc libc, const config::EnvLookup& env) {
  if (libc == Libc::kGlibc && env) {
    if (auto v = env("LOCALDOMAIN")) return "LOCALDOMAIN";
  }
  std::string last;
  std::istringstream in(text);
  std::string line;
  for (int n = 0; n < 100000 && std::getline(in, line); ++n) {
    for (const char* kw : {"domain", "search"}) {
      std::size_t l = std::char_traits<char>::length(kw);
      if (line.size() > l && line.compare(0, l, kw) == 0 && (line[l] == ' ' || line[l] == '\t'))
        last = kw;
    }
  }
  return last == "domain" ? "the domain line" : "";
}

namespace {

// The resolv.conf as `libc` reads it: nameservers, search list (and where it came from), the
// options the walk depends on.
void PrintConf(std::ostream& out, const ResolvConf& conf, Libc libc, const std::string& source,
               const std::string& search_origin, bool readable) {
  std::vector<std::string> servers;
  for (const auto& ns : conf.nameservers)
    servers.push_back(net::FormatHostPort(ns.address, ns.port));
  out << fmt::format("{} as {} reads it{}:\n", source, LibcName(libc),
                     readable ? "" : " (unreadable: defaults)");
  out << fmt::format("  nameservers {}\n  search {}{}\n  ndots:{} timeout:{} attempts:{}",
                     Join(servers), Join(conf.search),
                     search_origin.empty() ? "" : " (from " + search_origin + ")", conf.ndots,
                     conf.timeout_s, conf.attempts);
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
}

// Runs the real lookup of `name` on `io` (c-ares, the model of `libc`): its outcome, or one
// whose error says it did not complete within the model's longest walk + 2 s.
LookupOutcome RunLookup(boost::asio::io_context& io, const ResolvConf& conf, Libc libc,
                        const std::string& name) {
  LookupOutcome outcome;
  auto pool = std::make_shared<ChannelPool>(io);
  bool got = false;
  auto lookup = Lookup::Start(io, pool, conf, libc, name, [&](LookupOutcome o) {
    outcome = std::move(o);
    got = true;
  });
  const auto until = std::chrono::steady_clock::now() + MakeModel(libc, conf, name)->MaxDuration() +
                     std::chrono::seconds(2);
  while (!got && std::chrono::steady_clock::now() < until) {
    if (io.stopped()) io.restart();  // out of work after an earlier walk on the same context
    io.run_one_for(std::chrono::milliseconds(50));
  }
  if (!got) {
    lookup->Cancel();
    for (int i = 0; !got && i < 100; ++i) {
      if (io.stopped()) io.restart();
      io.run_one_for(std::chrono::milliseconds(10));
    }
    if (!got) outcome.error = "lookup did not complete";
  }
  return outcome;
}

// One line per question (when, type, name, server, answer) with the rule that sent it, the
// candidates the libc skipped, and its note.
void PrintQuestions(std::ostream& out, const ResolvConf& conf, Libc libc, const std::string& name,
                    const LookupOutcome& outcome, const std::vector<std::string>& rules) {
  if (!outcome.note.empty() && outcome.queries.empty()) {
    // The libc ends the lookup before any question: its reason, and no table.
    out << outcome.note << "\n";  // names the libc and its source
  } else {
    out << fmt::format("{:>10}  {:<5} {:<56} {:<18} {}\n", "t(ms)", "type", "question", "server",
                       "answer");
    std::chrono::nanoseconds t0 =
        outcome.queries.empty() ? std::chrono::nanoseconds{0} : outcome.queries.front().sent_at;
    for (std::size_t i = 0; i < outcome.queries.size(); ++i) {
      const QueryRecord& q = outcome.queries[i];
      std::string answer = outcome.result == Result::kTimeout ? "no answer (timeout)"
                                                              : "no answer before the walk ended";
      std::chrono::nanoseconds at = std::max(q.replied_at, q.sent_at);
      if (q.reply && q.reply->kind == Reply::Kind::kConnRefused) {
        answer = fmt::format("connection refused at {:.3f} ms (+{:.3f})", Ms(at - t0),
                             Ms(at - q.sent_at));
      } else if (q.reply) {
        const Reply& r = *q.reply;
        std::string what = RcodeName(r.rcode);
        if (r.rcode == kNoError && r.ancount == 0) what = "NOERROR (NODATA)";
        answer = fmt::format("{}{}{} at {:.3f} ms (+{:.3f})", what,
                             r.ancount ? ", " + Count(r.ancount, "answer") : "",
                             r.truncated ? ", TC" : "", Ms(at - t0), Ms(at - q.sent_at));
      }
      out << fmt::format("{:>10.3f}  {:<5} {:<56} {:<18} {}\n", Ms(q.sent_at - t0),
                         QTypeName(q.query.qtype), Printable(q.query.name),
                         q.server + (q.query.tcp ? "/tcp" : ""), answer);
      out << fmt::format("{:>10}  why: {}\n", "", rules[i]);
    }
    for (const auto& s : Skipped(conf, libc, name, outcome)) out << s << "\n";
    // A candidate the libc refused on the way (the walk went on): its reason, with its source.
    if (!outcome.note.empty()) out << "(" << outcome.note << ")\n";
  }
}

// The walk's result: questions, NXDOMAIN and NODATA answers, time; questions never sent.
void PrintResult(std::ostream& out, const LookupOutcome& outcome) {
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
        "({} the walk asked for never left the socket: the connection was refused "
        "before {} written; not counted)\n",
        Count(outcome.not_sent, "question"), outcome.not_sent == 1 ? "it was" : "they were");
  }
  if (!outcome.error.empty()) out << "error: " << outcome.error << "\n";
  out << fmt::format(
      "\nresult {}: {} ({} NXDOMAIN, {} NODATA) in {:.3f} ms ({:.3f} ms of it on the wire)\n",
      ResultName(outcome.result), Count(static_cast<long>(outcome.queries.size()), "question"),
      nxdomain, nodata, Ms(outcome.duration), Ms(outcome.duration - t0));
}

// The alternatives, priced by the same model with the nameservers' answers of this walk: a
// trailing dot, and an ndots as low as the name's dots; stored in `e`.
void PrintAlternatives(std::ostream& out, const ResolvConf& conf, Libc libc,
                       const std::string& name, ExplainedWalk& e) {
  const LookupOutcome& outcome = e.outcome;
  NameParts p = Parts(conf, name);
  const std::size_t asked = outcome.queries.size();
  auto assumed = [&](const ReplayedWalk& w, const std::string& what) {
    return w.assumed ? fmt::format(" ({} not asked in this walk: taken as NXDOMAIN)", what)
                     : std::string();
  };
  if (p.absolute) {
    e.trailing_dot.questions = -1;
    out << "alternatives: none cheaper in questions: the name is absolute already\n";
  } else {
    e.trailing_dot = ReplayWalk(conf, libc, name + ".", outcome);
    out << fmt::format("with a trailing dot ({}.): {}{}\n", Printable(name),
                       Cost(e.trailing_dot, asked), assumed(e.trailing_dot, Printable(name) + "."));
    if (p.dots < conf.ndots) {
      ResolvConf lower = conf;
      lower.ndots = p.dots;
      e.lower_ndots = p.dots;
      e.with_lower_ndots = ReplayWalk(lower, libc, name, outcome);
      out << fmt::format("with ndots:{} (the name's {}, as written first): {}{}\n", p.dots,
                         Count(p.dots, "dot"), Cost(e.with_lower_ndots, asked),
                         assumed(e.with_lower_ndots, Printable(name)));
    } else {
      out << fmt::format(
          "a lower ndots changes nothing: {} >= ndots:{} goes out as written "
          "first\n",
          Count(p.dots, "dot"), conf.ndots);
    }
  }
}

// Side by side: the same name under each libc (result, questions, time, the alternatives).
void PrintSideBySide(std::ostream& out, const std::string& name,
                     const std::vector<std::pair<Libc, ExplainedWalk>>& walks) {
  const std::size_t width = std::max<std::size_t>(24, name.size() + 2);
  auto line = [&](std::string text) {
    text.erase(text.find_last_not_of(' ') + 1);
    out << text << "\n";
  };
  std::string head = fmt::format("\n{:<{}}", Printable(name), width);
  for (const auto& w : walks) head += fmt::format("{:<28}", LibcName(w.first));
  line(head);
  auto row = [&](const std::string& label, auto cell) {
    std::string text = fmt::format("{:<{}}", label, width);
    for (const auto& w : walks) text += fmt::format("{:<28}", cell(w.second));
    line(text);
  };
  row("result", [](const ExplainedWalk& w) { return std::string(ResultName(w.outcome.result)); });
  row("questions", [](const ExplainedWalk& w) {
    return Count(static_cast<long>(w.outcome.queries.size()), "question");
  });
  row("time",
      [](const ExplainedWalk& w) { return fmt::format("{:.3f} ms", Ms(w.outcome.duration)); });
  row("with a trailing dot", [](const ExplainedWalk& w) {
    return w.trailing_dot.questions < 0
               ? std::string("(absolute already)")
               : fmt::format("{}, {}", Count(w.trailing_dot.questions, "question"),
                             ResultName(w.trailing_dot.result));
  });
  const int ndots = walks.front().second.lower_ndots;
  row(ndots < 0 ? std::string("with a lower ndots") : fmt::format("with ndots:{}", ndots),
      [](const ExplainedWalk& w) {
        return w.lower_ndots < 0
                   ? std::string("(no change)")
                   : fmt::format("{}, {}", Count(w.with_lower_ndots.questions, "question"),
                                 ResultName(w.with_lower_ndots.result));
      });
}

}  // namespace

ExplainedWalk ExplainWalk(boost::asio::io_context& io, const ResolvConf& conf, Libc libc,
                          const std::string& name, const std::string& source,
                          const std::string& search_origin, std::ostream& out, bool readable) {
  PrintConf(out, conf, libc, source, search_origin, readable);
  ExplainedWalk e;
  e.outcome = RunLookup(io, conf, libc, name);
  e.rules = Rules(conf, libc, name, e.outcome, search_origin);
  PrintQuestions(out, conf, libc, name, e.outcome, e.rules);
  PrintResult(out, e.outcome);
  PrintAlternatives(out, conf, libc, name, e);
  return e;
}

int ExplainLookup(const std::string& name, const std::string& resolv_conf_path,
                  const std::vector<Libc>& libcs, std::ostream& out) {
  std::string text;
  bool text_readable = false;
  {
    std::ifstream in(resolv_conf_path, std::ios::binary);
    if (in) {
      std::ostringstream ss;
      ss << in.rdbuf();
      text = ss.str();
      text_readable = true;
    }
  }
  boost::asio::io_context io;
  std::vector<std::pair<Libc, ExplainedWalk>> walks;
  for (Libc libc : libcs) {
    if (!walks.empty()) out << "\n";
    ResolvConf conf = text_readable ? ParseResolvConf(text, libc, config::ProcessEnv())
                                    : LoadResolvConf(resolv_conf_path, libc, config::ProcessEnv());
    walks.emplace_back(
        libc, ExplainWalk(io, conf, libc, name, resolv_conf_path,
                          SearchOrigin(text, libc, config::ProcessEnv()), out, text_readable));
  }
  if (walks.size() > 1) PrintSideBySide(out, name, walks);
  bool found = !walks.empty() && std::all_of(walks.begin(), walks.end(), [](const auto& w) {
    return w.second.outcome.result == Result::kSuccess;
  });
  return found ? kExplainFound : kExplainNotFound;
}

}  // namespace podnet::probes::dns
