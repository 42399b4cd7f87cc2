#include "exporter/discovery/kubernetes/api_client.h"

#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <charconv>
#include <optional>

#include "exporter/discovery/kubernetes/resources.h"
#include "podnet/version.h"

namespace podnet::discovery::kubernetes {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

std::string_view ApiErrorName(ApiError e) {
  switch (e) {
    case ApiError::kNone:
      return "none";
    case ApiError::kCredentials:
      return "credentials";
    case ApiError::kResolve:
      return "resolve";
    case ApiError::kConnect:
      return "connect";
    case ApiError::kTls:
      return "tls";
    case ApiError::kTimeout:
      return "timeout";
    case ApiError::kConnectionLost:
      return "connection_lost";
    case ApiError::kTooLarge:
      return "too_large";
    case ApiError::kBadResponse:
      return "bad_response";
  }
  return "unknown";
}

std::string_view StatusReason(int status) {
  if (status == 401) return "unauthorized";
  if (status == 403) return "forbidden";
  if (status == 404) return "not_found";
  if (status == 410) return "gone";
  if (status == 429) return "throttled";
  if (status >= 500 && status <= 599) return "server_error";
  return "http_status";
}

std::string FailureReason(const ApiResponse& r) {
  if (r.error != ApiError::kNone) return std::string(ApiErrorName(r.error));
  if (r.status < 200 || r.status > 299) return std::string(StatusReason(r.status));
  return "";
}

std::string Describe(const ApiResponse& r) {
  std::string out = r.detail;
  if (!r.body.empty() && r.body.size() < 64 * 1024) {
    std::string message = StatusMessage(r.body);
    if (!message.empty()) out += (out.empty() ? "" : ": ") + message;
  }
  return out;
}

std::string Failure(const std::string& reason, const ApiResponse& r, const std::string& detail) {
  std::string out = reason;
  if (r.error == ApiError::kNone && r.status != 0 && (r.status < 200 || r.status > 299)) {
    out += " (HTTP " + std::to_string(r.status) + ")";
  }
  if (detail.empty() || detail == reason) return out;
  if (detail.rfind(reason + ": ", 0) == 0) return detail;  // the client's words start with it
  return out + ": " + detail;
}

namespace {

bool IsIpLiteral(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

/// Shared by the client and its calls: the TLS context, the token and its refresh.
class ApiClient::Impl {
 public:
  Impl(asio::io_context& io, ApiConfig config, ClientOptions options)
      : io_(io), config_(std::move(config)), options_(options), tls_(ssl::context::tls_client) {}

  bool Init(std::string* error) {
    boost::system::error_code ec;
    tls_.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                         ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                     ec);
    if (config_.ca_pem.empty()) {
      tls_.set_default_verify_paths(ec);
    } else {
      tls_.add_certificate_authority(asio::buffer(config_.ca_pem), ec);
      if (ec) {
        *error = "certificate authority: " + ec.message();
        return false;
      }
    }
    if (!config_.client_cert_pem.empty()) {
      tls_.use_certificate_chain(asio::buffer(config_.client_cert_pem), ec);
      if (!ec) tls_.use_private_key(asio::buffer(config_.client_key_pem), ssl::context::pem, ec);
      if (ec) {
        *error = "client certificate or key: " + ec.message();
        return false;
      }
    }
    tls_.set_verify_mode(config_.insecure_skip_tls_verify ? ssl::verify_none : ssl::verify_peer);
    host_header_ =
        (config_.host.find(':') != std::string::npos ? "[" + config_.host + "]" : config_.host) +
        ":" + std::to_string(config_.port);
    return true;
  }

  // The bearer token for the next request ("" = none); std::nullopt when the file is unreadable.
  std::optional<std::string> Token(std::string* error) {
    if (config_.token_file.empty()) return config_.token;
    auto now = Clock::now();
    if (!token_read_ || now - token_read_at_ >= options_.token_refresh) {
      auto text = ReadSmallFile(config_.token_file, error);
      if (!text) return std::nullopt;
      std::string token = TrimSpace(*text);
      if (token_read_ && token != token_) spdlog::debug("kubernetes: token file rotated");
      token_ = std::move(token);
      token_read_ = true;
      token_read_at_ = now;
    }
    return token_;
  }
  // After a 401: the next request reads the file again.
  void InvalidateToken() { token_read_ = false; }

  asio::io_context& io_;
  ApiConfig config_;
  ClientOptions options_;
  ssl::context tls_;
  std::string host_header_;
  std::string token_;
  bool token_read_ = false;
  Clock::time_point token_read_at_;
};

namespace {

// One request on its own TLS connection: resolve, connect, handshake, write, read. One timer
// bounds it all; when it fires the socket is closed and the pending operation fails.
class Exchange : public ApiClient::Call, public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::shared_ptr<ApiClient::Impl> client, std::string target,
           std::chrono::milliseconds timeout, std::function<bool(std::string_view)> on_line,
           std::function<void(ApiResponse)> done)
      : client_(std::move(client)),
        resolver_(client_->io_),
        stream_(client_->io_, client_->tls_),
        timer_(client_->io_),
        target_(std::move(target)),
        timeout_(timeout),
        on_line_(std::move(on_line)),
        done_(std::move(done)) {}

