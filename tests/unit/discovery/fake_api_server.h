#pragma once

// A stand-in Kubernetes API server for the client tests: HTTPS (Boost.Asio SSL, a self-signed
// certificate made by `openssl req` at test time) on 127.0.0.1:0, one blocking thread per
// connection, scripted by a handler. Nothing real can run here (no API server in the sandbox),
// so it is fed JSON shaped as a real API server's (fixtures in kubernetes_test.cc).

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exporter/discovery/kubernetes/api_config.h"

namespace podnet::testing {

/// A temporary directory, removed with its files at the end.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/podnet-k8s-test-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = path_ + "/" + name;
    std::string tmp = p + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << text;
    }
    std::rename(tmp.c_str(), p.c_str());  // atomic, as the kubelet swaps projected volumes
    return p;
  }

 private:
  std::string path_;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A self-signed certificate for 127.0.0.1 (and "localhost"), made once per process.
struct TestCert {
  std::string cert_pem;
  std::string key_pem;
};
inline TestCert MakeCert(const std::string& cn) {
  TempDir dir;
  std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
      "-days 2 -subj /CN=" +
      cn + " -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " + dir.path() +
      "/key.pem -out " + dir.path() + "/cert.pem 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("openssl req failed");
  return {ReadAll(dir.path() + "/cert.pem"), ReadAll(dir.path() + "/key.pem")};
}
inline const TestCert& ServerCert() {
  static const TestCert cert = MakeCert("podnet-test-apiserver");
  return cert;
}

/// The client's side of FakeApiServer at `port`: its CA, the token in `token_file`.
inline discovery::kubernetes::ApiConfig FakeApiConfig(std::uint16_t port,
                                                      const std::string& token_file) {
  discovery::kubernetes::ApiConfig c;
  c.host = "127.0.0.1";
  c.port = port;
  c.ca_pem = ServerCert().cert_pem;
  c.token_file = token_file;
  c.source = "test";
  return c;
}

/// A watch stream the test feeds while the client reads it (chunked transfer encoding).
class FakeStream {
 public:
  void Push(std::string chunk) { Add({Kind::kData, std::move(chunk)}); }
  void End() { Add({Kind::kEnd, ""}); }    // the last chunk: a clean end (timeoutSeconds)
  void Drop() { Add({Kind::kDrop, ""}); }  // close the TCP connection mid-stream
  void Stop() { Add({Kind::kDrop, ""}); }

  enum class Kind { kData, kEnd, kDrop };
  struct Item {
    Kind kind;
    std::string data;
  };
  // Waits for the next item; a kDrop after `timeout`.
  Item Next(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !items_.empty(); })) return {Kind::kDrop, ""};
    Item i = std::move(items_.front());
    items_.pop_front();
    return i;
  }

 private:
  void Add(Item i) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(std::move(i));
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
};

struct FakeRequest {
  std::string method;
  std::string target;
  std::string authorization;
};

struct FakeResponse {
  FakeResponse(int status_ = 200, std::vector<std::pair<std::string, std::string>> headers_ = {},
               std::string body_ = "", std::shared_ptr<FakeStream> stream_ = nullptr,
               bool hang_ = false, bool garbage_ = false)
      : status(status_),
        headers(std::move(headers_)),
        body(std::move(body_)),
        stream(std::move(stream_)),
        hang(hang_),
        garbage(garbage_) {}
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::shared_ptr<FakeStream> stream;  // set: chunked, fed by the test
  bool hang = false;                   // never answer (the client's deadline must end it)
  bool garbage = false;                // `body` is sent raw, not as HTTP
};

class FakeApiServer {
 public:
  using Handler = std::function<FakeResponse(const FakeRequest&)>;

