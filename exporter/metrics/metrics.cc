#include "exporter/metrics/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <ostream>
#include <streambuf>

#include <prometheus/text_serializer.h>
#include <zlib.h>

#include "podnet/version.h"

namespace podnet::metrics {

PeerLabelSet PeerLabelSetFor(const config::Config& config) {
  return config.aggregate_peers ? PeerLabelSet::kAggregated : PeerLabelSet::kPerPeer;
}

prometheus::Labels PeerLabels(const config::Self& self, const topology::Peer& peer,
                              PeerLabelSet set) {
  prometheus::Labels labels{
      {"source_node", self.node},
      {"source_zone", self.zone},
      {"peer_zone", peer.zone},
      {"path", std::string(topology::PathClassName(peer.path))},
  };
  if (set == PeerLabelSet::kPerPeer) {
    labels.emplace("peer", peer.name);
    labels.emplace("peer_node", peer.node);
  }
  return labels;
}

std::size_t SeriesRefs::users(const void* series) const {
  std::lock_guard lock(mu_);
  auto it = users_.find(series);
  return it == users_.end() ? 0 : it->second;
}

SeriesSet::~SeriesSet() { Release(/*remove=*/false); }

void SeriesSet::RemoveAll() { Release(/*remove=*/true); }

void SeriesSet::Release(bool remove) {
  std::lock_guard lock(refs_->mu_);
  for (auto& entry : removers_) {
    auto it = refs_->users_.find(entry.series);
    if (it == refs_->users_.end()) continue;  // not reached: every entry was counted
    if (--it->second > 0) continue;          // another set still feeds it
    refs_->users_.erase(it);
    if (remove) entry.remove();
  }
  removers_.clear();
  added_.clear();
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::BuildGauge()
      .Name("podnet_build_info")
      .Help("A metric with a constant '1' value labelled by the version and revision of "
            "podnet-exporter.")
      .Register(*registry_)
      .Add({{"version", kVersion}, {"revision", kRevision}})
      .Set(1);
  reload_successful_ = &prometheus::BuildGauge()
                            .Name("podnet_config_last_reload_successful")
                            .Help("Whether the last configuration reload attempt was successful.")
                            .Register(*registry_)
                            .Add({});
  reload_success_timestamp_ =
      &prometheus::BuildGauge()
           .Name("podnet_config_last_reload_success_timestamp_seconds")
           .Help("Timestamp of the last successful configuration reload.")
           .Register(*registry_)
           .Add({});
  peers_ = &prometheus::BuildGauge()
                .Name("podnet_peers")
                .Help("Number of peers this probe Pod probes, by path class.")
                .Register(*registry_);
  for (auto p : topology::kAllPathClasses) {
    peers_->Add({{"path", std::string(topology::PathClassName(p))}});
  }
  probe_errors_ = &prometheus::BuildCounter()
                       .Name("podnet_probe_errors_total")
                       .Help("Probe failures, by probe kind and reason.")
                       .Register(*registry_);
  probe_sent_bytes_ = &prometheus::BuildCounter()
                           .Name("podnet_probe_sent_bytes_total")
                           .Help("Bytes the prober sent to a peer (IP headers included), by probe "
                                 "kind: the input of the cost model.")
                           .Register(*registry_);
  probe_received_bytes_ = &prometheus::BuildCounter()
                               .Name("podnet_probe_received_bytes_total")
                               .Help("Bytes the prober received from a peer (IP headers included), "
                                     "by probe kind.")
                               .Register(*registry_);
}

namespace {

// prometheus-cpp 1.0 writes doubles with precision 16, so a bucket bound whose nearest double
// is not within half a 16th digit of the decimal comes out long: 8e-05 (8.0000000000000007e-05)
// as le="8.000000000000001e-05", 6e-04 as le="0.0005999999999999999" - no double prints short
// there. `le` is part of the series identity, so rewrite each value as the shortest text that
// reads back to the same double (as client_golang writes it): rules and dashboards can name
// the bucket, and a library upgrade does not rename the bucket series.
void AppendShortenedLe(std::string_view text, std::string& out) {
  static constexpr std::string_view kLe = "le=\"";
  std::size_t pos = 0;
  for (std::size_t at = text.find(kLe); at != std::string_view::npos;
       at = text.find(kLe, at + 1)) {
    if (at == 0 || (text[at - 1] != '{' && text[at - 1] != ',')) continue;  // e.g. scale="
    std::size_t begin = at + kLe.size();
    std::size_t end = text.find('"', begin);
    if (end == std::string_view::npos) break;
    double v = 0;
    auto [ptr, ec] = std::from_chars(text.data() + begin, text.data() + end, v);
    if (ec != std::errc{} || ptr != text.data() + end || !std::isfinite(v)) continue;  // +Inf
    // The shortest digits, in the style the serializer chose (%g with precision 16: scientific
    // when the exponent is below -4 or at least 16), so that good values stay as they were.
    char buf[64];
    auto sci = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    if (sci.ec != std::errc{}) continue;
    const char* e = std::find(buf, sci.ptr, 'e');
    int exponent = 0;
    if (e == sci.ptr) continue;
    std::from_chars(e + (e[1] == '+' ? 2 : 1), sci.ptr, exponent);  // "e-05", "e+21"
    char* last = sci.ptr;
    if (exponent >= -4 && exponent < 16) {
      auto fixed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
      if (fixed.ec != std::errc{}) continue;
      last = fixed.ptr;
    }
    out.append(text.substr(pos, begin - pos));
    out.append(buf, last);
    pos = end;
  }
  out.append(text.substr(pos));
}

// The ostream buffer TextSerializer writes into. It holds at most kChunk bytes of text: each
// time it fills, the complete lines in it get their `le` bounds shortened (a line is never cut,
// so a bound is never split) and go on to the body, as they are or through deflate. The body is
// thus built once, without the doubling growth of an ostringstream, its .str() copy or a second
// full-size pass. A line longer than kChunk (none here: label values are short) is passed on
// unshortened rather than buffered whole.
class ExpositionBuf : public std::streambuf {
 public:
  static constexpr std::size_t kChunk = 64 * 1024;