  void Start() {
    std::string err;
    auto token = client_->Token(&err);
    if (!token) {
      // Posted: `done` never runs inside Get()/Watch(), before the caller holds the call.
      asio::post(client_->io_,
                 [self = shared_from_this(), err] { self->Finish(ApiError::kCredentials, err); });
      return;
    }
    token_ = std::move(*token);
    timer_.expires_after(timeout_);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->finished_) return;
      self->timed_out_ = true;
      self->Abort();
    });
    const auto& cfg = client_->config_;
    resolver_.async_resolve(
        cfg.host, std::to_string(cfg.port),
        [self = shared_from_this()](boost::system::error_code ec, tcp::resolver::results_type r) {
          if (ec) return self->Fail(ApiError::kResolve, "resolve: " + ec.message());
          self->Connect(r);
        });
  }

  void Cancel() override {
    if (finished_) return;
    cancelled_ = true;
    finished_ = true;
    timer_.cancel();
    Abort();
  }

 private:
  void Abort() {
    resolver_.cancel();
    boost::system::error_code ec;
    stream_.lowest_layer().close(ec);
  }

  void Connect(const tcp::resolver::results_type& results) {
    asio::async_connect(
        stream_.lowest_layer(), results,
        [self = shared_from_this()](boost::system::error_code ec, const tcp::endpoint&) {
          if (ec) return self->Fail(ApiError::kConnect, "connect: " + ec.message());
          self->Handshake();
        });
  }

  void Handshake() {
    const auto& cfg = client_->config_;
    if (!IsIpLiteral(cfg.host)) {
      // SNI (RFC 6066): API servers behind a shared front end pick the certificate by it.
      SSL_set_tlsext_host_name(stream_.native_handle(), cfg.host.c_str());
    }
    if (!cfg.insecure_skip_tls_verify) {
      stream_.set_verify_callback(ssl::host_name_verification(cfg.host));
    }
    stream_.async_handshake(ssl::stream_base::client,
                            [self = shared_from_this()](boost::system::error_code ec) {
                              if (ec) return self->Fail(ApiError::kTls, "TLS: " + ec.message());
                              self->Write();
                            });
  }

  void Write() {
    request_.method(http::verb::get);
    request_.target(target_);
    request_.version(11);
    request_.set(http::field::host, client_->host_header_);
    request_.set(http::field::user_agent, std::string("podnet-exporter/") + kVersion);
    request_.set(http::field::accept, "application/json");
    if (!token_.empty()) request_.set(http::field::authorization, "Bearer " + token_);
    request_.keep_alive(false);
    http::async_write(stream_, request_,
                      [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                        if (ec)
                          return self->Fail(ApiError::kConnectionLost, "write: " + ec.message());
                        self->ReadHeader();
                      });
  }

  void ReadHeader() {
    parser_.header_limit(static_cast<std::uint32_t>(client_->options_.max_header_bytes));
    parser_.body_limit(client_->options_.max_body_bytes);
    http::async_read_header(stream_, buffer_, parser_,
                            [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                              if (ec) return self->ReadFailed(ec, "response header");
                              self->OnHeader();
                            });
  }

  void OnHeader() {
    auto& res = parser_.get();
    status_ = res.result_int();
    if (auto it = res.find(http::field::retry_after); it != res.end()) {
      std::string_view v(it->value().data(), it->value().size());
      unsigned int s = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), s);
      if (ec == std::errc{} && p == v.data() + v.size()) retry_after_ = std::chrono::seconds(s);
    }
    if (status_ == 401) client_->InvalidateToken();
    streaming_ = on_line_ && status_ >= 200 && status_ < 300;
    if (!streaming_) {
      if (on_line_) parser_.body_limit(64 * 1024);  // a watch's error Status is small
      http::async_read(stream_, buffer_, parser_,
                       [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                         if (ec) return self->ReadFailed(ec, "response body");
                         self->body_ = std::move(self->parser_.get().body());
                         self->Finish(ApiError::kNone, "");
                       });
      return;
    }
    parser_.body_limit(boost::none);  // a watch streams for minutes; each event is bounded
    ReadStream();
  }

  void ReadStream() {
    if (parser_.is_done()) {
      std::string& rest = parser_.get().body();
      if (!rest.empty() && !stopped_by_reader_) on_line_(rest);
      return Finish(ApiError::kNone, "");
    }
    http::async_read_some(stream_, buffer_, parser_,
                          [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                            if (ec) return self->ReadFailed(ec, "watch stream");
                            if (!self->DeliverLines()) return;
                            self->ReadStream();
                          });
  }

  // Hands every complete line received so far to on_line_ and drops it from the body. False
  // when the reader stopped, a line is too long or the call was cancelled by a callback.
  bool DeliverLines() {
    std::string& body = parser_.get().body();
    std::size_t start = 0;
    for (std::size_t nl = body.find('\n'); nl != std::string::npos; nl = body.find('\n', start)) {
      std::string_view line(body.data() + start, nl - start);
      start = nl + 1;
      if (line.empty() || line == "\r") continue;
      if (!on_line_(line)) {
        stopped_by_reader_ = true;
        Finish(ApiError::kNone, "");
        return false;
      }
      if (finished_) return false;  // cancelled from inside on_line_
    }
    body.erase(0, start);
    if (body.size() > client_->options_.max_event_bytes) {
      Fail(ApiError::kTooLarge,
           "a watch event over " + std::to_string(client_->options_.max_event_bytes) + " bytes");
      return false;
    }
    return true;
  }

  void ReadFailed(boost::system::error_code ec, const std::string& what) {
    if (ec == http::error::body_limit || ec == http::error::header_limit ||
        ec == http::error::buffer_overflow) {
      return Fail(ApiError::kTooLarge, what + ": " + ec.message());
    }
    if (ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return Fail(ApiError::kBadResponse, what + ": " + ec.message());
    }
    Fail(ApiError::kConnectionLost, what + ": " + ec.message());
  }

  void Fail(ApiError error, std::string detail) {
    if (timed_out_) {
      error = ApiError::kTimeout;
      detail = "deadline of " + std::to_string(timeout_.count()) + " ms passed (" + detail + ")";
    }
    Finish(error, std::move(detail));
  }

  void Finish(ApiError error, std::string detail) {
    if (finished_) return;
    finished_ = true;
    timer_.cancel();
    boost::system::error_code ec;
    stream_.lowest_layer().close(ec);
    if (cancelled_) return;
    ApiResponse r;
    r.error = error;
    r.detail = std::move(detail);
    r.status = error == ApiError::kNone ? status_ : 0;
    r.body = std::move(body_);
    r.retry_after = retry_after_;
    auto done = std::move(done_);
    if (done) done(std::move(r));
  }

  std::shared_ptr<ApiClient::Impl> client_;
  tcp::resolver resolver_;
  ssl::stream<tcp::socket> stream_;
  asio::steady_timer timer_;
  std::string target_;
  std::chrono::milliseconds timeout_;
  std::function<bool(std::string_view)> on_line_;  // empty for a GET
  std::function<void(ApiResponse)> done_;
  std::string token_;
  http::request<http::empty_body> request_;
  boost::beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
  int status_ = 0;
  std::chrono::seconds retry_after_{0};
  std::string body_;
  bool streaming_ = false;
  bool stopped_by_reader_ = false;
  bool timed_out_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<ApiClient> ApiClient::Create(asio::io_context& io, ApiConfig config,
                                             ClientOptions options, std::string* error) {
  std::shared_ptr<Impl> impl;
  try {
    impl = std::make_shared<Impl>(io, config, options);
  } catch (const boost::system::system_error& e) {  // SSL_CTX_new failed: no memory, no TLS
    *error = std::string("TLS context: ") + e.what();
    return nullptr;
  }
  if (!impl->Init(error)) return nullptr;
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(config), std::move(impl)));
}

ApiClient::ApiClient(ApiConfig config, std::shared_ptr<Impl> impl)
    : config_(std::move(config)), impl_(std::move(impl)) {}

ApiClient::~ApiClient() = default;

std::shared_ptr<ApiClient::Call> ApiClient::Get(std::string target,
                                                std::function<void(ApiResponse)> done) {
  auto call = std::make_shared<Exchange>(impl_, std::move(target), impl_->options_.request_timeout,
                                         nullptr, std::move(done));
  call->Start();
  return call;
}

std::shared_ptr<ApiClient::Call> ApiClient::Watch(std::string target,
                                                  std::chrono::milliseconds timeout,
                                                  std::function<bool(std::string_view)> on_line,
                                                  std::function<void(ApiResponse)> done) {
  auto call = std::make_shared<Exchange>(impl_, std::move(target), timeout, std::move(on_line),
                                         std::move(done));
  call->Start();
  return call;
}

}  // namespace podnet::discovery::kubernetes