  explicit FakeApiServer(Handler handler)
      : handler_(std::move(handler)), tls_(boost::asio::ssl::context::tls_server), acceptor_(io_) {
    const auto& cert = ServerCert();
    tls_.use_certificate_chain(boost::asio::buffer(cert.cert_pem));
    tls_.use_private_key(boost::asio::buffer(cert.key_pem), boost::asio::ssl::context::pem);
    using tcp = boost::asio::ip::tcp;
    tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(ep.protocol());
    acceptor_.bind(ep);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~FakeApiServer() {
    stopping_ = true;
    {
      std::lock_guard lock(mu_);
      for (auto& s : streams_) s->Stop();
    }
    // Wake the blocking accept.
    boost::system::error_code ec;
    boost::asio::ip::tcp::socket wake(io_);
    wake.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
    thread_.join();
    std::vector<std::thread> conns;
    {
      std::lock_guard lock(mu_);
      conns.swap(conns_);
    }
    for (auto& t : conns) t.join();
  }

  std::uint16_t port() const { return port_; }

  std::vector<FakeRequest> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  int count(const std::string& target_part) {
    int n = 0;
    for (const auto& r : requests()) n += r.target.find(target_part) != std::string::npos;
    return n;
  }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      boost::asio::ip::tcp::socket s(io_);
      boost::system::error_code ec;
      acceptor_.accept(s, ec);
      if (ec || stopping_) return;
      timeval tv{5, 0};  // a client that never sends must not pin a thread forever
      setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::lock_guard lock(mu_);
      conns_.emplace_back([this, sock = std::move(s)]() mutable { Serve(std::move(sock)); });
    }
  }

  void Serve(boost::asio::ip::tcp::socket sock) {
    namespace http = boost::beast::http;
    boost::asio::ssl::stream<boost::asio::ip::tcp::socket> stream(std::move(sock), tls_);
    boost::system::error_code ec;
    stream.handshake(boost::asio::ssl::stream_base::server, ec);
    if (ec) return;
    boost::beast::flat_buffer buf;
    http::request<http::string_body> req;
    http::read(stream, buf, req, ec);
    if (ec) return;
    FakeRequest r{std::string(req.method_string()), std::string(req.target()),
                  std::string(req[http::field::authorization])};
    {
      std::lock_guard lock(mu_);
      requests_.push_back(r);
    }
    FakeResponse resp = handler_(r);
    if (resp.hang) {
      for (int i = 0; i < 500 && !stopping_; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return;
    }
    if (resp.garbage) {
      boost::asio::write(stream, boost::asio::buffer(resp.body), ec);
      stream.shutdown(ec);
      return;
    }
    std::string reason = resp.status == 200 ? "OK" : "Status";
    std::string head = "HTTP/1.1 " + std::to_string(resp.status) + " " + reason +
                       "\r\nContent-Type: application/json\r\n";
    for (const auto& [k, v] : resp.headers) head += k + ": " + v + "\r\n";
    if (!resp.stream) {
      head += "Content-Length: " + std::to_string(resp.body.size()) + "\r\n\r\n";
      boost::asio::write(stream, boost::asio::buffer(head + resp.body), ec);
      stream.shutdown(ec);
      return;
    }
    {
      std::lock_guard lock(mu_);
      streams_.push_back(resp.stream);
    }
    head += "Transfer-Encoding: chunked\r\n\r\n";
    boost::asio::write(stream, boost::asio::buffer(head), ec);
    while (!ec && !stopping_) {
      auto item = resp.stream->Next(std::chrono::seconds(10));
      if (item.kind == FakeStream::Kind::kDrop) {
        stream.lowest_layer().close(ec);  // no TLS close_notify, no last chunk: a lost peer
        return;
      }
      if (item.kind == FakeStream::Kind::kEnd) {
        boost::asio::write(stream, boost::asio::buffer(std::string("0\r\n\r\n")), ec);
        stream.shutdown(ec);
        return;
      }
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", item.data.size());
      boost::asio::write(stream, boost::asio::buffer(size + item.data + "\r\n"), ec);
    }
  }

  Handler handler_;
  boost::asio::io_context io_;
  boost::asio::ssl::context tls_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::thread> conns_;
  std::vector<std::shared_ptr<FakeStream>> streams_;
  std::vector<FakeRequest> requests_;
};

}  // namespace podnet::testing
