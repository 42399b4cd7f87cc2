#pragma once

// An in-process DNS server on 127.0.0.1:0 for the DNS probe's tests (the Envoy/c-ares way of
// testing a resolver): real UDP, real c-ares on the other side.

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace podnet::testing {

// A reply that comes first, 100 ms before the answer: an NXDOMAIN with the question's ID from
// another socket on the same address (kStrayPort), or from the server's port with another
// question section (kOtherQuestion). kReversed: no decoy, but each answer waits for the next
// question, and then goes after that question's answer (a pair answered out of order).
enum class Decoy { kNone, kStrayPort, kOtherQuestion, kReversed };

// Answers A and AAAA for names in `exists` (one record each), NXDOMAIN for the rest; with
// `drop`, never answers; with a `decoy`, sends it first. Counts the questions it got.
class LoopbackDns {
 public:
  LoopbackDns(boost::asio::io_context& io, std::set<std::string> exists, bool drop = false,
              Decoy decoy = Decoy::kNone)
      : io_(io),
        socket_(io, boost::asio::ip::udp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)),
        stray_(io, boost::asio::ip::udp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)),
        exists_(std::move(exists)),
        drop_(drop),
        decoy_(decoy) {
    Receive();
  }
  std::uint16_t port() const { return socket_.local_endpoint().port(); }
  int questions = 0;
  std::set<std::string> names;  // every name asked, without the trailing dot
  int rcode = -1;               // >= 0: every question answered with this rcode and no records

 private:
  void Receive() {
    socket_.async_receive_from(boost::asio::buffer(buf_), peer_,
                               [this](boost::system::error_code ec, std::size_t n) {
                                 if (ec) return;
                                 Answer(n);
                                 Receive();
                               });
  }
  void Answer(std::size_t n) {
    if (n < 17) return;
    ++questions;
    if (drop_) return;
    std::string name;
    std::size_t i = 12;
    while (i < n && buf_[i] != 0) {
      std::size_t len = buf_[i];
      if (!name.empty()) name += '.';
      name.append(reinterpret_cast<const char*>(&buf_[i + 1]), len);
      i += 1 + len;
    }
    names.insert(name);
    std::size_t qend = i + 5;
    std::uint16_t qtype = static_cast<std::uint16_t>((buf_[i + 1] << 8) | buf_[i + 2]);
    std::vector<unsigned char> out(buf_.begin(), buf_.begin() + static_cast<long>(qend));
    out[2] = 0x81;  // QR, RD
    out[3] = 0x80;  // RA
    out[7] = 0;     // ancount
    out[9] = out[11] = 0;
    if (rcode >= 0) {
      out[3] = static_cast<unsigned char>(0x80 | (rcode & 0x0F));
      socket_.send_to(boost::asio::buffer(out), peer_);
      return;
    }
    if (!exists_.count(name)) {
      out[3] |= 3;  // NXDOMAIN
    } else {
      out[7] = 1;
      std::vector<unsigned char> rr = {0xc0,
                                       0x0c,
                                       static_cast<unsigned char>(qtype >> 8),
                                       static_cast<unsigned char>(qtype & 0xff),
                                       0,
                                       1,
                                       0,
                                       0,
                                       0,
                                       30};
      std::size_t rdlen = qtype == 28 ? 16 : 4;
      rr.push_back(0);
      rr.push_back(static_cast<unsigned char>(rdlen));
      for (std::size_t k = 0; k < rdlen; ++k) rr.push_back(static_cast<unsigned char>(k + 1));
      out.insert(out.end(), rr.begin(), rr.end());
    }
    if (decoy_ == Decoy::kNone) {
      socket_.send_to(boost::asio::buffer(out), peer_);
      return;
    }
    if (decoy_ == Decoy::kReversed) {
      if (held_.empty()) {
        held_ = out;
        return;
      }
      socket_.send_to(boost::asio::buffer(out), peer_);
      socket_.send_to(boost::asio::buffer(held_), peer_);
      held_.clear();
      return;
    }
    std::vector<unsigned char> decoy(out.begin(), out.begin() + static_cast<long>(qend));
    decoy[3] = 0x83;  // RA, NXDOMAIN
    decoy[7] = 0;
    if (decoy_ == Decoy::kStrayPort) {
      stray_.send_to(boost::asio::buffer(decoy), peer_);
    } else {
      decoy[13] = decoy[13] == 'x' ? 'y' : 'x';  // another first letter: another name
      socket_.send_to(boost::asio::buffer(decoy), peer_);
    }
    auto later = std::make_shared<boost::asio::steady_timer>(io_, std::chrono::milliseconds(100));
    later->async_wait([this, later, out, peer = peer_](boost::system::error_code ec) {
      if (!ec) socket_.send_to(boost::asio::buffer(out), peer);
    });
  }

  boost::asio::io_context& io_;
  boost::asio::ip::udp::socket socket_, stray_;
  boost::asio::ip::udp::endpoint peer_;
  std::array<unsigned char, 512> buf_{};
  std::set<std::string> exists_;
  bool drop_;
  Decoy decoy_;
  std::vector<unsigned char> held_;
};

}  // namespace podnet::testing
