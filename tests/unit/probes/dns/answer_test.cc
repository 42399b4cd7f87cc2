// How glibc and musl read a name's answers (answer.h), and what the models make of it: the
// buffer rule of glibc's getaddrinfo (the whole lookup again when the answers do not fit),
// answers without an address, musl's parse limits. The lab test (lab_dns_truth, cases
// fid-big-*, fid-cname-only, fid-tc-cname) holds the same rules to real glibc 2.36 and musl
// 1.2.3 on the wire.
#include "exporter/probes/dns/answer.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>

#include "exporter/probes/dns/resolver_model.h"

namespace podnet::probes::dns {
namespace {

constexpr std::uint16_t kA = 1, kAaaa = 28;

// One CNAME record after the question of `m` (a message from MakeAnswer with no records):
// owner = the question name, target = "gone.invalid".
std::string WithCname(std::string m) {
  m[7] = 1;  // ANCOUNT 1
  m += std::string("\xc0\x0c\x00\x05\x00\x01\x00\x00\x00\x1e\x00\x0e", 12);
  m += std::string("\x04gone\x07invalid\x00", 14);
  return m;
}

// The CNAME of WithCname, then an A record under `owner` (a pointer to its name).
std::string ThenAddress(std::string m, std::uint16_t owner) {
  m[7] = static_cast<char>(m[7] + 1);
  m += static_cast<char>(0xc0 | owner >> 8);
  m += static_cast<char>(owner & 0xff);
  m += std::string("\x00\x01\x00\x01\x00\x00\x00\x1e\x00\x04\x0a\x00\x00\x01", 14);
  return m;
}

TEST(GlibcAnswersTest, EachAddressTakesATupleTheFirstAlsoTheName) {
  // The first A record: a 40-byte tuple and "web.lab.test" with its NUL (13 bytes), then a
  // tuple every 40 bytes from 56: 25 records end at 1,016, 26 at 1,056 > 1,024.
  std::string nodata = MakeAnswer("web.lab.test", kAaaa, 0, 0);
  EXPECT_EQ(GlibcReadAnswers(MakeAnswer("web.lab.test", kA, 0, 25), nodata, 1024),
            GlibcVerdict::kAddresses);
  EXPECT_EQ(GlibcReadAnswers(MakeAnswer("web.lab.test", kA, 0, 26), nodata, 1024),
            GlibcVerdict::kTooSmall);
  EXPECT_EQ(GlibcReadAnswers(MakeAnswer("web.lab.test", kA, 0, 26), nodata, 2048),
            GlibcVerdict::kAddresses);
  // The NODATA reply first changes nothing: it takes no buffer.
  EXPECT_EQ(GlibcReadAnswers(nodata, MakeAnswer("web.lab.test", kA, 0, 26), 1024),
            GlibcVerdict::kTooSmall);
  // 40 A records need 1,616 bytes; 60 need 2,416.
  EXPECT_EQ(GlibcReadAnswers(MakeAnswer("web.lab.test", kA, 0, 40), nodata, 1024),
            GlibcVerdict::kTooSmall);
  EXPECT_EQ(GlibcReadAnswers(MakeAnswer("web.lab.test", kA, 0, 40), nodata, 2048),
            GlibcVerdict::kAddresses);
  EXPECT_EQ(GlibcReadAnswers(MakeAnswer("web.lab.test", kA, 0, 60), nodata, 2048),
            GlibcVerdict::kTooSmall);
  EXPECT_EQ(GlibcReadAnswers(MakeAnswer("web.lab.test", kA, 0, 60), nodata, 4096),
            GlibcVerdict::kAddresses);
  // A and AAAA share the buffer, the name stored once: 12 + 12 fit (976), 13 + 13 do not.
  EXPECT_EQ(GlibcReadAnswers(MakeAnswer("web.lab.test", kA, 0, 12),
                             MakeAnswer("web.lab.test", kAaaa, 0, 12), 1024),
            GlibcVerdict::kAddresses);
  EXPECT_EQ(GlibcReadAnswers(MakeAnswer("web.lab.test", kA, 0, 13),
                             MakeAnswer("web.lab.test", kAaaa, 0, 13), 1024),
            GlibcVerdict::kTooSmall);
}

TEST(GlibcAnswersTest, AnAddressMustBeUnderTheNameOrItsCnameTarget) {
  std::string a = WithCname(MakeAnswer("web.lab.test", kA, 0, 0));
  std::string aaaa = WithCname(MakeAnswer("web.lab.test", kAaaa, 0, 0));
  EXPECT_EQ(GlibcReadAnswers(a, aaaa, 1024), GlibcVerdict::kNoAddress);
  EXPECT_EQ(GlibcReadAnswers(a, MakeAnswer("web.lab.test", kAaaa, 0, 0), 1024),
            GlibcVerdict::kNoAddress);
  // An address in either reply is enough (gaih_getanswer: NOTFOUND/SUCCESS → SUCCESS).
  EXPECT_EQ(GlibcReadAnswers(a, MakeAnswer("web.lab.test", kAaaa, 0, 1), 1024),
            GlibcVerdict::kAddresses);
  // The chain's address, under the CNAME target (at byte 42), counts; under the question's
  // name after the CNAME (byte 12) it does not; nor does a record of another type.
  EXPECT_EQ(GlibcReadAnswers(ThenAddress(a, 42), "", 1024), GlibcVerdict::kAddresses);
  EXPECT_EQ(GlibcReadAnswers(ThenAddress(a, 12), "", 1024), GlibcVerdict::kNoAddress);
  EXPECT_EQ(GlibcReadAnswers(MakeAnswer("web.lab.test", 16, 0, 1), "", 1024),
            GlibcVerdict::kNoAddress);
}

TEST(MuslAnswersTest, AddressesAsDnsParseFindsThem) {
  EXPECT_EQ(
      MuslAddresses(MakeAnswer("web.lab.test", kA, 0, 3), MakeAnswer("web.lab.test", kAaaa, 0, 2)),
      5);
  EXPECT_EQ(MuslAddresses(WithCname(MakeAnswer("web.lab.test", kA, 0, 0)), ""), 0);
  // QDCOUNT + ANCOUNT over 64: __dns_parse reads nothing.
  EXPECT_EQ(MuslAddresses(MakeAnswer("web.lab.test", kA, 0, 47), ""), 47);
  EXPECT_EQ(MuslAddresses(MakeAnswer("web.lab.test", kA, 0, 64), ""), 0);
  // MAXADDRS: 48 in all.
  EXPECT_EQ(MuslAddresses(MakeAnswer("web.lab.test", kA, 0, 40),
                          MakeAnswer("web.lab.test", kAaaa, 0, 20)),
            48);
  // A record cut short ends the parse; the ones before it stay. musl checks the RDATA length
  // against the record's start, not its end ("p+len > r+rlen"): a record 2 bytes short still
  // counts, one with under 6 bytes left does not.
  std::string cut = MakeAnswer("web.lab.test", kA, 0, 3);
  cut.resize(cut.size() - 2);
  EXPECT_EQ(MuslAddresses(cut, ""), 3);
  cut.resize(cut.size() - 10);
  EXPECT_EQ(MuslAddresses(cut, ""), 2);
  // A reply that is not NOERROR is not parsed.
  EXPECT_EQ(MuslAddresses(MakeAnswer("web.lab.test", kA, 3, 2), ""), 0);
}

// Runs a model against `answer(query)` to its end: (questions, result, passes seen).
struct Walked {
  int questions = 0;
  Result result = Result::kError;
  int last_pass = 0;
};
Walked Drive(Libc libc, const std::string& conf_text, const std::string& name,
             const std::function<std::string(const WireQuery&)>& answer) {
  ResolvConf conf = ParseResolvConf(conf_text, libc, {});
  auto m = MakeModel(libc, conf, name);
  Walked run;
  std::deque<std::pair<int, Reply>> inbox;
  auto take = [&](const Actions& a) {
    for (const auto& q : a.send) {
      ++run.questions;
      run.last_pass = q.pass;
      Reply r;
      r.message = answer(q);
      r.rcode = static_cast<std::uint8_t>(r.message[3]) & 0x0f;
      r.truncated = (static_cast<std::uint8_t>(r.message[2]) & 0x02) != 0;
      r.ancount = static_cast<std::uint8_t>(r.message[7]);
      inbox.emplace_back(q.id, r);
    }
    return a.done;
  };
  bool done = take(m->Start());
  for (int i = 0; !done && i < 1000; ++i) {
    if (inbox.empty()) {
      done = take(m->OnDeadline());
      continue;
    }
    auto [id, r] = inbox.front();
    inbox.pop_front();
    done = take(m->OnReply(id, r));
  }
  EXPECT_TRUE(done);
  run.result = m->result();
  return run;
}

// A zone where `web.big.test` has `n` A records (30 over UDP, with TC, when n > 30) and no
// AAAA; every other name is NXDOMAIN.
std::function<std::string(const WireQuery&)> BigZone(int n) {
  return [n](const WireQuery& q) {
    std::string name = q.name;
    if (name.ends_with('.')) name.pop_back();
    auto type = static_cast<std::uint16_t>(q.qtype);
    if (name != "web.big.test") return MakeAnswer(q.name, type, kNxDomain, 0);
    if (q.qtype == QType::kAAAA) return MakeAnswer(q.name, type, 0, 0);
    bool tc = n > 30 && !q.tcp;
    return MakeAnswer(q.name, type, 0, tc ? 30 : n, tc);
  };
}

TEST(ModelAnswersTest, GlibcRunsTheWholeLookupAgainWhenTheAnswersDoNotFit) {
  // 40 records: A+AAAA over UDP, TC, both over TCP; 1,616 bytes > 1,024: all of it again.
  Walked r = Drive(Libc::kGlibc, "nameserver 127.0.0.1\n", "web.big.test.", BigZone(40));
  EXPECT_EQ(r.questions, 8);
  EXPECT_EQ(r.result, Result::kSuccess);
  EXPECT_EQ(r.last_pass, 1);
  // The search walk is repeated from its first name: 2 NXDOMAIN names + the answer, twice.
  r = Drive(Libc::kGlibc, "nameserver 127.0.0.1\nsearch x.test y.test\noptions ndots:5\n",
            "web.big.test", BigZone(40));
  EXPECT_EQ(r.questions, 2 * (2 + 2 + 4));
  // 25 records fit; 26 do not (GlibcAnswersTest).
  EXPECT_EQ(Drive(Libc::kGlibc, "", "web.big.test.", BigZone(25)).questions, 2);
  EXPECT_EQ(Drive(Libc::kGlibc, "", "web.big.test.", BigZone(26)).questions, 4);
  // musl reads the truncated UDP answer once: 30 addresses.
  r = Drive(Libc::kMusl, "", "web.big.test.", BigZone(40));
  EXPECT_EQ(r.questions, 2);
  EXPECT_EQ(r.result, Result::kSuccess);
}

TEST(ModelAnswersTest, ACnameToNothingEndsTheWalkWithoutAnAddress) {
  // web.lab.test NOERROR, a CNAME to a name that does not exist (coredns#2492).
  auto zone = [](const WireQuery& q) {
    auto type = static_cast<std::uint16_t>(q.qtype);
    if (q.name == "web.lab.test") return WithCname(MakeAnswer(q.name, type, 0, 0));
    return MakeAnswer(q.name, type, kNxDomain, 0);
  };
  for (Libc libc : {Libc::kGlibc, Libc::kMusl}) {
    Walked r = Drive(libc, "search lab.test other.test\n", "web", zone);
    EXPECT_EQ(r.questions, 2) << LibcName(libc);
    EXPECT_EQ(r.result, Result::kNxDomain) << LibcName(libc);
  }
}

TEST(ModelAnswersTest, MuslTakesATruncatedPartOfACnameChainAsIs) {
  // Over UDP the answer holds only the CNAME (TC); over TCP the chain and the address.
  auto zone = [](const WireQuery& q) {
    auto type = static_cast<std::uint16_t>(q.qtype);
    std::string full = MakeAnswer(q.name, type, 0, 1);
    if (q.tcp) return full;
    std::string cut = WithCname(MakeAnswer(q.name, type, 0, 0));
    cut[2] = static_cast<char>(cut[2] | 0x02);
    return cut;
  };
  Walked musl = Drive(Libc::kMusl, "", "web.lab.test.", zone);
  EXPECT_EQ(musl.questions, 2);
  EXPECT_EQ(musl.result, Result::kNxDomain);
  Walked glibc = Drive(Libc::kGlibc, "", "web.lab.test.", zone);
  EXPECT_EQ(glibc.questions, 4);
  EXPECT_EQ(glibc.result, Result::kSuccess);
}

}  // namespace
}  // namespace podnet::probes::dns
