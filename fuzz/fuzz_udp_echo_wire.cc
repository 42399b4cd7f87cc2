// What arrives on the UDP echo port (and as ICMP echo replies): the probe wire format, the
// responder's reply decision and its admission by source and size.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "exporter/responders/echo_limiter.h"
#include "exporter/wire/echo.h"

namespace echo = podnet::wire::echo;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> in(data, size);
  (void)echo::DecodePayload(in);
  std::vector<std::uint8_t> copy(data, data + size);
  if (echo::MakeReply(copy)) {
    auto h = echo::DecodePayload(copy);
    if (!h || h->kind != echo::Kind::kReply) __builtin_trap();  // a reply must read as one
  }
  // The identity record: a hostile reply is read within its bounds, and a responder's reply is
  // never larger than the request and reads back what it wrote when it wrote it.
  echo::Identity read;
  if (echo::ReadIdentity(in, &read) == echo::IdentityRead::kPresent &&
      (!echo::ValidIdentityName(read.node) || !echo::ValidIdentityName(read.zone))) {
    __builtin_trap();
  }
  static const echo::Identity self{"ip-10-0-1-1.ec2.internal", "ap-northeast-2a"};
  std::vector<std::uint8_t> asked(data, data + size);
  if (echo::MakeReply(asked, &self)) {
    if (asked.size() != size) __builtin_trap();
    echo::IdentityRead got = echo::ReadIdentity(asked, &read);
    bool wrote = size >= 16 + 4 && data[16] == 'P' && data[17] == 'N' && data[18] == 'I' &&
                 data[19] == '?' && size >= 16 + 4 + 2 + self.node.size() + self.zone.size();
    if (wrote && (got != echo::IdentityRead::kPresent || !(read == self))) __builtin_trap();
  }
  // The path-MTU record: read within bounds; the responder's answer is the 24 bytes it says for
  // kAck and exactly the size asked for kReturn when the request holds it, never more than the
  // request (even in a buffer that would hold more): the responder is no amplifier.
  (void)echo::ReadMtuAnswer(in);
  std::vector<std::uint8_t> mtu(data, data + size);
  if (echo::MakeReply(mtu)) {
    if (auto ask = echo::ReadMtuAsk(mtu)) {
      mtu.resize(std::max<std::size_t>(mtu.size(), ask->size));
      std::size_t n = echo::MakeMtuAnswer(mtu, size, *ask);
      std::size_t want = ask->mode == echo::MtuMode::kAck                       ? echo::kMtuAckBytes
                         : ask->size >= echo::kMtuAckBytes && ask->size <= size ? ask->size
                                                                                : 0;
      if (n != want || n > size) __builtin_trap();
      if (n != 0 && !echo::ReadMtuAnswer(std::span(mtu.data(), n))) __builtin_trap();
    }
  }
  for (bool v6 : {false, true}) {
    for (bool with_ip : {false, true}) (void)echo::ParseIcmpEchoReply(v6, with_ip, in);
  }
  (void)echo::InternetChecksum(in);
  // The limiter, fed sources and sizes from the input: never a crash, never more sources kept
  // than its bound.
  static podnet::responders::EchoLimits limits = [] {
    podnet::responders::EchoLimits l;
    l.max_sources = 64;
    return l;
  }();
  static podnet::responders::EchoLimiter limiter(limits, {});
  static auto now = podnet::responders::EchoLimiter::Clock::time_point{};
  for (std::size_t i = 0; i + 6 <= size; i += 6) {
    boost::asio::ip::address_v4 source({data[i], data[i + 1], data[i + 2], data[i + 3]});
    now += std::chrono::microseconds(data[i + 4] * 97);
    (void)limiter.Admit(source, std::size_t{data[i + 5]} * 300, now);
    if (limiter.sources() > limits.max_sources) __builtin_trap();
  }
  return 0;
}