  ExpositionBuf(Metrics::Encoding encoding, std::size_t size_hint)
      : gzip_(encoding == Metrics::Encoding::kGzip), chunk_(kChunk) {
    setp(chunk_.data(), chunk_.data() + chunk_.size());
    shortened_.reserve(kChunk + kChunk / 4);
    if (gzip_) {
      // windowBits 15 + 16: a gzip header and trailer (RFC 1952) instead of zlib's. Level 1:
      // the text is highly repetitive, so level 1 already shrinks it ~38x (1,000 peers) at a
      // fraction of level 6's CPU (the scrape's latency is what is budgeted).
      ok_ = z_open_ = deflateInit2(&z_, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
      body_.reserve(size_hint / 8);
    } else {
      body_.reserve(size_hint + size_hint / 16);
    }
  }
  ~ExpositionBuf() override {
    if (z_open_) deflateEnd(&z_);
  }

  /// Passes on what is left and returns the body (empty if zlib failed).
  std::string Finish() {
    Pass(/*all=*/true);
    if (gzip_) {
      Deflate({}, Z_FINISH);
      if (!ok_) return {};
    }
    return std::move(body_);
  }

 protected:
  int_type overflow(int_type c) override {
    Pass(/*all=*/false);
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    *pptr() = traits_type::to_char_type(c);
    pbump(1);
    return c;
  }

  // Single characters (TextSerializer writes label values one character at a time) and short
  // strings land here: copy without the generic loop's per-call overflow checks.
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    char* p = pptr();
    if (n > epptr() - p) return std::streambuf::xsputn(s, n);
    if (n == 1) {
      *p = *s;  // most calls: one character of a label value (no memcpy call for it)
    } else {
      std::memcpy(p, s, static_cast<std::size_t>(n));
    }
    pbump(static_cast<int>(n));
    return n;
  }

 private:
  // Hands the complete lines in the buffer (all of it when `all`) on, keeps the rest.
  void Pass(bool all) {
    std::string_view held(pbase(), static_cast<std::size_t>(pptr() - pbase()));
    std::size_t cut = held.size();
    if (!all) {
      std::size_t nl = held.rfind('\n');
      if (nl != std::string_view::npos) cut = nl + 1;  // else: one overlong line, passed as is
    }
    shortened_.clear();
    AppendShortenedLe(held.substr(0, cut), shortened_);
    if (gzip_) {
      Deflate(shortened_, Z_NO_FLUSH);
    } else {
      body_.append(shortened_);
    }
    std::size_t rest = held.size() - cut;
    std::memmove(chunk_.data(), held.data() + cut, rest);
    setp(chunk_.data(), chunk_.data() + chunk_.size());
    pbump(static_cast<int>(rest));
  }

  // Bounded: each round either finishes or fills a fresh piece of output.
  void Deflate(std::string_view in, int flush) {
    if (!ok_) return;
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    const std::size_t room = kChunk / 2;
    const std::size_t max_rounds = 64 + 2 * (in.size() / room);
    for (std::size_t round = 0; round < max_rounds; ++round) {
      std::size_t used = body_.size();
      body_.resize(used + room);
      z_.next_out = reinterpret_cast<Bytef*>(body_.data() + used);
      z_.avail_out = static_cast<uInt>(room);
      int rc = deflate(&z_, flush);
      body_.resize(used + room - z_.avail_out);
      if (rc == Z_STREAM_ERROR) break;
      // zlib: output room left means all input was taken (deflate.c); Z_FINISH ends the member.
      if (flush == Z_FINISH ? rc == Z_STREAM_END : z_.avail_out != 0) return;
    }
    ok_ = false;
  }

  bool gzip_;
  bool ok_ = true;
  bool z_open_ = false;  // deflateInit2 succeeded: deflateEnd is owed
  z_stream z_{};
  std::vector<char> chunk_;
  std::string shortened_;  // one chunk's lines after the le rewrite (reused)
  std::string body_;
};

}  // namespace

std::string Metrics::Serialize(Encoding encoding) const {
  ExpositionBuf buf(encoding, last_size_.load(std::memory_order_relaxed));
  {
    std::ostream out(&buf);
    prometheus::TextSerializer().Serialize(out, registry_->Collect());
  }
  std::string body = buf.Finish();
  if (encoding == Encoding::kIdentity) last_size_.store(body.size(), std::memory_order_relaxed);
  return body;
}

void Metrics::SetPeers(const std::vector<topology::Peer>& peers) {
  std::map<topology::PathClass, int> counts;
  for (const auto& p : peers) ++counts[p.path];
  for (auto p : topology::kAllPathClasses) {
    peers_->Add({{"path", std::string(topology::PathClassName(p))}}).Set(counts[p]);
  }
}

void Metrics::SetReloadOutcome(bool ok, double now_seconds) {
  reload_successful_->Set(ok ? 1 : 0);
  if (ok) reload_success_timestamp_->Set(now_seconds);
}

}  // namespace podnet::metrics
